#!/bin/bash
# t_bridge_batch.sh: the 2025-03-26 revision through the bridge, the one
# whose clients may send JSON-RPC batches, end to end with requests built
# by hand and sent with curl from inside a sandbox to the reference server
# over stdio. Shown here: initialize negotiating 2025-03-26; a batch of a
# tools/list, an allowed and a denied tools/call answered with three
# responses, the denied one refused and recorded as a denial beside the
# allowed one's record (each element its own decision and record); a batch
# with a malformed element (its own -32600, the others served); one of
# notifications only (202); an empty one (one -32600); one over the bound
# of 16 (400); a batch in a 2025-11-25 session, and one without a session,
# still refused; the version header naming 2025-03-26 accepted in a
# 2025-11-25 session, an unknown one still 400; a batch's five slow calls
# with four connections allowed to the sandbox: four at once and no
# connection left meanwhile; a client leaving mid-batch, its call still
# recorded; no elicitation carried to a 2025-03-26 session although the
# policy allows it (refused to the upstream, recorded); and the bridge
# serving after each. Torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v curl >/dev/null && command -v node >/dev/null ||
    { not_ok "jq, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
EVERYTHING=$E2E_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
CFG=$E2E_TMP/sluice.yaml POL=$E2E_TMP/policies OUT=$E2E_TMP/out FLAGS=$E2E_TMP/sreq
mkdir -p "$POL" "$OUT" "$FLAGS"
# The upstream runs as the bridge's user: its logs are writable by it.
: >"$FLAGS/calls.log" && : >"$FLAGS/roots.log" && chmod 0777 "$FLAGS" &&
    chmod 0666 "$FLAGS/calls.log" "$FLAGS/roots.log"
cat >"$POL/bt.yaml" <<EOF
version: 1
name: bt
mcp:
  tools:
    - tool: ev/echo
      decision: allow
      args:
        message: {type: string, max_length: 40, pattern: "^[a-z ]*$"}
    - tool: ev/get-sum
      decision: deny
    - tool: ev/trigger-long-running-operation
      decision: allow
      allow_other_args: true
    - tool: sreq/ask
      decision: allow
      args:
        kind: {enum: [elicitation]}
  server_requests:
    - server: sreq
      elicitation: allow
EOF
world_sluiced_config "$CFG" "$POL"
# Four connections a sandbox: a batch's messages in flight count as many.
cat >>"$CFG" <<EOF
limits:
  bridge_connections_per_sandbox: 4
servers:
  - name: ev
    transport: stdio
    command: [$NODE, $EVERYTHING, stdio]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
  - name: sreq
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $FLAGS]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
world_bridge_listening && ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/ev
A=ba$$
TA=$(world_sandbox_token bt alice "$A")
[[ $TA =~ ^[0-9a-f]{64}$ ]] && ok "sandbox created" || { not_ok "sandbox created"; finish; }

# post BODY [CURLARGS...]: the answer's headers and body to $OUT/h and
# $OUT/b; prints the status.
post() {
	local body=$1; shift
	world_sandbox "$A" curl -s -m 30 -X POST -D "$OUT/h" -o "$OUT/b" -w '%{http_code}' \
	    -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
	    -H 'Accept: application/json, text/event-stream' "$@" --data-binary "$body" "${U:-$URL}"
}
# msgs: the JSON-RPC messages of the last answer, one a line, whether it
# came as JSON (an object or an array) or as an event stream.
msgs() {
	if grep -qi '^content-type: text/event-stream' "$OUT/h"; then
		sed -n 's/^data: //p' "$OUT/b" | grep -v '^$' | jq -c 'if type == "array" then .[] else . end'
	else
		jq -c 'if type == "array" then .[] else . end' "$OUT/b"
	fi
}
# open VERSION: a session of VERSION (initialize, initialized); prints
# "<negotiated> <session id>".
open() {
	local st sid
	st=$(post "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"$1\",\"capabilities\":{},\"clientInfo\":{\"name\":\"curl\",\"version\":\"1\"}}}")
	sid=$(awk -F': ' 'tolower($1) == "mcp-session-id" { print $2 }' "$OUT/h" | tr -d '\r')
	[ "$st" = 200 ] || return 1
	echo "$(msgs | jq -r .result.protocolVersion) $sid"
	post '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
	    -H "Mcp-Session-Id: $sid" >/dev/null
}
# alive SID: a lone ping in session SID is answered.
alive() {
	[ "$(post '{"jsonrpc":"2.0","id":"p","method":"ping"}' -H "Mcp-Session-Id: $1")" = 200 ] &&
	    [ "$(msgs | jq -r 'select(.id == "p") | .result | type')" = object ]
}
decisions() {	# decisions TOOL: its mcp.call records' decisions in order
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$A" \
	    2>/dev/null | jq -r --arg t "$1" 'select(.tool == $t) | .decision' | tr '\n' ' ' | sed 's/ $//'
}

# ---------------------------------------------------------------- initialize
read -r V S <<<"$(open 2025-03-26)"
check_eq "initialize asking for 2025-03-26 gets it, with a session" "2025-03-26 1" \
    "$V $(grep -c '^[0-9a-f]\{64\}$' <<<"$S")"
H=(-H "Mcp-Session-Id: $S")

# ---------------------------------------------------------------- a batch
B1='[{"jsonrpc":"2.0","id":10,"method":"tools/list"},
 {"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","arguments":{"message":"batched"}}},
 {"jsonrpc":"2.0","id":"twelve","method":"tools/call","params":{"name":"get-sum","arguments":{"a":1,"b":2}}}]'
check_eq "a batch of a list, an allowed and a denied call: 200" 200 "$(post "$B1" "${H[@]}")"
check_eq "three responses, one for each request" "10 11 twelve" \
    "$(msgs | jq -r .id | sort | tr '\n' ' ' | sed 's/ $//')"
check_eq "the list shows what the policy shows" "echo,trigger-long-running-operation" \
    "$(msgs | jq -r 'select(.id == 10) | [.result.tools[].name] | join(",")')"
check_eq "the allowed call is the upstream's answer" "Echo: batched" \
    "$(msgs | jq -r 'select(.id == 11) | .result.content[0].text')"
check_eq "the denied call is refused as a tool error" "true" \
    "$(msgs | jq -r 'select(.id == "twelve") | .result.isError')"
check_eq "answered as an event stream, since calls waited for the upstream" 1 \
    "$(grep -ci '^content-type: text/event-stream' "$OUT/h")"
wait_for 10 sh -c "[ -n \"\$(\"$SLUICE\" audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox $A 2>/dev/null | grep get-sum)\" ]"
check_eq "each call has its own record: echo allowed, get-sum denied" "allow deny" \
    "$(decisions echo) $(decisions get-sum)"
check "the bridge keeps serving after it" alive "$S"

# ---------------------------------------------------------------- malformed
B2='[{"jsonrpc":"2.0","id":20,"method":"ping"},
 {"jsonrpc":"1.0","id":21,"method":"ping"},
 42,
 {"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"echo","arguments":{"message":"still"}}},
 {"jsonrpc":"2.0","id":24,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}]'
check_eq "a batch with malformed elements: 200" 200 "$(post "$B2" "${H[@]}")"
check_eq "each malformed one gets its own -32600, initialize too, the others are served" \
    "20:ok 21:-32600 23:Echo: still 24:-32600 null:-32600" \
    "$(msgs | jq -r '"\(.id):\(if .error then .error.code elif .result.content then .result.content[0].text else "ok" end)"' |
       LC_ALL=C sort | tr '\n' ' ' | sed 's/ $//')"
check "the bridge keeps serving after it" alive "$S"

# ---------------------------------------------------------------- notifications
B3='[{"jsonrpc":"2.0","method":"notifications/initialized"},
 {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}]'
check_eq "a batch of notifications only: 202, no body" "202 0" \
    "$(post "$B3" "${H[@]}") $(wc -c <"$OUT/b")"
check "the bridge keeps serving after it" alive "$S"

# ---------------------------------------------------------------- empty
check_eq "an empty batch: 400" 400 "$(post '[]' "${H[@]}")"
check_eq "one -32600 Invalid Request, not an array" "object -32600 null" \
    "$(jq -r '"\(type) \(.error.code) \(.id)"' "$OUT/b")"
check "the bridge keeps serving after it" alive "$S"

# ---------------------------------------------------------------- too long
B4=$(jq -nc '[range(17) | {jsonrpc: "2.0", id: ., method: "ping"}]')
check_eq "a batch of 17: 400 -32600, saying the bound" "400 -32600 16" \
    "$(post "$B4" "${H[@]}") $(jq -r '.error.code' "$OUT/b") $(jq -r '.error.message' "$OUT/b" | grep -o 16)"
B5=$(jq -nc '[range(16) | {jsonrpc: "2.0", id: ., method: "ping"}]')
check_eq "a batch of 16: sixteen answers" "200 16" \
    "$(post "$B5" "${H[@]}") $(msgs | jq -r 'select(.result) | .id' | sort -u | wc -l)"
check_eq "all answered at once: one JSON array" "1 array" \
    "$(grep -ci '^content-type: application/json' "$OUT/h") $(jq -r type "$OUT/b")"
check "the bridge keeps serving after it" alive "$S"

# ---------------------------------------------------------------- repeated ids
B6='[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":7,"method":"ping"}]'
check_eq "a batch repeating an id: each answered, as two POSTs would be" "200 2" \
    "$(post "$B6" "${H[@]}") $(msgs | jq -r 'select(.id == 7 and .result) | .id' | wc -l)"

# ---------------------------------------------------------------- bounds
# Five slow calls in one batch, the sandbox allowed four connections: four
# run at once (the POST's own and three counted against the sandbox), the
# fifth waits for one of them, and while they run the sandbox has no
# connection left, as if it had sent them one by one.
count() {	# count KIND: KIND records of the slow tool
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind "$1" --sandbox "$A" \
	    2>/dev/null | jq -r 'select(.tool == "trigger-long-running-operation") | .call_id' | wc -l
}
at_least() { [ "$(count "$1")" -ge "$2" ]; }
B7=$(jq -nc '[range(5) | {jsonrpc: "2.0", id: "slow\(.)", method: "tools/call",
    params: {name: "trigger-long-running-operation", arguments: {duration: 12, steps: 2}}}]')
post "$B7" "${H[@]}" >"$OUT/slow.status" &
slow=$!
cleanup_push "kill $slow"
check "four of the five calls reach the upstream" wait_until 20 at_least mcp.intent 4
check_eq "no more than four at once" 4 "$(count mcp.intent)"
check_fails "meanwhile the sandbox has no connection to spare" \
    world_sandbox "$A" curl -sf -m 5 -o /dev/null -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Mcp-Session-Id: $S" --data-binary '{"jsonrpc":"2.0","id":"x","method":"ping"}' "$URL"
wait "$slow"
check_eq "the batch ends with five answers, each the upstream's" "200 5" \
    "$(cat "$OUT/slow.status") $(msgs | jq -r 'select(.result.content[0].text // "" | test("completed")) | .id' | sort -u | wc -l)"
check "the sandbox's connections are its own again" alive "$S"

# A client that leaves in the middle of a batch: its call goes on and is
# recorded, the bridge keeps serving.
B8='[{"jsonrpc":"2.0","id":"gone1","method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":3,"steps":1}}},
 {"jsonrpc":"2.0","id":"gone2","method":"tools/list"}]'
world_sandbox "$A" curl -s -m 1 -o /dev/null -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "Mcp-Session-Id: $S" --data-binary "$B8" "$URL"
check "a batch whose client left: its call is still recorded" wait_until 20 at_least mcp.call 6
check "the bridge keeps serving after it" alive "$S"

# ---------------------------------------------------------------- elicitation
# 2025-03-26 has no elicitation: what a policy allows a later session is
# never carried to a session of it, refused to the upstream and recorded.
export U=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/sreq
read -r VE SE <<<"$(open 2025-03-26)"
check_eq "a 2025-03-26 session of the eliciting server" 2025-03-26 "$VE"
check_eq "a call whose upstream elicits: answered" 200 \
    "$(post '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"elicitation"}}}' \
       -H "Mcp-Session-Id: $SE")"
check_eq "the upstream got an error, no elicitation reached the client" "object 0" \
    "$(msgs | jq -r 'select(.id == 1) | .result.content[0].text | fromjson | .error | type') $(msgs | grep -c elicitation/create)"
wait_until 10 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$A' 2>/dev/null | grep -q elicitation/create"
check_match "recorded: not forwarded, the revision has none" "revision has none" \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.server_request --sandbox "$A" 2>/dev/null |
       jq -r 'select(.method == "elicitation/create") | .detail')"
unset U

# ---------------------------------------------------------------- later revisions
read -r V2 S2 <<<"$(open 2025-11-25)"
check_eq "a 2025-11-25 session beside it" "2025-11-25" "$V2"
check_eq "a batch in the 2025-11-25 session: 400 -32600" "400 -32600" \
    "$(post '[{"jsonrpc":"2.0","id":1,"method":"ping"}]' -H "Mcp-Session-Id: $S2" \
       -H 'MCP-Protocol-Version: 2025-11-25') $(jq -r .error.code "$OUT/b")"
check_eq "a batch without a session: 400 -32600" "400 -32600" \
    "$(post '[{"jsonrpc":"2.0","id":1,"method":"ping"}]') $(jq -r .error.code "$OUT/b")"
check_eq "the 2025-11-25 session takes a request naming 2025-03-26 in its header" 200 \
    "$(post '{"jsonrpc":"2.0","id":3,"method":"tools/list"}' -H "Mcp-Session-Id: $S2" \
       -H 'MCP-Protocol-Version: 2025-03-26')"
check_eq "an unknown version in the header: still 400" 400 \
    "$(post '{"jsonrpc":"2.0","id":4,"method":"tools/list"}' -H "Mcp-Session-Id: $S2" \
       -H 'MCP-Protocol-Version: 2024-01-01')"
check "the 2025-11-25 session keeps serving" alive "$S2"
check "and so does the 2025-03-26 one" alive "$S"
check "sluiced stops cleanly" world_stop_sluiced
check_fails "sanitizers: no report in sluiced's log" \
    grep -qE 'runtime error|ERROR: (Address|Leak)Sanitizer' "$WORLD_DIR/log/sluiced.log"
finish
