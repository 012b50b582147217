#!/bin/bash
# t_bridge_rev.sh: the stateless 2026-07-28 revision of MCP through the
# bridge, beside the session-based ones, end to end. No SDK speaks it yet,
# so every request is built by hand and sent with curl from inside a
# sandbox to an upstream over stdio (servers/res_server.mjs). Shown here:
# server/discover, tools/list and tools/call allowed and denied by the same
# policy decisions as a session's, every result marked complete (lists
# private and not to be cached), the metadata headers required and held to
# the body (400 HeaderMismatch, the body never overruled), _meta required,
# an unsupported version answered with the supported ones, removed methods
# 404, the sandbox still known by token and address (another sandbox's
# token, or this token from another sandbox: 401), subscriptions/listen
# acknowledging and then carrying the list_changed its filter and policy
# allow, tagged with its id, under the GET stream's bound (half the
# sandbox's connections),
# malformed and oversized bodies answered with the spec's errors while the
# bridge keeps serving, and initialize still opening a session. Torn down
# on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v curl >/dev/null && command -v node >/dev/null ||
    { not_ok "jq, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
CFG=$E2E_TMP/sluice.yaml POL=$E2E_TMP/policies FLAGS=$E2E_TMP/res OUT=$E2E_TMP/out
mkdir -p "$POL" "$FLAGS" "$OUT"
: >"$FLAGS/calls.log" && chmod 0777 "$FLAGS" && chmod 0666 "$FLAGS/calls.log"
for d in allow deny; do
	cat >"$POL/rv$d.yaml" <<EOF
version: 1
name: rv$d
mcp:
  tools:
    - tool: res/touch
      decision: $d
    - tool: res2/touch
      decision: $d
  resources:
    - server: res
      uri: "note://docs/*"
      decision: allow
    - server: res2
      uri: "note://docs/*"
      decision: allow
  prompts:
    - prompt: res/review
      decision: allow
      allow_other_args: true
EOF
done
world_sluiced_config "$CFG" "$POL"
# Eight connections a sandbox: its streams may take four.
cat >>"$CFG" <<EOF
limits:
  bridge_connections_per_sandbox: 8
servers:
  - name: res
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/res_server.mjs, $FLAGS]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
  - name: res2
    transport: stdio
    command: [/bin/sh, -c, "until [ -e $FLAGS/go ]; do sleep 0.1; done; exec $NODE $WORLD_SERVERS/res_server.mjs $FLAGS"]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
world_bridge_listening && ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/res
A=va$$ B=vb$$ C=vc$$
TA=$(world_sandbox_token rvallow alice "$A")
TB=$(world_sandbox_token rvdeny bob "$B")
TC=$(world_sandbox_token rvallow carol "$C")
[[ $TA =~ ^[0-9a-f]{64}$ && $TB =~ ^[0-9a-f]{64}$ && $TC =~ ^[0-9a-f]{64}$ ]] &&
    ok "sandboxes created" || { not_ok "sandboxes created"; finish; }

V=2026-07-28
# req ID METHOD [PARAMS [VERSION]]: a request of the revision, _meta filled.
req() {
	jq -nc --argjson id "$1" --arg m "$2" --argjson p "${3:-{\}}" --arg v "${4:-$V}" \
	    '{jsonrpc: "2.0", id: $id, method: $m, params: ($p + {_meta: {
	      "io.modelcontextprotocol/protocolVersion": $v,
	      "io.modelcontextprotocol/clientInfo": {name: "curl", version: "1"},
	      "io.modelcontextprotocol/clientCapabilities": {}}})}'
}
# post SBX TOKEN BODY [CURLARGS...]: the answer's body, then its status on
# a line of its own. To $TO when set, else to $URL.
post() {
	local sbx=$1 tok=$2 body=$3; shift 3
	world_sandbox "$sbx" curl -s -m 20 -X POST -w '\n%{http_code}' \
	    -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
	    -H 'Accept: application/json, text/event-stream' "$@" --data-binary "$body" "${TO:-$URL}"
}
# rev SBX TOKEN METHOD NAME BODY [CURLARGS...]: post with the revision's
# headers (NAME empty: no Mcp-Name).
rev() {
	local sbx=$1 tok=$2 m=$3 n=$4 body=$5; shift 5
	post "$sbx" "$tok" "$body" -H "MCP-Protocol-Version: $V" -H "Mcp-Method: $m" \
	    ${n:+-H "Mcp-Name: $n"} "$@"
}
status() { tail -n 1 <<<"$1"; }
body() { sed '$d' <<<"$1"; }
code() { body "$1" | jq -r '.error.code'; }

# ---------------------------------------------------------------- discover
r=$(rev "$A" "$TA" server/discover '' "$(req 1 server/discover)")
check_eq "server/discover: 200" 200 "$(status "$r")"
check_eq "it lists the stateless revision first, then those of initialize" \
    '["2026-07-28","2025-11-25","2025-06-18","2025-03-26"]' "$(body "$r" | jq -c .result.supportedVersions)"
check_eq "complete, the upstream's resources and prompts offered, no logging, sluice named" \
    'complete true true false sluice' \
    "$(body "$r" | jq -r '.result | "\(.resultType) \(.capabilities.resources != null) \(.capabilities.prompts != null) \(.capabilities.logging != null) \(._meta["io.modelcontextprotocol/serverInfo"].name)"')"
hdrs=$(world_sandbox "$A" curl -s -m 20 -D - -o /dev/null -X POST -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "MCP-Protocol-Version: $V" -H 'Mcp-Method: server/discover' \
    --data-binary "$(req 2 server/discover)" "$URL")
check_eq "no session is minted" 0 "$(grep -ci '^mcp-session-id' <<<"$hdrs")"

# ---------------------------------------------------------------- tools
r=$(rev "$A" "$TA" tools/list '' "$(req 3 tools/list)")
check_eq "tools/list: the policy's tools, complete, private, ttlMs 0" \
    '200 touch complete private 0' \
    "$(status "$r") $(body "$r" | jq -r '.result | "\([.tools[].name] | join(",")) \(.resultType) \(.cacheScope) \(.ttlMs)"')"
r=$(rev "$A" "$TA" tools/call touch "$(req 4 tools/call '{"name":"touch","arguments":{}}')")
check_eq "tools/call allowed: the upstream's answer, complete" '200 touched complete' \
    "$(status "$r") $(body "$r" | jq -r '.result | "\(.content[0].text) \(.resultType)"')"
r=$(rev "$B" "$TB" tools/call touch "$(req 5 tools/call '{"name":"touch","arguments":{}}')")
check_eq "tools/call denied by B's policy: a tool error" '200 true' \
    "$(status "$r") $(body "$r" | jq -r '.result.isError')"
rec() {	# rec SBX: the decisions of SBX's mcp.call records of touch
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$1" \
	    2>/dev/null | jq -r 'select(.tool == "touch") | .decision' | tr '\n' ' ' | sed 's/ $//'
}
wait_for 10 sh -c "[ -n \"\$(\"$SLUICE\" audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox $B 2>/dev/null)\" ]"
check_eq "recorded as the session path records them: A allow, B deny" "allow deny" \
    "$(rec "$A") $(rec "$B")"
r=$(rev "$A" "$TA" resources/read note://docs/readme \
    "$(req 6 resources/read '{"uri":"note://docs/readme"}')")
check_eq "resources/read allowed, cacheable privately" '200 complete private' \
    "$(status "$r") $(body "$r" | jq -r '.result | "\(.resultType) \(.cacheScope)"')"

# ---------------------------------------------------------------- headers
CALL=$(req 7 tools/call '{"name":"touch","arguments":{}}')
r=$(rev "$A" "$TA" tools/list '' "$CALL")
check_eq "Mcp-Method tools/list on a tools/call body: 400 HeaderMismatch" '400 -32020' \
    "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" tools/call other "$CALL")
check_eq "Mcp-Name naming another tool: 400 HeaderMismatch" '400 -32020' "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" tools/call "=?base64?$(printf touch | base64)?=" "$CALL")
check_eq "Mcp-Name in the base64 form, decoded: 200" '200 touched' \
    "$(status "$r") $(body "$r" | jq -r '.result.content[0].text')"
r=$(rev "$A" "$TA" tools/call "=?base64?!!!!?=" "$CALL")
check_eq "Mcp-Name with a broken encoding: 400 HeaderMismatch" '400 -32020' "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" tools/call '' "$CALL")
check_eq "tools/call without Mcp-Name: 400 HeaderMismatch" '400 -32020' "$(status "$r") $(code "$r")"
r=$(post "$A" "$TA" "$CALL" -H "MCP-Protocol-Version: $V" -H 'Mcp-Name: touch')
check_eq "without Mcp-Method: 400 HeaderMismatch" '400 -32020' "$(status "$r") $(code "$r")"
r=$(post "$A" "$TA" "$CALL" -H 'Mcp-Method: tools/call' -H 'Mcp-Name: touch')
check_eq "without MCP-Protocol-Version: 400 HeaderMismatch" '400 -32020' "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" tools/list touch "$(req 8 tools/list)")
check_eq "Mcp-Name on a request that names nothing: 400" '400 -32020' "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" tools/list '' '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}')
check_eq "_meta without clientCapabilities: 400 Invalid params" '400 -32602' "$(status "$r") $(code "$r")"
r=$(post "$A" "$TA" "$(req 10 tools/list '{}' 1900-01-01)" -H 'MCP-Protocol-Version: 1900-01-01' \
    -H 'Mcp-Method: tools/list')
check_eq "an unknown version: 400 -32022 with what is supported and what was asked" \
    '400 -32022 2026-07-28 1900-01-01' \
    "$(status "$r") $(body "$r" | jq -r '.error | "\(.code) \(.data.supported[0]) \(.data.requested)"')"
r=$(rev "$A" "$TA" ping '' "$(req 11 ping)")
check_eq "ping, gone in this revision: 404 Method not found" '404 -32601' "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" resources/subscribe '' "$(req 12 resources/subscribe '{"uri":"note://docs/readme"}')")
check_eq "resources/subscribe, replaced by listen: 404" '404 -32601' "$(status "$r") $(code "$r")"

# ---------------------------------------------------------------- identity
r=$(rev "$A" "$TC" tools/list '' "$(req 13 tools/list)")
check_eq "from A with C's token: 401" 401 "$(status "$r")"
r=$(rev "$C" "$TA" tools/list '' "$(req 14 tools/list)")
check_eq "A's token from C's address: 401" 401 "$(status "$r")"
r=$(rev "$A" 0000 tools/list '' "$(req 15 tools/list)")
check_eq "a wrong token: 401" 401 "$(status "$r")"

# ---------------------------------------------------------------- listen
LISTEN=$(req 77 subscriptions/listen '{"notifications":{"resourcesListChanged":true,"promptsListChanged":true,"toolsListChanged":true}}')
world_sandbox "$A" curl -s -N -m 30 -X POST -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "MCP-Protocol-Version: $V" -H 'Mcp-Method: subscriptions/listen' \
    --data-binary "$LISTEN" "$URL" >"$OUT/listen" 2>&1 &
wait_for 10 grep -q 'subscriptions/acknowledged' "$OUT/listen" &&
    ok "subscriptions/listen opens a stream" || not_ok "subscriptions/listen opens a stream"
check_eq "the acknowledgment comes first, with the id and what is honored (no tools)" \
    '77 promptsListChanged,resourcesListChanged' \
    "$(sed -n 's/^data: //p' "$OUT/listen" | head -n 1 |
      jq -r '"\(.params._meta["io.modelcontextprotocol/subscriptionId"]) \(.params.notifications | keys | join(","))"')"
rev "$C" "$TC" tools/call touch "$(req 16 tools/call '{"name":"touch","arguments":{}}')" >/dev/null
wait_for 10 grep -q 'resources/list_changed' "$OUT/listen" &&
    ok "a list_changed reaches the listen stream" || not_ok "a list_changed reaches the listen stream"
check_eq "tagged with the subscription's id" 77 \
    "$(sed -n 's/^data: //p' "$OUT/listen" | grep resources/list_changed | head -n 1 |
      jq -r '.params._meta["io.modelcontextprotocol/subscriptionId"]')"
wait_for 10 grep -q 'prompts/list_changed' "$OUT/listen" &&
    ok "and a prompts list_changed" || not_ok "and a prompts list_changed"
check_eq "nothing else on it: no resources/updated (not asked for)" 0 \
    "$(grep -c 'resources/updated' "$OUT/listen")"
r=$(rev "$A" "$TA" subscriptions/listen '' "$(req 17 subscriptions/listen '{}')")
check_eq "listen without a filter: 400 Invalid params" '400 -32602' "$(status "$r") $(code "$r")"

# A listen that reaches an upstream before its handshake is acknowledged
# once the upstream has said what it offers (res2 starts only once
# $FLAGS/go exists).
world_sandbox "$A" curl -s -N -m 30 -X POST -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "MCP-Protocol-Version: $V" -H 'Mcp-Method: subscriptions/listen' \
    --data-binary "$(req '"first"' subscriptions/listen '{"notifications":{"resourcesListChanged":true}}')" \
    "$URL"2 >"$OUT/listen2" 2>&1 &
wait_for 10 test -s "$OUT/listen2" && ok "the listen stream opens before res2 answers" ||
    not_ok "the listen stream opens before res2 answers"
check_eq "with no acknowledgment yet" 0 "$(grep -c 'subscriptions/acknowledged' "$OUT/listen2")"
touch "$FLAGS/go"
wait_for 20 grep -q 'subscriptions/acknowledged' "$OUT/listen2" &&
    ok "acknowledged once res2 has answered" || not_ok "acknowledged once res2 has answered"
check_eq "with what the upstream offers, under a string id" 'first resourcesListChanged' \
    "$(sed -n 's/^data: //p' "$OUT/listen2" | head -n 1 |
      jq -r '"\(.params._meta["io.modelcontextprotocol/subscriptionId"]) \(.params.notifications | keys | join(","))"')"
TO=${URL}2 rev "$C" "$TC" tools/call touch "$(req 21 tools/call '{"name":"touch","arguments":{}}')" >/dev/null
wait_for 10 grep -q 'resources/list_changed' "$OUT/listen2" &&
    ok "and then hears that upstream's list_changed" || not_ok "and then hears that upstream's list_changed"

# The GET stream's bound: D's listens take at most half its 8 connections;
# a fifth and sixth end its oldest, and D still gets answers.
D=vd$$
TD=$(world_sandbox_token rvallow dave "$D")
dpids=()
for i in 1 2 3 4 5 6; do
	world_sandbox "$D" curl -s -N -m 60 -X POST -H "Authorization: Bearer $TD" \
	    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	    -H "MCP-Protocol-Version: $V" -H 'Mcp-Method: subscriptions/listen' \
	    --data-binary "$(req "$i" subscriptions/listen '{"notifications":{"promptsListChanged":true}}')" \
	    "$URL" >"$OUT/d.$i" 2>&1 &
	dpids+=($!)
	# Open before the next: the order the bound ends them in is known.
	wait_for 10 grep -q acknowledged "$OUT/d.$i" || break
done
alive() { kill -0 "$1" 2>/dev/null; }
nalive() { local n=0 p; for p in "${dpids[@]}"; do alive "$p" && n=$((n + 1)); done; echo $n; }
nalive_le() { [ "$(nalive)" -le "$1" ]; }
wait_for 20 nalive_le 4
check_eq "D holds at most 4 listen streams: its first 2 ended" "dead dead alive alive alive alive" \
    "$(for p in "${dpids[@]}"; do alive "$p" && echo alive || echo dead; done | tr '\n' ' ' | sed 's/ $//')"
r=$(rev "$D" "$TD" tools/list '' "$(req 20 tools/list)")
check_eq "D still gets answers beside its streams" 200 "$(status "$r")"
world_host "$SLUICE" -s "$WORLD_SOCK" sandbox rm "$D" >/dev/null 2>&1
wait_for 10 nalive_le 0 && ok "removing D closes its listen streams" ||
    not_ok "removing D closes its listen streams"

# ---------------------------------------------------------------- hostile
r=$(rev "$A" "$TA" tools/list '' '{"jsonrpc":"2.0","id":1,"method":')
check_eq "malformed JSON: 400 Parse error" '400 -32700' "$(status "$r") $(code "$r")"
head -c 5000000 /dev/zero | tr '\0' 'a' >"$OUT/big"
r=$(world_sandbox "$A" curl -s -m 20 -X POST -w '\n%{http_code}' -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H "MCP-Protocol-Version: $V" -H 'Mcp-Method: tools/list' --data-binary "@$OUT/big" "$URL")
check_eq "an oversized body: 413" 413 "$(status "$r")"
r=$(rev "$A" "$TA" tools/list '' "[$(req 18 tools/list)]")
check_eq "a batch: 400" '400 -32600' "$(status "$r") $(code "$r")"
r=$(rev "$A" "$TA" server/discover '' "$(req 19 server/discover)")
check_eq "the bridge keeps serving" 200 "$(status "$r")"

# ---------------------------------------------------------------- beside
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
hdrs=$(world_sandbox "$A" curl -s -m 20 -D - -o "$OUT/init" -X POST -H "Authorization: Bearer $TA" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    --data-binary "$INIT" "$URL")
check_eq "initialize still opens a 2025-11-25 session" '2025-11-25 1' \
    "$(jq -r .result.protocolVersion "$OUT/init") $(grep -ci '^mcp-session-id' <<<"$hdrs")"
r=$(post "$A" "$TA" '{"jsonrpc":"2.0","id":2,"method":"tools/list"}')
check_eq "a legacy request without a session: 400 as before" 400 "$(status "$r")"
finish
