#!/bin/bash
# t_hostile_limits.sh: a hostile sandbox, or a few of them together, must
# not be able to take the daemon's shared resources from the others. Four
# sandboxes each holding 256 half-sent HTTP requests used to lock every
# other sandbox out of the MCP bridge; one request trickled a byte a second
# kept its connection for ever; a flood of DNS queries over a sandbox's rate
# wrote two audit records per query (140 MB of log in six seconds); and under
# a soft descriptor limit of 256 (systemd's default is 1024) the daemon ran
# out of descriptors so that `sandbox create` failed. Here, with the default
# `limits:` of the config: the flooders are refused past their share while a
# fifth sandbox is answered, the trickle is cut off by the request deadline,
# a DNS TCP flood leaves another sandbox's TCP query alone, a UDP flood
# neither fills the log nor raises another sandbox's DNS latency past twice
# its quiet median, and `sandbox create` succeeds under a soft limit of 256
# while sandboxes hold connections. The hostile side is tests/e2e/tools/
# hostile.py (standard library only), bounded in count and time, talking
# only to the service address of the world's sluiced.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq curl python3 ss; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
world_up || { not_ok "world_up"; finish; }

POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
SVC=$WORLD_SERVICE
BP=$WORLD_BRIDGE_PORT
HOSTILE=$E2E_DIR/tools/hostile.py
DB=$WORLD_DIR/state/audit.db
world_sluiced_config "$CFG" "$POL"
# A policy with the default DNS rate (50 a second, a burst of 100).
cat >"$POL/lim.yaml" <<'EOF'
version: 1
name: lim
egress:
  allow:
    - host: pkg.example.com
      ports: [80]
    - host: "*.wild.example.com"
      ports: [80]
dns:
  types: [A, AAAA]
  rate: {qps: 50, burst: 100}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
mk() {
	sl sandbox create --policy lim --id "$1" >"$E2E_TMP/$1.json" \
	    2>"$E2E_TMP/$1.err" &&
	    [ "$(jq -r .id "$E2E_TMP/$1.json")" = "$1" ]
}
H=(lim$$-h1 lim$$-h2 lim$$-h3 lim$$-h4)
V=lim$$-v
for id in "${H[@]}" "$V"; do
	mk "$id" || { not_ok "sandbox $id created: $(head -c 300 "$E2E_TMP/$id.err")"; finish; }
done
ok "five sandboxes created"
hostile() { local id=$1; shift; world_sandbox "$id" python3 "$HOSTILE" "$@"; }
# bridge_code ID: the HTTP status a whole request of ID gets from the bridge
# (no MCP server is configured: 404 is an answer), 000 for none in 5 s.
bridge_code() {
	world_sandbox "$1" curl -s -o /dev/null -w '%{http_code}' -m 5 \
	    -X POST -H 'Content-Type: application/json' -d '{}' \
	    "http://$SVC:$BP/mcp/x"
}
# opened FILE...: every hostile.py hold has made its connections.
opened() { local f; for f; do grep -q '^opened' "$f" 2>/dev/null || return 1; done; }
# flood_bridge N SECONDS TAG: each of the four flooders opens N half-sent
# requests to the bridge and holds them SECONDS (output in $E2E_TMP/TAG.ID,
# pids in FLOOD_PIDS); returns once all have made their connections.
flood_bridge() {
	local id outs=()
	FLOOD_PIDS=()
	for id in "${H[@]}"; do
		hostile "$id" hold "$SVC" "$BP" "$1" "$2" http \
		    >"$E2E_TMP/$3.$id" 2>&1 &
		FLOOD_PIDS+=($!); outs+=("$E2E_TMP/$3.$id")
	done
	wait_for 15 opened "${outs[@]}" || not_ok "the flooders made their connections"
}

check_eq "the bridge answers a sandbox" 404 "$(bridge_code "$V")"

# ------------------------------------------------ bridge: held connections

# Four sandboxes each open 256 connections and send half a request on each
# (never the blank line), and hold them for 8 s (below the 10 s deadline).
flood_bridge 256 8 hold
check_eq "a fifth sandbox is answered while four hold 256 half-sent requests each" \
    404 "$(bridge_code "$V")"
held=$(world_host ss -Htn state established "( sport = :$BP )" | wc -l)
check "the bridge holds at most 4 x 96 of them (holds $held)" test "$held" -le 392
wait "${FLOOD_PIDS[@]}"
for id in "${H[@]}"; do
	alive=$(sed -n 's/^alive //p' "$E2E_TMP/hold.$id")
	check "$id kept at most its 96 connections (kept ${alive:-?})" \
	    test "${alive:-999}" -le 96
done

# ------------------------------------------------ bridge: slowloris

# One request whose headers come a byte a second: the deadline (10 s from
# the accept) closes it, although it is never idle; 25 s bound.
out=$(hostile "$V" slowloris "$SVC" "$BP" 25)
s=$(printf '%s' "$out" | sed -n 's/^closed-after //p')
check "a request trickled a byte a second is cut off by the deadline ($out)" \
    sh -c "[ -n '$s' ] && awk 'BEGIN { exit !($s <= 16) }'"
check_eq "and the bridge still answers" 404 "$(bridge_code "$V")"

# ------------------------------------------------ DNS over TCP

# One sandbox opens 200 TCP connections to port 53 and sends one byte on
# each; another sandbox's TCP query is answered meanwhile. (Base held this
# too: a source address had at most 8 of the 256 slots. Kept as a guard.)
hostile "${H[0]}" hold "$SVC" 53 200 6 dns >"$E2E_TMP/dnshold" 2>&1 &
pid=$!
wait_for 15 opened "$E2E_TMP/dnshold" || not_ok "the DNS flooder made its connections"
check_eq "another sandbox's DNS query over TCP is answered" 0 \
    "$(hostile "$V" tcpq "$SVC" 53 pkg.example.com)"
wait "$pid"
check "the flooder kept at most 8 connections ($(cat "$E2E_TMP/dnshold" | tr '\n' ' '))" \
    test "$(sed -n 's/^alive //p' "$E2E_TMP/dnshold")" -le 8

# ------------------------------------------------ DNS fairness

# B's median latency over 60 queries (an answer from the proxy's cache:
# what is measured is the proxy's loop, not the upstream), quiet and while
# A floods the UDP port with queries as fast as one Python process can
# send them (about 40,000 a second here, a thousand times A's rate). A lost
# query counts as a 1 s answer. The requirement is "no more than twice";
# the floor of 2 ms over the quiet median is for a loaded two-core machine,
# where a median of a few hundred microseconds moves by that much with the
# scheduler alone (the flood's Python takes a core), not with the proxy.
A=${H[1]}
hostile "$V" lat "$SVC" 53 pkg.example.com 5 >/dev/null
quiet=$(hostile "$V" lat "$SVC" 53 pkg.example.com 60)
before=$(date +%s)
hostile "$A" flood "$SVC" 53 6 300000 wild.example.com >"$E2E_TMP/flood" 2>&1 &
fp=$!
wait_for 5 grep -q '^started' "$E2E_TMP/flood" || not_ok "the DNS flood started"
loud=$(hostile "$V" lat "$SVC" 53 pkg.example.com 60)
wait "$fp"
after=$(date +%s)
mq=$(printf '%s' "$quiet" | awk '{ print $2 }')
ml=$(printf '%s' "$loud" | awk '{ print $2 }')
lim=$((2 * mq)); [ "$lim" -lt $((mq + 2000)) ] && lim=$((mq + 2000))
check "DNS latency of B during A's flood ($(grep '^sent' "$E2E_TMP/flood"); $loud) within max(2x, +2 ms) of quiet ($quiet)" \
    test "${ml:-999999999}" -le "$lim"
# The flood costs no audit record beyond A's rate: the burst, 50 a second
# and one rate_limited record a second (base wrote one and a finding per
# query). Records are written in the background: one not yet written only
# lowers the count.
nrec=$(SLUICE_AUDIT_DB=$DB "$SLUICE" audit tail --kind dns.decision \
    --sandbox "$A" 2>/dev/null | wc -l)
max=$((100 + 51 * (after - before + 2)))
check "A's flood of $(sed -n 's/^sent //p' "$E2E_TMP/flood") queries left $nrec dns.decision records (at most $max)" \
    test "$nrec" -le "$max"

# ------------------------------------------------ descriptors

# sluiced under a soft descriptor limit of 256 (the hard one as it is): it
# raises the soft limit itself, so the four flooders holding 100 bridge
# connections each (400 in all, more than 256) leave `sandbox create` its
# descriptors.
world_stop_sluiced || not_ok "sluiced stops"
old=$(ulimit -Sn)
ulimit -Sn 256
world_start_sluiced "$CFG"; rc=$?
ulimit -Sn "$old"
[ "$rc" -eq 0 ] || { not_ok "sluiced starts under a soft limit of 256"; finish; }
check_match "sluiced raised its descriptor limit" 'descriptors: limit [0-9]+ \(was 256\)' \
    "$(world_sluiced_log)"
flood_bridge 100 15 fdhold
# Within 5 s, while the connections are held (15 s): out of descriptors,
# the control API cannot even accept the request until they are let go.
check "sandbox create succeeds while four sandboxes flood the bridge" \
    timeout 5 nsenter --net="/run/netns/$WORLD_HOST_NS" -- "$SLUICE" \
    -s "$WORLD_SOCK" sandbox create --policy lim --id "lim$$-n"
check_eq "and the new sandbox is answered by the bridge" 404 "$(bridge_code "lim$$-n")"
wait "${FLOOD_PIDS[@]}"
check "the audit log verifies" sh -c \
    "SLUICE_AUDIT_DB='$DB' '$SLUICE' audit verify >/dev/null; r=\$?; [ \$r -eq 0 ] || [ \$r -eq 3 ]"
finish
