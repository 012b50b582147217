#!/bin/bash
# t_namegate.sh: the name gate. An address a sandbox learned from a DNS
# answer opens a TCP flow only for a name that sandbox was answered with
# at that address: the TLS server_name or the HTTP Host is read before a
# byte reaches the server. One server address (192.0.2.10: pkg.example.com,
# short-ttl.example.com and *.wild.example.com all point to it) serves TLS
# on 8443 and HTTP on 8080 (tools/namegate.py) beside the world's HTTP on
# 80 and 443. What passed is proved by the server's log (every server_name
# it was offered, every request it read), what was refused by the reset
# the client got, the server's silence and the net.deny record's reason.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq python3 dig openssl; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
PY=$(command -v python3)
NG=$E2E_DIR/tools/namegate.py

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
mkdir -p "$POL"
# ng-a: one name on every port, with the check each port has, and a name
# with a short answer. ng-b: the same, and one more name at the address.
rules='    - host: pkg.example.com
      ports: [80, 443]
    - host: pkg.example.com
      ports: [8443]
      check: tls
    - host: pkg.example.com
      ports: [8080]
      check: http
    - host: short-ttl.example.com
      ports: [8443]
      check: tls
    - host: ech.example.com
      ports: [8443]
      check: tls'
printf 'version: 1\nname: ng-a\negress:\n  allow:\n%s\ndns:\n  min_ttl: 1s\n' \
    "$rules" >"$POL/ng-a.yaml"
printf 'version: 1\nname: ng-b\negress:\n  allow:\n%s\n%s\ndns:\n  min_ttl: 1s\n' \
    "$rules" '    - host: b.wild.example.com
      ports: [8443]
      check: tls' >"$POL/ng-b.yaml"
world_sluiced_config "$E2E_TMP/sluice.yaml" "$POL"
# Not the default queue number (network.gate_queue): the rules, the
# parent's reader and the DNS process must all agree on the configured one.
QNUM=7743
sed -i "s/^  bridge_port: .*/&\n  gate_queue: $QNUM/" "$E2E_TMP/sluice.yaml"
grep -q "^  gate_queue: $QNUM\$" "$E2E_TMP/sluice.yaml" ||
    { not_ok "a config with gate_queue $QNUM"; finish; }
world_start_sluiced "$E2E_TMP/sluice.yaml" || { not_ok "sluiced starts"; finish; }
PARENT=$_WORLD_SLUICED_PID
DB=$WORLD_DIR/state/audit.db

# The server: a certificate (the client does not check it), TLS and HTTP.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=pkg.example.com \
    -keyout "$E2E_TMP/ng.key" -out "$E2E_TMP/ng.crt" >/dev/null 2>&1 ||
    { not_ok "a test certificate"; finish; }
SLOG=$E2E_TMP/ng-server.log
: >"$SLOG"
world_inet "$PY" "$NG" serve "$SLOG" "$E2E_TMP/ng.crt" "$E2E_TMP/ng.key" \
    "$WORLD_PKG" >"$E2E_TMP/ng-server.out" 2>&1 &
SRV=$!
cleanup_push "kill $SRV 2>/dev/null; wait $SRV 2>/dev/null"
check "the test server is up" wait_for 10 grep -q ready "$SLOG"

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
au() { SLUICE_AUDIT_DB=$DB "$SLUICE" audit "$@"; }
A=ng$$-a
B=ng$$-b
sl sandbox create --policy ng-a --id "$A" >/dev/null || { not_ok "sandbox A"; finish; }
sl sandbox create --policy ng-b --id "$B" >/dev/null || { not_ok "sandbox B"; finish; }
q() { world_sandbox "$1" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" "$2" A; }
# ng ID MODE PORT NAME: the client in sandbox ID; sets PORT_USED and OUT.
ng() {
	local r
	r=$(world_sandbox "$1" timeout 30 "$PY" "$NG" "$2" "$WORLD_PKG" "$3" \
	    "$4" 2>&1)
	PORT_USED=$(printf '%s\n' "$r" | awk '$1 == "port" { print $2; exit }')
	OUT=$(printf '%s\n' "$r" | grep -v '^port ' | tail -n 1)
}
# seen PORT: the server read anything of the client on port PORT.
seen() { grep -qE "^(sni [^ ]+|tls-req|http-req) $1( |\$)" "$SLOG"; }
# deny_rec REASON NAME: a net.deny with that reason and name seen.
deny_rec() {
	au tail --kind net.deny 2>/dev/null |
	    jq -c "select(.reason == \"$1\" and .name == \"$2\")" \
	    2>/dev/null | grep -q .
}
# refused WHAT REASON NAME: the last client was refused, the server saw
# nothing of it, and the gate recorded why.
refused() {
	check_match "$1: refused" '^refused' "$OUT"
	if [ -z "$PORT_USED" ] || seen "$PORT_USED"; then
		not_ok "$1: the server saw nothing of it"
	else
		ok "$1: the server saw nothing of it"
	fi
	check "$1: net.deny with reason $2" wait_for 10 deny_rec "$2" "$3"
}

check_eq "A resolves pkg.example.com" "$WORLD_PKG" "$(q "$A" pkg.example.com)"
# The kernel's list of bound queues (per network namespace): the gate's
# reader is on the configured number, and nothing is on the default one.
qbound() { world_host awk -v q="$1" '$1 == q { f = 1 } END { exit !f }' \
    /proc/net/netfilter/nfnetlink_queue 2>/dev/null; }
check "the gate reads NFQUEUE $QNUM (network.gate_queue)" qbound "$QNUM"
check_fails "and not the default 7741" qbound 7741
# Packets queued so far on the gate's queue (the kernel's id sequence).
qseq() { world_host awk -v q="$QNUM" '$1 == q { print $8 }' \
    /proc/net/netfilter/nfnetlink_queue 2>/dev/null; }

# ---------------------------------------------------------------- allowed
Q0=$(qseq)
ng "$A" tls 8443 pkg.example.com
Q1=$(qseq)
check_match "TLS with the answered name passes" '^ok HTTP/1.1 200' "$OUT"
# Queued until its verdict: the SYN and the ClientHello, never the bare
# ACK that ends the handshake (it carries nothing the gate reads). A
# retransmission could only add to the count, never hide a queued ACK.
check "its bare ACKs were not queued ($Q0 .. $Q1: at most SYN and ClientHello)" \
    test -n "$Q0" -a -n "$Q1" -a $((Q1 - Q0)) -le 2 -a $((Q1 - Q0)) -ge 1
check "and the server was offered that name" \
    grep -q "^sni pkg.example.com $PORT_USED\$" "$SLOG"
ng "$A" http 8080 pkg.example.com
check_match "HTTP (check: http) with the answered name passes" \
    '^ok HTTP/1.1 200' "$OUT"
ng "$A" http 80 pkg.example.com
check_match "HTTP on port 80 (http by default) passes" '^ok HTTP/1.1 200' "$OUT"
ng "$A" split 8443 pkg.example.com
check_eq "a ClientHello in three segments with the name passes" bytes "$OUT"

# ---------------------------------------------------------------- refused
ng "$A" tls 8443 other.example.net
refused "another name's server_name" name_mismatch other.example.net
ng "$A" http 8080 other.example.net
refused "another name's Host" name_mismatch other.example.net
ng "$A" nosni 8443 x
refused "a ClientHello without server_name" no_name ""
ng "$A" split 8443 foreign.example.net
refused "a ClientHello in three segments with a foreign name" \
    name_mismatch foreign.example.net
# encrypted_client_hello: GREASE (a config id no name here publishes) is
# judged by its outer server_name; one with the config id the name's
# HTTPS record publishes (world.sh: ech.example.com, id 0x2a) hides the
# name the server reads, and is refused.
ng "$A" grease 8443 pkg.example.com
check_eq "GREASE ECH with the answered outer name passes" bytes "$OUT"
check "and the server read it" seen "$PORT_USED"
ng "$A" ech 8443 pkg.example.com
check_eq "ECH with a config id pkg.example.com does not publish passes as GREASE" \
    bytes "$OUT"
ng "$A" grease 8443 grease.example.net
refused "GREASE ECH with another name's outer server_name" name_mismatch \
    grease.example.net
check_eq "A resolves ech.example.com (the same address)" "$WORLD_PKG" \
    "$(q "$A" ech.example.com)"
ng "$A" ech 8443 ech.example.com
refused "ECH with the config id ech.example.com publishes" ech ech.example.com
ng "$A" ech 8443 pkg.example.com
refused "the same ECH with an outer name of the same address" ech \
    pkg.example.com
ng "$A" grease 8443 ech.example.com
check_eq "GREASE ECH to ech.example.com (another config id) passes" bytes \
    "$OUT"
ng "$A" http 443 pkg.example.com
refused "plain HTTP on port 443 (tls by default)" not_tls ""
ng "$A" hello 8080 pkg.example.com
refused "TLS on an http port" not_http ""

# ------------------------------------------------------------ a port reused
# The gate remembers a decided flow for a while (packets queued before
# its verdict took hold get the same answer). A new flow on the same
# tuple starts afresh: nothing of the old flow's state counts for it, so
# a request sent 3 s after the new SYN is judged by its name, not refused
# for data the old flow sent more than the 2 s bound ago.
r=$(world_sandbox "$A" timeout 30 "$PY" "$NG" reuse "$WORLD_PKG" 8080 \
    pkg.example.com 2>&1)
check_match "a first flow from one source port passes" \
    '^flow1 ok HTTP/1.1 200' "$(printf '%s\n' "$r" | grep '^flow1 ')"
check_eq "the second flow reused its port" 1 \
    "$(printf '%s\n' "$r" | awk '$1 == "port" { print $2 }' | sort -u | grep -c .)"
check_match "the second flow, its request 3 s after its SYN, passes" \
    '^flow2 ok HTTP/1.1 200' "$(printf '%s\n' "$r" | grep '^flow2 ')"

# ----------------------------------------------------------------- expiry
# short-ttl first (2 s), then pkg (300 s): the kernel's element for the
# address lives on, the short answer does not.
check_eq "A resolves short-ttl.example.com" "$WORLD_PKG" \
    "$(q "$A" short-ttl.example.com)"
check_eq "A resolves pkg.example.com again" "$WORLD_PKG" \
    "$(q "$A" pkg.example.com)"
ng "$A" tls 8443 short-ttl.example.com
check_match "the short answer's name passes while it lives" \
    '^ok HTTP/1.1 200' "$OUT"
sleep 3
ng "$A" tls 8443 pkg.example.com
check_match "3 s later the address is still open for pkg.example.com" \
    '^ok HTTP/1.1 200' "$OUT"
ng "$A" tls 8443 short-ttl.example.com
refused "the expired answer's name" name_mismatch short-ttl.example.com

# ------------------------------------------------------------ per sandbox
check_eq "B resolves b.wild.example.com (the same address)" "$WORLD_PKG" \
    "$(q "$B" b.wild.example.com)"
ng "$B" tls 8443 b.wild.example.com
check_match "B passes with the name it was answered" '^ok HTTP/1.1 200' "$OUT"
ng "$B" tls 8443 pkg.example.com
refused "B with a name only A was answered" name_mismatch pkg.example.com

# ------------------------------------------------------------ flow records
# A 10 MiB upload: its net.flow record carries the bytes the far side's
# counter saw (IP bytes both, the masquerade changes no length) within 1%.
world_inet nft -f - <<'NFT' || not_ok "a counter at the far side"
table inet ngcnt {
	counter up {}
	chain in {
		type filter hook input priority 0; policy accept;
		ip daddr 192.0.2.10 tcp dport 8080 counter name up
	}
}
NFT
cleanup_push "world_inet nft delete table inet ngcnt"
world_inet nft reset counter inet ngcnt up >/dev/null
# A flow ends for conntrack when its entry goes: after TIME_WAIT (120 s by
# default). Short in this world's host namespace (the setting is per
# namespace), so the record is not waited for two minutes.
world_host sysctl -qw net.netfilter.nf_conntrack_tcp_timeout_time_wait=1 ||
    not_ok "a short TIME_WAIT in the world's host namespace"
ng "$A" upload 8080 pkg.example.com
check_match "a 10 MiB upload passes" '^ok HTTP/1.1 200' "$OUT"
UPORT=$PORT_USED
check "the server read all of it" grep -q "^http-body $UPORT 10485760\$" "$SLOG"
far=$(world_inet nft -j list counter inet ngcnt up | jq '.. | objects | select(has("bytes")) | .bytes' | head -n 1)
flow_rec() {
	au tail --kind net.flow 2>/dev/null |
	    jq -c "select(.src.port == $UPORT and .dst.port == 8080)" 2>/dev/null |
	    grep .
}
check "the flow's net.flow record comes when it ends" wait_for 60 flow_rec
rec=$(flow_rec | head -n 1)
out=$(printf '%s' "$rec" | jq -r .bytes_out)
check_match "it names the sandbox" "\"sandbox\":\\{\"id\":\"$A\"" "$rec"
check_eq "and the name the gate read" pkg.example.com "$(printf '%s' "$rec" | jq -r .name)"
check "bytes out ($out) within 1% of the far side's count ($far)" \
    awk -v a="${out:-0}" -v b="${far:-0}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= b / 100) }'
check "bytes in, packets each way, start and end are there" \
    test "$(printf '%s' "$rec" | jq '[.bytes_in, .packets_out, .packets_in, .start_ms, .end_ms] | map(select(. != null and . > 0)) | length')" = 5
check_match "the OCSF feed calls it Network Activity (4001), traffic" \
    '"class_uid":4001' "$(au tail --format ocsf --kind net.flow 2>/dev/null | grep "\"port\":$UPORT" | head -n 1)"

# ------------------------------------------------------------ the gate dies
# A flow open, the DNS process stopped, a ClientHello waits in the
# queue; killed, its queue goes with it, and the next process never saw
# the flow begin.
dns_pid() { pgrep -P "$PARENT" -f -- '--room dns' | head -n 1; }
P=$(dns_pid)
if [ -z "$P" ]; then
	not_ok "the DNS process is there"
	finish
fi
world_sandbox "$A" timeout 60 "$PY" "$NG" wait "$WORLD_PKG" 8443 \
    pkg.example.com "$E2E_TMP/go" >"$E2E_TMP/wait.out" 2>&1 &
W=$!
check "a flow is open" wait_for 10 grep -q '^port ' "$E2E_TMP/wait.out"
kill -STOP "$P"
touch "$E2E_TMP/go"
check "its ClientHello is sent" wait_for 10 grep -q '^sent' "$E2E_TMP/wait.out"
sleep 1
kill -KILL "$P"
newp() { local p; p=$(dns_pid); [ -n "$p" ] && [ "$p" != "$P" ]; }
check "the DNS process is started again" wait_for 15 newp
wait "$W"
WOUT=$(grep -v '^port \|^sent' "$E2E_TMP/wait.out" | tail -n 1)
WPORT=$(awk '$1 == "port" { print $2; exit }' "$E2E_TMP/wait.out")
check_match "the waiting flow fails" '^refused' "$WOUT"
if [ -z "$WPORT" ] || seen "$WPORT"; then
	not_ok "nothing of it reached the server"
else
	ok "nothing of it reached the server"
fi

# ---------------------------------------------------- answers outlive it
# The kernel keeps what a sandbox learned when the DNS process dies, and
# so must the gate: the parent hands the next process the answers the
# kernel took, each with its own expiry, before it serves. A flow to a
# name and address answered before the restart passes without a new
# query; a name never answered at that address, an answer that ended
# while no process held it, and another sandbox's name are still refused.
metrics() {
	world_host curl -s --max-time 30 --unix-socket "$WORLD_SOCK" \
	    http://localhost/metrics
}
dns_up() {
	[ "$(metrics | awk '$1 == "sluice_process_up{room=\"dns\"}" { print $2 }')" = 1 ]
}
deny_count() {
	au tail --kind net.deny 2>/dev/null |
	    jq -c "select(.reason == \"$1\" and .name == \"$2\")" \
	    2>/dev/null | grep -c .
}
# refused_again WHAT REASON NAME: as refused, for a name refused before
# (one more net.deny of it).
refused_again() {
	local n0=$4
	check_match "$1: refused" '^refused' "$OUT"
	if [ -z "$PORT_USED" ] || seen "$PORT_USED"; then
		not_ok "$1: the server saw nothing of it"
	else
		ok "$1: the server saw nothing of it"
	fi
	check "$1: one more net.deny with reason $2" wait_for 10 \
	    test "$(deny_count "$2" "$3")" -gt "${n0:-0}"
}
# as_before WHEN OTHER: A's name passes without a new query, OTHER (a name
# never answered) at the address is refused, B passes with its own name
# and is refused A's.
as_before() {
	local n0
	ng "$A" tls 8443 pkg.example.com
	check_match "$1, not asked again: TLS with the name passes" \
	    '^ok HTTP/1.1 200' "$OUT"
	check "$1: and the server was offered that name" \
	    grep -q "^sni pkg.example.com $PORT_USED\$" "$SLOG"
	ng "$A" tls 8443 "$2"
	refused "$1: another name to the address" name_mismatch "$2"
	ng "$B" tls 8443 b.wild.example.com
	check_match "$1: B passes with its own name" '^ok HTTP/1.1 200' "$OUT"
	n0=$(deny_count name_mismatch pkg.example.com)
	ng "$B" tls 8443 pkg.example.com
	refused_again "$1: B with a name only A was answered" \
	    name_mismatch pkg.example.com "$n0"
}
check "the DNS process serves again" wait_for 15 dns_up
# short-ttl first (2 s), then pkg (300 s): the kernel's element for the
# address lives on (a refresh sets its timeout), the short answer does not.
check_eq "A resolves short-ttl.example.com" "$WORLD_PKG" \
    "$(q "$A" short-ttl.example.com)"
check_eq "A resolves pkg.example.com" "$WORLD_PKG" "$(q "$A" pkg.example.com)"
check_eq "B resolves b.wild.example.com" "$WORLD_PKG" \
    "$(q "$B" b.wild.example.com)"
ng "$A" tls 8443 pkg.example.com
check_match "before the restart: TLS with the answered name passes" \
    '^ok HTTP/1.1 200' "$OUT"
P=$(dns_pid)
if [ -z "$P" ]; then
	not_ok "the DNS process is there"
	finish
fi
# Stopped first: short-ttl's answer (2 s) ends while no process serves.
kill -STOP "$P"
sleep 3
kill -KILL "$P"
check "killed: the DNS process is started again" wait_for 15 newp
check "and serves" wait_for 15 dns_up
as_before "after the restart" restart.example.net
ng "$A" http 8080 pkg.example.com
check_match "after the restart: HTTP with the name passes" \
    '^ok HTTP/1.1 200' "$OUT"
n0=$(deny_count name_mismatch short-ttl.example.com)
ng "$A" tls 8443 short-ttl.example.com
refused_again "after the restart: the answer that ended meanwhile" \
    name_mismatch short-ttl.example.com "$n0"

# ------------------------------------------------------ sluiced restarted
# sluiced itself stopped and started again, its sandboxes kept (adopted
# with their kernel elements): the answers cross through a file of the
# state directory, read once, and the gate judges as before the stop.
world_stop_sluiced
world_start_sluiced "$E2E_TMP/sluice.yaml" ||
    { not_ok "sluiced starts again"; finish; }
PARENT=$_WORLD_SLUICED_PID
check "sluiced again: its DNS process serves" wait_for 15 dns_up
check_fails "the answers' file was read once" \
    test -e "$WORLD_DIR/state/gate-answers"
as_before "sluiced again" again.example.net

# ------------------------------------------------------------ many at once
# Flows the gate has decided are remembered only for their late packets:
# they do not take the places of flows waiting for a name (256 per
# sandbox). Two rounds of 200 flows, the second while the first's
# decisions are remembered: no SYN is dropped, so the sandbox's kernel
# never had to send one again. Last in this file: its 400 flows' ports
# would be in the server's log when a later check asks whether the server
# saw a port. The DNS process was started again just above: A asks anew.
aq() { [ "$(q "$A" pkg.example.com)" = "$WORLD_PKG" ]; }
check "A resolves pkg.example.com again" wait_for 15 aq
synretrans() {
	world_sandbox "$1" awk '$1 == "TcpExt:" { if (!h) { for (i = 2; i <= NF; i++)
	    if ($i == "TCPSynRetrans") c = i; h = 1 } else print $c }' \
	    /proc/net/netstat
}
before=$(synretrans "$A")
check_match "A counts its SYNs sent again" '^[0-9]+$' "$before"
r=$(world_sandbox "$A" timeout 120 "$PY" "$NG" many "$WORLD_PKG" 8080 \
    pkg.example.com 200 2>&1 | tail -n 1)
check_eq "400 flows in two rounds of 200 pass" "ok 400" "$r"
check_eq "and no SYN of theirs was sent again" "${before:-x}" \
    "$(synretrans "$A")"
overload() {
	au tail --kind net.deny 2>/dev/null |
	    jq -c 'select(.reason == "overload")' 2>/dev/null | grep -q .
}
check_fails "nor refused for overload" overload

finish
