#!/bin/bash
# t_hostile_audit.sh: what a sandbox, a host user or a peer makes the daemon
# record is bounded, and a full audit volume never keeps a sandbox alive.
# The audit database lives on a small tmpfs the test mounts. A sandbox that
# sends to 2,000 closed ports of a denied host gets a handful of net.deny
# records, not one per port; junk and well-formed DNS packets to the
# service address from the host namespace (no sandbox) become a summary,
# not one record each. Filling the volume past its low-space threshold is
# a finding before it is full. With the volume full, `sandbox rm` succeeds
# and removes the namespace and the table entries, and a sandbox with a
# short TTL expires; once there is room again the log verifies and holds
# both records (or a log.gap).
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root
world_up || { not_ok "world_up"; finish; }

FS=$E2E_TMP/auditfs
mkdir -p "$FS"
if ! mount -t tmpfs -o size=16m tmpfs "$FS"; then
	ok "# SKIP cannot mount a tmpfs"
	finish
fi
cleanup_push "umount -l '$FS'"
DB=$FS/audit.db
POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
world_sluiced_config "$CFG" "$POL"
sed -i "s|^  db: .*|  db: $DB|" "$CFG"
# The defaults: low under 10 % of the volume free, a reserve (cut to an
# eighth of a small volume) held beside the database.
cat >"$POL/open.yaml" <<'EOF'
version: 1
name: open
egress:
  allow:
    - host: pkg.example.com
      ports: [80]
EOF

world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
ok "sluiced starts with its audit log on a 16 MiB tmpfs"

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
q() { sqlite3 "$DB" "$1" 2>/dev/null; }
au() { SLUICE_AUDIT_DB=$DB "$SLUICE" audit "$@"; }
metrics() { world_host curl -s --max-time 30 --unix-socket "$WORLD_SOCK" http://localhost/metrics; }
verify_ok() { au verify >"$E2E_TMP/verify.out" 2>&1; r=$?; [ $r -eq 0 ] || [ $r -eq 3 ] || { cat "$E2E_TMP/verify.out"; return 1; }; }
gone_ns() { ! test -e "/run/netns/sluice-$1"; }
no_elems() { ! world_host nft list table inet sluice 2>/dev/null | grep -qw -- "$1"; }

A=$(sl sandbox create --policy open --id "ha-$$" | jq -r .id)
[ "$A" = "ha-$$" ] || { not_ok "sandbox create (got '$A')"; finish; }
ok "sandbox $A created"

# ------------------------------------------------------------- net.deny flood

# 2,000 distinct closed ports of the attacker (not allowed): one packet
# each, sent as fast as the sandbox can.
world_sandbox "$A" /usr/bin/python3 - "$WORLD_ATTACKER" <<'EOF'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for port in range(20000, 22000):
    try:
        s.sendto(b"x", (sys.argv[1], port))
    except OSError:
        pass
EOF
nd() { q "SELECT count(*) FROM records WHERE kind = 3 AND sandbox = '$A'"; }
ndsum() { q "SELECT coalesce(sum(json_extract(canon, '\$.count')), 0) FROM records WHERE kind = 3 AND sandbox = '$A'"; }
# The kernel logs a sandbox's denials within a budget and counts the rest
# (counter "unlogged"); what reaches the daemon is counted in the records
# once their seconds are flushed. Together they account for the flood.
unlogged() {
	world_host nft list counter inet sluice unlogged 2>/dev/null |
	    awk '/packets/ { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'
}
settled() {
	local c u
	c=$(ndsum); u=$(unlogged)
	[ "$c" -ge 1 ] && [ $((c + ${u:-0})) -ge 1000 ]
}
wait_for 15 settled
n=$(nd)
echo "# net.deny records for 2000 ports: $n (packets counted: $(ndsum), not logged by the kernel: $(unlogged))"
check "port flood: the denials are recorded or counted (>= 1000 packets)" settled
check "port flood: at most 20 net.deny records (got $n)" test "$n" -le 20

# ------------------------------------------------------------- unknown DNS

# From the host namespace: no sandbox. 300 junk datagrams and 300 queries.
# Nothing but a sandbox link reaches the service address, so none of it
# reaches the proxy, and nothing of it is recorded.
junk() {
	/usr/bin/python3 - "$WORLD_SERVICE" "${1:-}" <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + \
    b"\x03pkg\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
for i in range(300):
    s.sendto(b"\xde\xad\xbe\xef junk %d" % i, (sys.argv[1], 53))
    if sys.argv[2] != "junk-only":
        s.sendto(q, (sys.argv[1], 53))
PY
}
world_host bash -c "$(declare -f junk); WORLD_SERVICE=$WORLD_SERVICE junk"
# Unknown sources have no sandbox column; sandboxes' own queries do.
dnsu() { q "SELECT count(*) FROM records WHERE kind = 2 AND sandbox IS NULL"; }
dnsa() { q "SELECT count(*) FROM records WHERE kind = 2 AND sandbox = '$A'"; }
# A sandbox's own query after the flood, recorded: the proxy's records of
# the flood (if any) were handed to the log before it.
before=$(dnsa)
world_sandbox "$A" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" pkg.example.com >/dev/null 2>&1
wait_for 10 test "$(dnsa)" -gt "$before"
sleep 1
n=$(dnsu)
echo "# dns.decision records for 600 packets from the host: $n"
check_eq "junk DNS from the host: nothing recorded" 0 "$n"

# Junk from inside the sandbox reaches the proxy: malformed packets are
# summarised, not recorded one by one (its well-formed queries are each
# recorded up to its rate limit, by design, so they are not sent here).
before=$(dnsa)
world_sandbox "$A" bash -c "$(declare -f junk); WORLD_SERVICE=$WORLD_SERVICE junk junk-only"
world_sandbox "$A" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" pkg.example.com >/dev/null 2>&1
sleep 6		# a tally interval: its summaries are written
n=$(( $(dnsa) - before ))
echo "# dns.decision records for 300 junk packets from $A: $n"; q "SELECT json_extract(canon, '$.reason'), json_extract(canon, '$.summary'), count(*) FROM records WHERE kind = 2 AND sandbox = '$A' GROUP BY 1, 2" | sed "s/^/#   /"
check "junk DNS from a sandbox: at most 6 records (got $n)" test "$n" -le 6
check "junk DNS from a sandbox: recorded at all (got $n)" test "$n" -ge 1

# ------------------------------------------------------------- low space

# A sandbox that will expire while the volume is full.
T=$(sl sandbox create --policy open --id "hx-$$" --ttl 12s | jq -r .id)
[ "$T" = "hx-$$" ] || not_ok "sandbox with --ttl (got '$T')"

avail() { df -B1 --output=avail "$FS" | tail -n 1 | tr -d ' '; }
# Down to 1 MiB free: under 10 % of the volume, far from full.
fill=$(( $(avail) - 1048576 ))
[ "$fill" -gt 0 ] && fallocate -l "$fill" "$FS/fill1"
lowf() { q "SELECT canon FROM records WHERE kind = 5" | grep -q '"type":"audit.volume_low"'; }
check "low space: an audit.volume_low finding before the volume is full" wait_for 10 lowf
check_eq "low space: sluice_audit_volume_low is 1" 1 \
    "$(metrics | awk '$1 == "sluice_audit_volume_low" { print $2 }')"
has_free_metric() { metrics | grep -q '^sluice_audit_volume_free_bytes [0-9]'; }
check "low space: sluice_audit_volume_free_bytes is exported" has_free_metric

# ------------------------------------------------------------- full volume

dd if=/dev/zero of="$FS/fill2" bs=64k >/dev/null 2>&1
# Records keep coming (DNS from the sandbox) until commits fail.
for i in $(seq 1 20); do
	world_sandbox "$A" dig +tries=1 +time=1 @"$WORLD_SERVICE" "n$i.pkg.example.com" >/dev/null 2>&1
done
echo "# free on the audit volume: $(avail) bytes"
IFA=$(sl sandbox show "$A" | jq -r .interface)
sl sandbox rm "$A" >"$E2E_TMP/rm.out" 2>&1
rc=$?
check_eq "volume full: sandbox rm succeeds" 0 "$rc"
[ "$rc" -eq 0 ] || sed 's/^/#   /' "$E2E_TMP/rm.out"
check "volume full: the namespace is gone" gone_ns "$A"
check "volume full: its table entries are gone" no_elems "$IFA"
check_fails "volume full: no longer listed" sh -c \
    "$SLUICE -s '$WORLD_SOCK' sandbox ls --json 2>/dev/null | jq -r '.sandboxes[].id' | grep -qx '$A'"
check "volume full: the TTL sandbox expires" wait_for 25 gone_ns "$T"

# ------------------------------------------------------------- room again

rm -f "$FS/fill1" "$FS/fill2"
rec_of() { q "SELECT canon FROM records WHERE kind = 7 AND sandbox = '$1'" | grep -q "\"kind\":\"$2\""; }
gap() { q "SELECT canon FROM records WHERE kind = 6" | grep -q '"kind":"log.gap"'; }
del_or_gap() { rec_of "$A" sandbox.delete || gap; }
exp_or_gap() { rec_of "$T" sandbox.expire || gap; }
check "room again: sandbox.delete (or a log.gap) in the log" wait_for 15 del_or_gap
check "room again: sandbox.expire (or a log.gap) in the log" wait_for 15 exp_or_gap
check "sluiced stops cleanly" world_stop_sluiced
check "room again: audit verify passes" verify_ok
check_fails "no sanitizer report in the daemon's log" \
    grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" \
    "$WORLD_DIR/log/sluiced.log"
finish
