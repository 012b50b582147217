#!/bin/bash
# t_hostile_flows.sh: a hostile sandbox cannot use anyone else's flow, and
# nobody but sandboxes reaches the service address.
#
# Conntrack relates packets to flows by addresses and ports alone. Were
# every established or related packet from a sandbox link accepted as
# such, a sandbox allowed no UDP at all could send an ICMP error quoting
# another sandbox's live UDP flow, with a payload of its choosing, to any
# host that sandbox talks to; and a sandbox made on the slot (link and
# address) of a removed one could send on the flows it left behind. Each
# sandbox has a generation of its own, the conntrack mark of every flow it
# opens, and only flows with its own mark pass as established or related.
# The service address (DNS, bridge) answers sandbox links only: a peer on
# the uplink forging a sandbox's address, with rp_filter loose as Ubuntu
# sets it, must neither be recorded as that sandbox nor teach the kernel
# anything. Everything is proved at the far side: packet counters in the
# internet namespace, the attacker's log, the table's sets, the audit log.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq nft python3 dig; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
PY=$(command -v python3)

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
mkdir -p "$POL"
# hf-udp: the UDP sink and two names; hf-none: one web server, no UDP.
cat >"$POL/hf-udp.yaml" <<EOF
version: 1
name: hf-udp
egress:
  allow:
    - cidr: $WORLD_ATTACKER/32
      protocol: udp
      ports: [9999]
    - host: pkg.example.com
      ports: [80]
    - host: web.example.org
      ports: [80]
EOF
cat >"$POL/hf-none.yaml" <<EOF
version: 1
name: hf-none
egress:
  allow:
    - cidr: $WORLD_WEB/32
      ports: [80]
EOF
world_sluiced_config "$E2E_TMP/sluice.yaml" "$POL"
world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "sluiced starts"; finish; }
DB=$WORLD_DIR/state/audit.db

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
au() { SLUICE_AUDIT_DB=$DB "$SLUICE" audit "$@"; }
A=hf$$-a
B=hf$$-b
C=hf$$-c
D=hf$$-d
mk() {
	sl sandbox create --policy "$2" --id "$1" >"$E2E_TMP/$1.json" &&
	    test "$(jq -r .id "$E2E_TMP/$1.json")" = "$1"
}
field() { jq -r ".$2" "$E2E_TMP/$1.json" | cut -d/ -f1; }

# The packets a hostile sandbox sends by hand (raw sockets, IP_HDRINCL).
cat >"$E2E_TMP/hf.py" <<'EOF'
import socket, struct, sys

def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

def iphdr(src, dst, proto, plen):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + plen, 0, 0, 64, proto,
                    0, socket.inet_aton(src), socket.inet_aton(dst))
    return h[:10] + struct.pack("!H", csum(h)) + h[12:]

def udp(sport, dport, data):
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data

def raw(dst, pkt):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.sendto(pkt, (dst, 0))

cmd, a = sys.argv[1], sys.argv[2:]
if cmd == "udp":            # SRC SPORT DST DPORT DATA: a plain datagram
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a[0], int(a[1])))
    s.sendto(a[4].encode(), (a[2], int(a[3])))
elif cmd == "raw_udp":      # SRC SPORT DST DPORT DATA: forged by hand
    u = udp(int(a[1]), int(a[3]), a[4].encode())
    raw(a[2], iphdr(a[0], a[2], 17, len(u)) + u)
elif cmd == "unreach":      # SRC DST ISRC ISPORT IDST IDPORT DATA
    # An ICMP port unreachable from SRC to DST quoting a UDP packet
    # ISRC:ISPORT -> IDST:IDPORT, and after its header DATA.
    u = udp(int(a[3]), int(a[5]), a[6].encode())
    inner = iphdr(a[2], a[4], 17, len(u)) + u
    ic = struct.pack("!BBHI", 3, 3, 0, 0) + inner
    ic = ic[:2] + struct.pack("!H", csum(ic)) + ic[4:]
    raw(a[1], iphdr(a[0], a[1], 1, len(ic)) + ic)
else:
    sys.exit(2)
EOF
# hf ID ARGS...: hf.py ARGS in sandbox ID; hf_inet ARGS...: in inet.
hf() { local id=$1; shift; world_sandbox "$id" "$PY" "$E2E_TMP/hf.py" "$@"; }
hf_inet() { world_inet "$PY" "$E2E_TMP/hf.py" "$@"; }

# What reaches the attacker over the uplink, counted before any socket.
world_inet nft -f - <<EOF || not_ok "counters in inet"
table inet hfcnt {
	counter c_unreach {}
	counter c_udp9999 {}
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		iifname "inet0" ip daddr $WORLD_ATTACKER icmp type destination-unreachable counter name c_unreach
		iifname "inet0" ip daddr $WORLD_ATTACKER udp dport 9999 counter name c_udp9999
	}
}
EOF
cnt() {
	world_inet nft -j list counter inet hfcnt "c_$1" 2>/dev/null |
	    jq '.nftables[] | select(.counter) | .counter.packets'
}
cnt_is() { [ "$(cnt "$1")" = "$2" ]; }

check "sandbox A (no UDP) is created" mk "$A" hf-none
check "sandbox B (UDP to the attacker's sink) is created" mk "$B" hf-udp
AADDR=$(field "$A" address)
BADDR=$(field "$B" address)
check_match "every sandbox has a generation" '^[1-9][0-9]*$' \
    "$(field "$A" generation)"
check_fails "A's and B's generations differ" \
    test "$(field "$A" generation)" = "$(field "$B" generation)"

# ------------------------------------- an ICMP error about another flow
# B keeps a UDP flow to the sink open from a fixed port.
world_attacker_clear
hf "$B" udp "$BADDR" 40000 "$WORLD_ATTACKER" 9999 "b-flow"
check "B's flow reaches the sink" wait_for 5 sh -c \
    "grep -q '\"data\":\"b-flow\"' '$WORLD_DIR/log/attacker.log'"
u0=$(cnt unreach)
# A quotes it: an error whose outer source is A's own address (so that
# anti-spoofing lets it by), sent to the attacker, about a packet
# attacker:9999 -> B:40000, and then A's payload.
hf "$A" unreach "$AADDR" "$WORLD_ATTACKER" "$WORLD_ATTACKER" 9999 \
    "$BADDR" 40000 "EXFIL-A"
# B's error about its own flow, the same bytes: related, and its own.
hf "$B" unreach "$BADDR" "$WORLD_ATTACKER" "$WORLD_ATTACKER" 9999 \
    "$BADDR" 40000 "own-error-B"
check "B's own related ICMP error reaches the attacker" \
    wait_for 5 cnt_is unreach $((u0 + 1))
check_eq "A's ICMP error quoting B's flow does not (one error arrived, B's)" \
    $((u0 + 1)) "$(cnt unreach)"
check "A's error is reported as a denial of A" wait_for 10 sh -c \
    "grep -q 'net.deny sandbox=$A .*proto=icmp .*dst=$WORLD_ATTACKER' '$WORLD_DIR/log/sluiced.log'"

# --------------------------------------------------- a leftover flow
# C may send UDP; its flow to the sink gets an answer (forged in inet by
# the attacker), so conntrack calls it established. C goes, D (no UDP)
# comes on the same slot and sends on C's 5-tuple.
check "sandbox C (UDP) is created" mk "$C" hf-udp
CADDR=$(field "$C" address)
CIF=$(field "$C" interface)
world_attacker_clear
hf "$C" udp "$CADDR" 40001 "$WORLD_ATTACKER" 9999 "c-flow"
check "C's flow reaches the sink" wait_for 5 sh -c \
    "grep -q '\"data\":\"c-flow\"' '$WORLD_DIR/log/attacker.log'"
CNAT=$(world_attacker_log | jq -r 'select(.data == "c-flow") | "\(.src) \(.sport)"' | tail -n 1)
read -r NATIP NATPORT <<<"$CNAT"
hf_inet raw_udp "$WORLD_ATTACKER" 9999 "$NATIP" "${NATPORT:-0}" "reply"
check "C is removed" sl sandbox rm "$C"
check "sandbox D (no UDP) is created" mk "$D" hf-none
check_eq "D has C's link" "$CIF" "$(field "$D" interface)"
check_eq "D has C's address" "$CADDR" "$(field "$D" address)"
check_fails "D's generation is not C's" \
    test "$(field "$D" generation)" = "$(field "$C" generation)"
world_attacker_clear
n0=$(cnt udp9999)
hf "$D" udp "$CADDR" 40001 "$WORLD_ATTACKER" 9999 "d-rides-c"
world_attacker_sync || not_ok "attacker sync"
check_eq "D's datagram on C's leftover flow did not arrive" "" \
    "$(world_attacker_log | grep d-rides-c)"
check_eq "no UDP of D's passed the uplink" "$n0" "$(cnt udp9999)"

# ----------------------------- only sandboxes reach the service address
# A peer on the uplink, rp_filter loose on the uplink and for all (as
# Ubuntu sets it), forges B's source in a DNS query for a name B's policy
# allows.
world_host sysctl -q -w net.ipv4.conf.all.rp_filter=2 \
    "net.ipv4.conf.$WORLD_UPLINK.rp_filter=2" || not_ok "rp_filter loose"
world_inet ip addr add "$BADDR/32" dev lo || not_ok "B's address in inet"
learned_pkg() {
	world_host nft list set inet sluice learned4 2>/dev/null |
	    grep -c "$WORLD_PKG" || true
}
l0=$(learned_pkg)
check_eq "the forged query gets no answer" "" \
    "$(world_inet dig -b "$BADDR" +time=2 +tries=1 @"$WORLD_SERVICE" \
    pkg.example.com A 2>/dev/null | sed -n 's/.*status: \([A-Z]*\).*/\1/p')"
check_eq "nor one from the uplink's own address" "" \
    "$(world_inet dig +time=2 +tries=1 @"$WORLD_SERVICE" \
    uplink-probe.example.com A 2>/dev/null | sed -n 's/.*status: \([A-Z]*\).*/\1/p')"
check_fails "nor a TCP connection to the bridge from the uplink" \
    world_inet curl -s -m 2 "http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/"
# A barrier: B's own query for its other name is recorded (records are
# asynchronous) and answered, so anything recorded before it is there.
check_eq "B's own query is answered" "$WORLD_WEB" \
    "$(world_sandbox "$B" dig +short +time=3 +tries=1 @"$WORLD_SERVICE" web.example.org A 2>/dev/null | tail -n 1)"
web_rec() { au tail --kind dns.decision 2>/dev/null | grep -q 'web.example.org'; }
check "B's own query is recorded" wait_for 10 web_rec
check_eq "no dns.decision for the forged name" "" \
    "$(au tail --kind dns.decision 2>/dev/null | grep -E 'pkg.example.com|uplink-probe')"
check_eq "nothing was learned for the forged name" "$l0" "$(learned_pkg)"

check "A is removed" sl sandbox rm "$A"
check "B is removed" sl sandbox rm "$B"
check "D is removed" sl sandbox rm "$D"
finish
