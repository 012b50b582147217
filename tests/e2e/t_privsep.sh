#!/bin/bash
# t_privsep.sh: what a sandbox sends to port 53 is parsed by a process that
# could not hurt the host if it were taken over, and that process going
# away closes DNS rather than opening anything.
#
# The DNS process is a child of sluiced: its own uid, no capabilities,
# no_new_privs, a seccomp filter (all read from /proc, as an operator
# would), and none of the parent's files open (no audit log, no state
# database, no key). Its answers leave only after the parent has put
# their addresses in the kernel: with the parent stopped, a query is not
# answered at all. Killed, it is restarted and recorded; stopped, DNS is
# closed (no answer, nothing learned) until it is back.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq nft dig pgrep sqlite3; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
id -u sluice-dns >/dev/null 2>&1 || { not_ok "user sluice-dns exists (tests/deps.sh)"; finish; }

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
mkdir -p "$POL"
cat >"$POL/ps-names.yaml" <<-'P'
	version: 1
	name: ps-names
	egress:
	  allow:
	    - host: pkg.example.com
	      ports: [80]
	    - host: web.example.org
	      ports: [80]
	    - host: evil.example.net
	      ports: [22]
P
world_sluiced_config "$E2E_TMP/sluice.yaml" "$POL"
world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "sluiced starts"; finish; }
PARENT=$_WORLD_SLUICED_PID
DB=$WORLD_DIR/state/audit.db

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
metrics() { world_host curl -s --max-time 30 --unix-socket "$WORLD_SOCK" http://localhost/metrics; }
# dns_pid: the DNS process now (a child of sluiced in the dns room), or "".
dns_pid() { pgrep -P "$PARENT" -f -- '--room dns' | head -n 1; }
# dns_settled [NOT_PID]: a DNS process (other than NOT_PID) has finished
# dropping its privileges: its filter, the last step, is on. Until then a
# new one is still the parent's image, as root, between exec and drop.
dns_settled() {
	local p
	p=$(dns_pid)
	[ -n "$p" ] && [ "$p" != "${1:-}" ] &&
	    [ "$(proc_status "$p" Seccomp)" = 2 ]
}
q() { world_sandbox "$S" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" "$1" A; }
resolves() { test "$(q "$1")" = "$2"; }
learned() {
	world_host nft -j list set inet sluice learned4 2>/dev/null |
	    jq -r '.. | objects | select(has("concat")) | .concat | map(tostring) | join(" ")' |
	    grep "^$SI ${1:-}" | grep -c .
}
findings() { sqlite3 "file:$DB?mode=ro" "SELECT count(*) FROM records WHERE kind = 5 AND CAST(canon AS TEXT) LIKE '%\"type\":\"process_exit\"%'" 2>/dev/null; }

S=ps$$-s
sl sandbox create --policy ps-names --id "$S" >"$E2E_TMP/s.json" &&
    test "$(jq -r .id "$E2E_TMP/s.json")" = "$S"
check "sandbox created" test $? -eq 0
SI=$(jq -r .interface "$E2E_TMP/s.json")

# ---------------------------------------------------- 1: what it may do
check "a DNS process runs as a child of sluiced" wait_for 10 dns_settled
P=$(dns_pid)
echo "# dns process: $P"
DNS_UID=$(id -u sluice-dns)
check_eq "its uids are sluice-dns (real, effective, saved, fs)" \
    "$DNS_UID $DNS_UID $DNS_UID $DNS_UID" "$(proc_status "$P" Uid | tr -s '\t ' ' ')"
check_eq "it has no effective capabilities" 0000000000000000 "$(proc_status "$P" CapEff)"
check_eq "it has no permitted capabilities" 0000000000000000 "$(proc_status "$P" CapPrm)"
check_eq "its bounding set is empty" 0000000000000000 "$(proc_status "$P" CapBnd)"
check_eq "no_new_privs is set" 1 "$(proc_status "$P" NoNewPrivs)"
check_eq "a seccomp filter is on (mode 2)" 2 "$(proc_status "$P" Seccomp)"
# Every descriptor is a socket, pipe, eventfd, timerfd or epoll, or the
# standard streams the daemon was given: no file of the parent's.
files=$(for f in /proc/"$P"/fd/*; do readlink "$f"; done |
    grep -v -e '^socket:' -e '^pipe:' -e '^anon_inode:' -e '^/dev/null$' |
    grep -v -F "$WORLD_DIR/log/sluiced.log")
check_eq "it holds no file of the parent's (audit log, databases, key)" "" "$files"

# ------------------------------------------------ 2: it serves, learned first
check_eq "the sandbox resolves an allowed name" "$WORLD_PKG" "$(q pkg.example.com)"
check "its address was learned" test "$(learned "$WORLD_PKG")" -ge 1

# The DNS process learns of a sandbox from a message; a query sent the
# moment `sandbox create` returns must still find it there.
fresh_ok=0
for i in 1 2 3 4 5; do
	F=ps$$-f$i
	sl sandbox create --policy ps-names --id "$F" >/dev/null 2>&1 &&
	    [ "$(world_sandbox "$F" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" pkg.example.com A)" = "$WORLD_PKG" ] &&
	    fresh_ok=$((fresh_ok + 1))
	sl sandbox rm "$F" >/dev/null 2>&1
done
check_eq "five new sandboxes each resolve at once after create" 5 "$fresh_ok"

# With the parent stopped nothing can be learned, so nothing is answered:
# the DNS process holds the answer until the parent's acknowledgement.
check_eq "the name asked next is not learned yet" 0 "$(learned "$WORLD_WEB")"
kill -STOP "$PARENT"
out=$(q web.example.org)
rc=$?
# Read from the kernel while the parent is still stopped.
during=$(learned "$WORLD_WEB")
kill -CONT "$PARENT"
check_eq "parent stopped: the allowed name gets no answer" "" "$(echo "$out" | grep -v '^;;')"
check "parent stopped: dig timed out (exit 9)" test "$rc" -eq 9
check_eq "parent stopped: nothing was learned meanwhile" 0 "$during"
check "parent back: the name resolves" wait_for 10 resolves web.example.org "$WORLD_WEB"
check "parent back: its address is learned" test "$(learned "$WORLD_WEB")" -ge 1

# ------------------------------------------------- 3: stopped, then killed
exits0=$(findings)
kill -STOP "$P"
out=$(q evil.example.net)
rc=$?
check_eq "dns process stopped: no answer" "" "$(echo "$out" | grep -v '^;;')"
check "dns process stopped: dig timed out (exit 9)" test "$rc" -eq 9
check_eq "dns process stopped: nothing learned for the name asked" 0 \
    "$(learned "$WORLD_ATTACKER")"
kill -KILL "$P"
check "killed: a new DNS process is started" wait_for 20 dns_settled "$P"
P2=$(dns_pid)
echo "# new dns process: $P2"
check_eq "the new one has no capabilities either" 0000000000000000 "$(proc_status "$P2" CapEff)"
check_eq "the new one is filtered too" 2 "$(proc_status "$P2" Seccomp)"
check "restarted: the sandbox resolves the name again" wait_for 20 resolves evil.example.net "$WORLD_ATTACKER"
check "restarted: its address is learned" test "$(learned "$WORLD_ATTACKER")" -ge 1
check "the death is recorded (a process_exit finding)" wait_for 10 \
    test "$(findings)" -gt "${exits0:-0}"
ex=$(metrics | awk '$1 == "sluice_process_exits_total{room=\"dns\"}" { print $2 }')
check "sluice_process_exits_total{room=\"dns\"} is at least 1" test "${ex:-0}" -ge 1
check_eq "sluice_process_up{room=\"dns\"} is 1 again" 1 \
    "$(metrics | awk '$1 == "sluice_process_up{room=\"dns\"}" { print $2 }')"

# -------------------------------------------------- 4: it goes with sluiced
world_stop_sluiced
check "the stopped daemon's DNS process is gone" wait_for 5 sh -c "! kill -0 $P2 2>/dev/null"

# ------------------------------------- 5: the build without sanitizers
# The sanitizers need syscalls of their own, which their builds' filters
# allow; a call only the production build makes (a library opening a
# file on first use) would kill its DNS process and nothing else would
# show it. So the same work again with the build operators run.
if [ -x "${SLUICE_PLAIN_BUILD:-}/sluiced" ]; then
	SLUICED=$SLUICE_PLAIN_BUILD/sluiced
	exits0=$(findings)
	world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "the plain build starts"; finish; }
	PARENT=$_WORLD_SLUICED_PID
	check "plain build: a DNS process runs" wait_for 10 dns_settled
	P=$(dns_pid)
	check_eq "plain build: it is filtered" 2 "$(proc_status "$P" Seccomp)"
	check "plain build: the adopted sandbox resolves (UDP)" wait_for 10 resolves pkg.example.com "$WORLD_PKG"
	check_eq "plain build: and over TCP" "$WORLD_WEB" \
	    "$(world_sandbox "$S" dig +tcp +short +time=2 +tries=1 @"$WORLD_SERVICE" web.example.org A)"
	check_eq "plain build: a denied name gets the uniform answer" "" \
	    "$(world_sandbox "$S" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" txt.example.com TXT)"
	sed -i 's/ports: \[22\]/ports: [22, 2222]/' "$POL/ps-names.yaml"
	check "plain build: reload (the set goes to the DNS process as text)" sl reload
	check "plain build: resolves after the reload" resolves evil.example.net "$WORLD_ATTACKER"
	check_eq "plain build: the same DNS process serves (it was never killed)" "$P" "$(dns_pid)"
	check_eq "plain build: no process_exit finding" "${exits0:-0}" "$(findings)"
	world_stop_sluiced
else
	echo "# no build without sanitizers (SLUICE_PLAIN_BUILD): part 5 not run"
fi
finish
