#!/bin/bash
# t_bridge_srvreq.sh: requests an upstream makes of the agent's client,
# end to end. The official SDK client (servers/mcp_client.mjs, offering
# sampling, elicitation and roots and answering each) in a sandbox calls a
# tool of an upstream over stdio (servers/sreq_server.mjs) that, while the
# call is in flight, asks the client for a sample, a form answer or its
# roots, and returns what it got back. Shown here: a kind the policy
# denies (and one it leaves out) is answered to the upstream with a
# JSON-RPC error and never reaches the client; one it allows goes to the
# client on the call's own event stream and the upstream gets the
# client's answer; one it asks about waits for a person, goes to the
# client once approved and is refused when declined; a method no client
# serves is -32601; each is an mcp.server_request record with what was
# asked, its outcome, tied to its call; the OCSF export maps the kind. By
# hand (curl), the client's answer is taken only under the bridge's id
# (never the upstream's), from the session it was sent to, within its
# size bound: a forged id, another session's answer, an oversized one and
# a replay are refused and the bridge keeps serving. notifications/
# cancelled from the SDK client: a call waiting for approval is
# withdrawn, never forwarded, recorded as cancelled and charges no
# budget; an approved call in flight is cancelled upstream under the
# upstream's request id, recorded as cancelled, and its budget stays
# spent. The bridge keeps serving. The daemon config's limits set the
# deadline (a client that never answers: the call still finishes, the
# request recorded no_answer) and the bounds per session and per sandbox
# (one more is refused to the upstream at once, recorded with the bound
# it hit). Roots: offered to an upstream only when a policy may let its
# roots/list through; one it makes outside any call goes to the session
# listening on its GET stream (the one whose roots/list_changed the
# bridge relayed), or, with nobody listening, is refused and recorded
# no_stream. A client of the stateless revision, by hand: asked in an
# InputRequiredResult, its retry with the answers and the requestState
# gets the same call's result; a retry with other arguments, from another
# sandbox, with a forged or replayed state is refused; a kind it did not
# declare is not asked; two asked at once take two rounds, one retry each.
# Torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v nft >/dev/null && command -v curl >/dev/null &&
    command -v node >/dev/null || { not_ok "jq, nft, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }
world_mcp_http_start 3001 || { not_ok "server-everything over HTTP"; finish; }

NODE=$(command -v node)
CFG=$E2E_TMP/sluice.yaml
POL=$E2E_TMP/policies OUT=$E2E_TMP/out FLAGS=$E2E_TMP/sreq FLAGS2=$E2E_TMP/sreq2
mkdir -p "$POL" "$OUT" "$FLAGS" "$FLAGS2"
# The upstream runs as the bridge's user: its logs are writable by it.
: >"$FLAGS/calls.log" && : >"$FLAGS/roots.log" && chmod 0777 "$FLAGS" "$FLAGS2" &&
    chmod 0666 "$FLAGS/calls.log" "$FLAGS/roots.log"

cat >"$POL/sr.yaml" <<EOF
version: 1
name: sr
mcp:
  tools:
    - tool: sreq/ask
      decision: allow
      args:
        kind: {enum: [sampling, elicitation, roots, other]}
  server_requests:
    - server: sreq
      sampling: deny
      elicitation: allow
      roots: ask
EOF
cat >"$POL/cq.yaml" <<EOF
version: 1
name: cq
mcp:
  approval_timeout: 60s
  budgets:
    - name: q
      calls: 100
  tools:
    - tool: sreq/ask
      decision: ask
      budgets: [q]
      args:
        kind: {enum: [sampling, hang]}
EOF
cat >"$POL/fw.yaml" <<EOF
version: 1
name: fw
mcp:
  approval_timeout: 60s
  tools:
    - tool: sreq/ask
      decision: allow
      args:
        kind: {enum: [sampling, elicitation, roots, withdraw, twice]}
    - tool: ev/trigger-sampling-request
      decision: allow
      args:
        prompt: {type: string, max_length: 64}
  server_requests:
    - server: sreq
      sampling: allow
      elicitation: ask
      roots: allow
    - server: ev
      sampling: allow
EOF
cat >"$POL/bare.yaml" <<EOF
version: 1
name: bare
mcp:
  tools:
    - tool: sreq/ask
      decision: allow
      args:
        kind: {enum: [sampling, elicitation, roots, other]}
EOF
servers_cfg() {	# the servers section
	cat <<EOF
servers:
  - name: sreq
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $FLAGS]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
  - name: sreq2
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $FLAGS2]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
  - name: ev
    transport: http
    url: http://$WORLD_MCP:3001/mcp
EOF
}
world_sluiced_config "$CFG" "$POL"
servers_cfg >>"$CFG"
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'" &&
    ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
A=sa$$; B=sb$$; C=sc$$; D=sd$$
TA=$(sl sandbox create --policy sr --subject alice --id "$A" | jq -r .token)
TB=$(sl sandbox create --policy bare --subject bob --id "$B" | jq -r .token)
TC=$(sl sandbox create --policy cq --subject carol --id "$C" | jq -r .token)
TD=$(sl sandbox create --policy fw --subject dave --id "$D" | jq -r .token)
[[ $TA =~ ^[0-9a-f]{64}$ && $TB =~ ^[0-9a-f]{64}$ && $TC =~ ^[0-9a-f]{64}$ &&
    $TD =~ ^[0-9a-f]{64}$ ]] && ok "sandboxes created" ||
    { not_ok "sandboxes created"; finish; }
# ask SBX TOKEN KIND: the SDK client in SBX calls ask(KIND), then says
# which server requests it answered. Two lines: the result, the served.
ask() {
	world_mcp_client "sandbox:$1" --url "$URL/sreq" \
	    --header "Authorization: Bearer $2" --serve-requests \
	    --call ask "{\"kind\":\"$3\"}" --served
}
got() { jq -r 'select(.content) | .content[0].text' "$1" 2>/dev/null | jq -r "$2" 2>/dev/null; }
served() { jq -c 'select(.served) | .served' "$1" 2>/dev/null; }
records() {	# records SBX: every mcp.server_request record of SBX, one a line
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" \
	    --kind mcp.server_request --sandbox "$1" 2>/dev/null
}

# ---------------------------------------------------------------- deny
ask "$A" "$TA" sampling >"$OUT/s" 2>"$OUT/s.err" || sed 's/^/#   /' "$OUT/s.err"
check_eq "denied sampling: the upstream got a JSON-RPC error" -32601 "$(got "$OUT/s" .error.code)"
check_eq "denied sampling: the client never saw it" '[]' "$(served "$OUT/s")"
ask "$B" "$TB" roots >"$OUT/r" 2>"$OUT/r.err" || sed 's/^/#   /' "$OUT/r.err"
check_eq "no server_requests in the policy: roots/list refused" -32601 "$(got "$OUT/r" .error.code)"
check_eq "no server_requests in the policy: the client never saw it" '[]' "$(served "$OUT/r")"

# ---------------------------------------------------------------- allow
npend() { "$SLUICE" -s "$WORLD_SOCK" approvals --json 2>/dev/null | jq -e "length == $1" >/dev/null; }
ask "$D" "$TD" sampling >"$OUT/sd" 2>"$OUT/sd.err" || sed 's/^/#   /' "$OUT/sd.err"
check_eq "allowed sampling reaches the client" '["sampling/createMessage"]' "$(served "$OUT/sd")"
check_eq "the upstream got the client's sample" "sampled by the client e2e-model" \
    "$(got "$OUT/sd" '"\(.result.content.text) \(.result.model)"')"
ask "$D" "$TD" roots >"$OUT/rd" 2>"$OUT/rd.err" || sed 's/^/#   /' "$OUT/rd.err"
check_eq "allowed roots: the upstream got the client's roots" "file:///work" \
    "$(got "$OUT/rd" '.result.roots[0].uri')"
ask "$A" "$TA" elicitation >"$OUT/e" 2>"$OUT/e.err" || sed 's/^/#   /' "$OUT/e.err"
check_eq "allowed elicitation: the upstream got the client's form answer" "accept yes" \
    "$(got "$OUT/e" '"\(.result.action) \(.result.content.answer)"')"
world_mcp_client "sandbox:$D" --url "$URL/ev" --header "Authorization: Bearer $TD" \
    --serve-requests --call trigger-sampling-request '{"prompt":"marker-http"}' --served \
    >"$OUT/hd" 2>"$OUT/hd.err" || sed 's/^/#   /' "$OUT/hd.err"
check_eq "HTTP upstream: its sampling reaches the client" '["sampling/createMessage"]' "$(served "$OUT/hd")"
check_match "HTTP upstream: it got the client's sample" 'sampled by the client' \
    "$(jq -r 'select(.content) | .content[0].text' "$OUT/hd" 2>/dev/null)"

# ---------------------------------------------------------------- ask
ask "$D" "$TD" elicitation >"$OUT/ed" 2>"$OUT/ed.err" &
pe=$!
wait_for 10 npend 1 && ok "asked elicitation waits for approval" ||
    not_ok "asked elicitation waits for approval"
check_eq "the approval names the server request and what it asks" \
    "$D sreq elicitation/create marker-elicitation-please" \
    "$(sl approvals --json | jq -r '.[0] | "\(.sandbox) \(.server) \(.tool) \(.arguments.message)"')"
check "approve it by the CLI" sl approve "$(sl approvals --json | jq -r '.[0].id')" --reason "fine"
wait "$pe" || sed 's/^/#   /' "$OUT/ed.err"
check_eq "approved elicitation reached the client, the upstream got its answer" \
    '["elicitation/create"] accept' "$(served "$OUT/ed") $(got "$OUT/ed" .result.action)"
ask "$A" "$TA" roots >"$OUT/ra" 2>"$OUT/ra.err" &
pr=$!
wait_for 10 npend 1 || not_ok "asked roots waits for approval"
check "decline it by the CLI" sl deny "$(sl approvals --json | jq -r '.[0].id')" --reason "no roots"
wait "$pr" || sed 's/^/#   /' "$OUT/ra.err"
check_eq "declined roots: the upstream got an error, the client never saw it" "-1 []" \
    "$(got "$OUT/ra" .error.code) $(served "$OUT/ra")"
check_eq "nothing waits for approval" 0 \
    "$("$SLUICE" -s "$WORLD_SOCK" approvals --json 2>/dev/null | jq length)"

# ---------------------------------------------------------------- other
ask "$A" "$TA" other >"$OUT/o" 2>"$OUT/o.err" || sed 's/^/#   /' "$OUT/o.err"
check_eq "a method no client serves: -32601 Method not found" "-32601 Method not found" \
    "$(got "$OUT/o" '"\(.error.code) \(.error.message)"')"

# ---------------------------------------------------------------- records
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$A' 2>/dev/null | grep -q roots/list"
check_eq "denied sampling recorded: server, method, decision, reason" \
    "sreq sampling/createMessage deny rule_deny" \
    "$(records "$A" | jq -r 'select(.method == "sampling/createMessage") | "\(.server) \(.method) \(.decision) \(.reason)"' | head -n 1)"
check_match "the record keeps what was asked" 'marker-sampling-please' \
    "$(records "$A" | jq -r 'select(.method == "sampling/createMessage") | .arguments' | head -n 1)"
check_match "the record has the digest of what was asked" '^sha256:[0-9a-f]{64}$' \
    "$(records "$A" | jq -r 'select(.method == "sampling/createMessage") | .arguments_digest' | head -n 1)"
check_match "the record names the call it came in" 'in call [0-9a-f]{32}' \
    "$(records "$A" | jq -r 'select(.method == "sampling/createMessage") | .detail' | head -n 1)"
check_eq "allowed elicitation recorded as allowed" "allow allowed" \
    "$(records "$A" | jq -r 'select(.method == "elicitation/create") | "\(.decision) \(.reason)"' | head -n 1)"
check_match "its record says it was forwarded under the bridge's id and answered" \
    '^forwarded as sluice-[0-9a-f]{32}; answered; policy allow; in call [0-9a-f]{32}$' \
    "$(records "$A" | jq -r 'select(.method == "elicitation/create") | .detail' | head -n 1)"
check_match "its record has the digest of the answer relayed" '^sha256:[0-9a-f]{64}$' \
    "$(records "$A" | jq -r 'select(.method == "elicitation/create") | .result_digest' | head -n 1)"
check_eq "declined roots recorded: denied by a person, policy ask" "deny approval_denied denied" \
    "$(records "$A" | jq -r 'select(.method == "roots/list") | "\(.decision) \(.reason) \(.approval)"' | head -n 1)"
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$D' 2>/dev/null | grep -q elicitation/create"
check_eq "approved elicitation recorded: allowed, approved" "allow allowed approved" \
    "$(records "$D" | jq -r 'select(.method == "elicitation/create") | "\(.decision) \(.reason) \(.approval)"' | head -n 1)"
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$B' 2>/dev/null | grep -q roots/list"
check_eq "the bare policy's roots/list recorded as denied by it" "bare deny rule_deny" \
    "$(records "$B" | jq -r 'select(.method == "roots/list") | "\(.policy.id) \(.decision) \(.reason)"' | head -n 1)"
check_eq "the unknown method is not a server request record" 0 \
    "$(records "$A" | jq -r 'select(.method == "x-unknown/thing")' | wc -l)"
check_match "OCSF export maps mcp.server_request to API Activity of its method" \
    '"class_uid":6003' \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --format ocsf --kind mcp.server_request 2>/dev/null | grep -m1 '"operation":"sampling/createMessage"')"
check_eq "the tool calls themselves are recorded as allowed" 4 \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$A" 2>/dev/null | jq -r 'select(.tool == "ask" and .decision == "allow") | .tool' | wc -l)"

# ---------------------------------------------------------------- by hand
H_ACC='Accept: application/json, text/event-stream'
H_JSON='Content-Type: application/json'
H_VER='MCP-Protocol-Version: 2025-06-18'
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"curl","version":"1"}}}'
session() {	# session FILE: a new session of D by hand, its id in FILE
	world_sandbox "$D" curl -s -m 10 -D "$1.hdr" -o /dev/null -X POST \
	    -H "Authorization: Bearer $TD" -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/sreq"
	awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' "$1.hdr" | tr -d '\r' >"$1"
	world_sandbox "$D" curl -s -m 10 -o /dev/null -X POST -H "Authorization: Bearer $TD" \
	    -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $(cat "$1")" -H "$H_VER" \
	    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$URL/sreq"
}
answer() {	# answer SBX TOKEN SID BODYFILE [SERVER]: the HTTP status of a client's answer
	world_sandbox "$1" curl -s -o "$OUT/ans.body" -w '%{http_code}' -m 10 -X POST \
	    -H "Authorization: Bearer $2" -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $3" \
	    -H "$H_VER" --data-binary "@$4" "$URL/${5:-sreq}"
}
session "$OUT/s1"; session "$OUT/s2"
S1=$(cat "$OUT/s1") S2=$(cat "$OUT/s2")
[ -n "$S1" ] && [ -n "$S2" ] && [ "$S1" != "$S2" ] && ok "two sessions by hand" ||
    not_ok "two sessions by hand"
calling() {	# calling FILE ID KIND: by hand in S1, ask(KIND) as request ID, its stream in FILE
	world_sandbox "$D" curl -s -N -m 60 -o "$1" -D "$1.hdr" -X POST \
	    -H "Authorization: Bearer $TD" -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $S1" -H "$H_VER" \
	    --data "{\"jsonrpc\":\"2.0\",\"id\":$2,\"method\":\"tools/call\",\"params\":{\"name\":\"ask\",\"arguments\":{\"kind\":\"$3\"}}}" \
	    "$URL/sreq"
}
calling "$OUT/stream" 7 sampling &
ps=$!
wait_for 10 grep -q 'sampling/createMessage' "$OUT/stream" &&
    ok "the call's answer became an event stream carrying the request" ||
    not_ok "the call's answer became an event stream carrying the request"
check_match "its content type is text/event-stream" '^content-type: text/event-stream' \
    "$(tr -d '\r' <"$OUT/stream.hdr" | tr 'A-Z' 'a-z' | grep '^content-type')"
RID=$(sed -n 's/^data: //p' "$OUT/stream" | jq -r 'select(.method == "sampling/createMessage") | .id' | head -n 1)
check_match "the client sees the bridge's id, not the upstream's" '^sluice-[0-9a-f]{32}$' "$RID"
reply() {	# reply ID TEXT: a sampling answer to ID
	jq -cn --arg id "$1" --arg t "$2" '{jsonrpc:"2.0",id:$id,result:{role:"assistant",model:"m",content:{type:"text",text:$t}}}'
}
reply "sluice-00000000000000000000000000000000" forged >"$OUT/a.forged"
check_eq "a forged id is refused" 400 "$(answer "$D" "$TD" "$S1" "$OUT/a.forged")"
jq -cn '{jsonrpc:"2.0",id:"sreq-1",result:{}}' >"$OUT/a.upid"
check_eq "the upstream's own id is refused" 400 "$(answer "$D" "$TD" "$S1" "$OUT/a.upid")"
reply "$RID" "other session" >"$OUT/a.other"
check_eq "the answer from another session is refused" 400 "$(answer "$D" "$TD" "$S2" "$OUT/a.other")"
check_eq "the answer from another sandbox is refused" 404 "$(answer "$A" "$TA" "$S1" "$OUT/a.other")"
printf '{"jsonrpc":"2.0","id":"%s","result":{"role":"assistant","model":"m","content":{"type":"text","text":"%s"}}}' \
    "$RID" "$(head -c 300000 /dev/zero | tr '\0' 'x')" >"$OUT/a.big"
check_eq "an oversized answer is refused" 413 "$(answer "$D" "$TD" "$S1" "$OUT/a.big")"
check_eq "none of them reached the upstream: the call still waits" 0 \
    "$(sed -n 's/^data: //p' "$OUT/stream" | jq -r 'select(.id == 7) | .id' | wc -l)"
reply "$RID" "curl-answer" >"$OUT/a.good"
check_eq "the right answer from the right session is taken" 202 "$(answer "$D" "$TD" "$S1" "$OUT/a.good")"
wait "$ps"
check_eq "the call's result, the last event of its stream, has the client's answer" "curl-answer" \
    "$(sed -n 's/^data: //p' "$OUT/stream" | jq -r 'select(.id == 7) | .result.content[0].text' | jq -r .result.content.text)"
check_eq "a replay of the answer is refused" 400 "$(answer "$D" "$TD" "$S1" "$OUT/a.good")"
# The upstream withdraws what it asked: the client is told, under its id.
calling "$OUT/wstream" 8 withdraw &
pw=$!
wait_for 10 grep -q 'sampling/createMessage' "$OUT/wstream" || not_ok "the withdrawn request reached the client"
WID=$(sed -n 's/^data: //p' "$OUT/wstream" | jq -r 'select(.method == "sampling/createMessage") | .id' | head -n 1)
touch "$FLAGS/withdraw"
wait "$pw"
check_eq "the upstream's cancel reaches the client under the bridge's id" "$WID" \
    "$(sed -n 's/^data: //p' "$OUT/wstream" | jq -r 'select(.method == "notifications/cancelled") | .params.requestId')"
check_match "then the call's result" 'withdrawn' \
    "$(sed -n 's/^data: //p' "$OUT/wstream" | jq -r 'select(.id == 8) | .result.content[0].text')"
reply "$WID" "too late" >"$OUT/a.late"
check_eq "an answer to the withdrawn request is refused" 400 "$(answer "$D" "$TD" "$S1" "$OUT/a.late")"
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$D' 2>/dev/null | grep -q marker-withdrawn"
check_eq "the withdrawn request recorded as cancelled, with the server's reason" "deny cancelled 1" \
    "$(records "$D" | jq -r 'select(.detail | test("marker-withdrawn")) | "\(.decision) \(.reason)"' | head -n 1) $(records "$D" | jq -r 'select(.detail | test("cancelled by the server")) | .method' | wc -l)"
# The client gives up what it was asked: the upstream hears it under its id.
calling "$OUT/cstream" 9 sampling &
pc=$!
wait_for 10 grep -q 'sampling/createMessage' "$OUT/cstream" || not_ok "the request to cancel reached the client"
CID=$(sed -n 's/^data: //p' "$OUT/cstream" | jq -r 'select(.method == "sampling/createMessage") | .id' | head -n 1)
jq -cn --arg id "$CID" '{jsonrpc:"2.0",method:"notifications/cancelled",params:{requestId:$id,reason:"no"}}' >"$OUT/n.cancel"
check_eq "the client's cancel of it is taken" 202 "$(answer "$D" "$TD" "$S1" "$OUT/n.cancel")"
wait "$pc"
UPID=$(sed -n 's/^data: //p' "$OUT/cstream" | jq -r 'select(.id == 9) | .result.content[0].text' | jq -r .cancelled)
check_match "the upstream got the cancel under its own id" '^sreq-[0-9]+$' "$UPID"
check_eq "... and only that one" "\"$UPID\"" "$(sed -n 's/^cancelled //p' "$FLAGS/calls.log")"
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$D' 2>/dev/null | grep -q 'cancelled by the client'"
check_eq "the cancelled request recorded as such" "deny cancelled" \
    "$(records "$D" | jq -r 'select(.detail | test("cancelled by the client")) | "\(.decision) \(.reason)"' | head -n 1)"
: >"$FLAGS/calls.log"
ask "$D" "$TD" sampling >"$OUT/sd2" 2>&1
check_eq "the bridge keeps serving server requests" '["sampling/createMessage"]' "$(served "$OUT/sd2")"

# ---------------------------------------------------------------- stateless
# A client of the 2026-07-28 revision takes a server's requests only in a
# result (multi round-trip requests): by hand, as t_bridge_rev.sh does.
mreq() {	# mreq ID KIND CAPS [MORE]: a stateless tools/call of ask(KIND)
	jq -nc --argjson id "$1" --arg k "$2" --argjson caps "$3" --argjson x "${4:-{\}}" \
	    '{jsonrpc: "2.0", id: $id, method: "tools/call", params: ({name: "ask",
	      arguments: {kind: $k}, _meta: {
	      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
	      "io.modelcontextprotocol/clientInfo": {name: "curl", version: "1"},
	      "io.modelcontextprotocol/clientCapabilities": $caps}} + $x)}'
}
mpost() {	# mpost SBX TOKEN BODY: the answer's body, then its status on a line
	world_sandbox "$1" curl -s -m 30 -X POST -w '\n%{http_code}' \
	    -H "Authorization: Bearer $2" -H "$H_JSON" -H "$H_ACC" \
	    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' \
	    -H 'Mcp-Name: ask' --data-binary "$3" "$URL/sreq"
}
mstatus() { tail -n 1 <<<"$1"; }
mbody() { sed '$d' <<<"$1"; }
mretry() {	# mretry KEY TEXT STATE: inputResponses with a sample, and the state
	jq -nc --arg k "$1" --arg t "$2" --arg s "$3" '{inputResponses: {($k): {role: "assistant",
	    model: "m", content: {type: "text", text: $t}}}, requestState: $s}'
}
SAMPLING='{"sampling":{}}'
r=$(mpost "$D" "$TD" "$(mreq 31 sampling "$SAMPLING")")
check_eq "stateless: the call is answered with a request for input" "200 input_required" \
    "$(mstatus "$r") $(mbody "$r" | jq -r .result.resultType)"
MK=$(mbody "$r" | jq -r '.result.inputRequests | keys[0]')
MS=$(mbody "$r" | jq -r .result.requestState)
check_match "... under the bridge's id, not the upstream's" '^sluice-[0-9a-f]{32}$' "$MK"
check_eq "... carrying what the upstream asked" "sampling/createMessage marker-sampling-please" \
    "$(mbody "$r" | jq -r --arg k "$MK" '.result.inputRequests[$k] | "\(.method) \(.params.messages[0].content.text)"')"
check_match "... and a requestState" '^sluice-mrtr-[0-9a-f]{32}$' "$MS"
r=$(mpost "$D" "$TD" "$(mreq 32 roots "$SAMPLING" "$(mretry "$MK" x "$MS")")")
check_eq "a retry with other arguments is refused" "400 -32602" "$(mstatus "$r") $(mbody "$r" | jq -r .error.code)"
r=$(mpost "$A" "$TA" "$(mreq 33 sampling "$SAMPLING" "$(mretry "$MK" x "$MS")")")
check_eq "a retry from another sandbox is refused" "400 -32602" "$(mstatus "$r") $(mbody "$r" | jq -r .error.code)"
r=$(mpost "$D" "$TD" "$(mreq 34 sampling "$SAMPLING" "$(mretry "$MK" x sluice-mrtr-00000000000000000000000000000000)")")
check_eq "a forged requestState is refused" "400 -32602" "$(mstatus "$r") $(mbody "$r" | jq -r .error.code)"
r=$(mpost "$D" "$TD" "$(mreq 35 sampling "$SAMPLING" "$(mretry "$MK" mrtr-answer "$MS")")")
check_eq "the retry with the answer gets the call's result" "200 complete 35" \
    "$(mstatus "$r") $(mbody "$r" | jq -r '"\(.result.resultType) \(.id)"')"
check_eq "... in which the upstream got the client's answer" mrtr-answer \
    "$(mbody "$r" | jq -r '.result.content[0].text' | jq -r .result.content.text)"
r=$(mpost "$D" "$TD" "$(mreq 36 sampling "$SAMPLING" "$(mretry "$MK" again "$MS")")")
check_eq "a replay of the requestState is refused" "400 -32602" "$(mstatus "$r") $(mbody "$r" | jq -r .error.code)"
r=$(mpost "$D" "$TD" "$(mreq 37 sampling '{}')")
check_eq "a client that declared no sampling is not asked: the upstream got an error" "complete -32601" \
    "$(mbody "$r" | jq -r .result.resultType) $(mbody "$r" | jq -r '.result.content[0].text' | jq -r .error.code)"
check "the stateless requests are recorded" wait_for 10 sh -c \
    "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$D' 2>/dev/null | grep -q 'did not declare'"
check_match "the answered one: allowed, answered under its id, in its call" \
    "^allow allowed forwarded as $MK; answered; policy allow; in call [0-9a-f]{32}\$" \
    "$(records "$D" | jq -r --arg k "$MK" 'select(.detail | test($k)) | "\(.decision) \(.reason) \(.detail)"' | head -n 1)"
check_eq "the undeclared one: not forwarded" "deny not_forwarded" \
    "$(records "$D" | jq -r 'select(.detail | test("did not declare")) | "\(.decision) \(.reason)"' | head -n 1)"
MC=$(records "$D" | jq -r --arg k "$MK" 'select(.detail | test($k)) | .detail' | head -n 1 | sed 's/.*in call //')
check_eq "the held call has one outcome, allowed" allow \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$D" 2>/dev/null | jq -r --arg c "$MC" 'select(.call_id == $c) | .decision')"
# Two asked at once: the first answers the call's request, the second
# waits for the retry, which is answered with it at once; the next retry
# gets the result, in which the upstream got both answers.
r=$(mpost "$D" "$TD" "$(mreq 51 twice "$SAMPLING")")
K1=$(mbody "$r" | jq -r '.result.inputRequests | keys[0]')
S1=$(mbody "$r" | jq -r .result.requestState)
check_eq "two at once, stateless: the first is asked" "input_required 1" \
    "$(mbody "$r" | jq -r '"\(.result.resultType) \(.result.inputRequests | length)"')"
r=$(mpost "$D" "$TD" "$(mreq 52 twice "$SAMPLING" "$(mretry "$K1" first "$S1")")")
K2=$(mbody "$r" | jq -r '.result.inputRequests | keys[0]')
S2=$(mbody "$r" | jq -r .result.requestState)
check_eq "... its retry is asked the second, under a new id and state" "input_required 52 1 1" \
    "$(mbody "$r" | jq -r '"\(.result.resultType) \(.id) \(.result.inputRequests | length)"') $([ "$K2" != "$K1" ] && [ "$S2" != "$S1" ] && echo 1)"
r=$(mpost "$D" "$TD" "$(mreq 53 twice "$SAMPLING" "$(mretry "$K2" second "$S2")")")
check_eq "... and the next retry gets the result with both answers" "complete first second" \
    "$(mbody "$r" | jq -r .result.resultType) $(mbody "$r" | jq -r '.result.content[0].text' | jq -r '[.[].result.content.text] | join(" ")')"

# ---------------------------------------------------------------- cancel
cancel() {	# cancel FILE: SDK client in C calls ask(hang), cancels once FILE exists
	world_mcp_client "sandbox:$C" --url "$URL/sreq" --timeout 30000 \
	    --header "Authorization: Bearer $TC" --cancel ask '{"kind":"hang"}' "$1"
}
calls_c() {	# every mcp.call record of C, one a line
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call \
	    --sandbox "$C" 2>/dev/null
}
cancel "$OUT/go1" >"$OUT/c1" 2>"$OUT/c1.err" &
p1=$!
wait_for 10 npend 1 && ok "cancel: the call waits for approval" ||
    not_ok "cancel: the call waits for approval"
touch "$OUT/go1"
wait_for 10 npend 0 && ok "cancel while asking: the approval is withdrawn" ||
    not_ok "cancel while asking: the approval is withdrawn"
touch "$OUT/go1.done"
wait "$p1"
check_eq "the client saw its cancel through" true "$(jq -r .cancelled "$OUT/c1" 2>/dev/null)"
check_eq "cancelled while asking: never reached the upstream" 0 "$(grep -c '^call' "$FLAGS/calls.log")"
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox '$C' 2>/dev/null | grep -q cancelled"
check_eq "its record: denied, cancelled, approval cancelled, not forwarded" "deny cancelled cancelled -1" \
    "$(calls_c | jq -r 'select(.reason == "cancelled") | "\(.decision) \(.reason) \(.approval) \(.upstream_latency_us)"' | head -n 1)"

cancel "$OUT/go2" >"$OUT/c2" 2>"$OUT/c2.err" &
p2=$!
wait_for 10 npend 1 || not_ok "the second call waits for approval"
check "approve the second call by the CLI" sl approve "$(sl approvals --json | jq -r '.[0].id')" --reason "go"
wait_for 10 grep -q '^call' "$FLAGS/calls.log" && ok "the approved call reached the upstream" ||
    not_ok "the approved call reached the upstream"
touch "$OUT/go2"
wait_for 10 grep -q '^cancelled' "$FLAGS/calls.log" && ok "the cancel reached the upstream" ||
    not_ok "the cancel reached the upstream"
touch "$OUT/go2.done"
wait "$p2"
check_eq "the upstream's cancel names its own request id" \
    "$(sed -n 's/^call //p' "$FLAGS/calls.log")" "$(sed -n 's/^cancelled //p' "$FLAGS/calls.log")"
wait_for 5 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox '$C' 2>/dev/null | grep -c cancelled | grep -qx 2"
check_eq "its record: allowed, approved, then cancelled" "allow cancelled approved" \
    "$(calls_c | jq -r 'select(.reason == "cancelled" and .decision == "allow") | "\(.decision) \(.reason) \(.approval)"' | head -n 1)"
check_eq "the forwarded call spent its budget, the one cancelled while asking did not" 1 \
    "$(calls_c | jq -r 'select(.decision == "allow") | .budget' | jq -r '.q.calls' 2>/dev/null | head -n 1)"

# ---------------------------------------------------------------- serving
ask "$A" "$TA" sampling >"$OUT/after" 2>&1
check_eq "the bridge keeps serving" -32601 "$(got "$OUT/after" .error.code)"

# ---------------------------------------------------------------- roots
# A policy here may let sreq's roots/list through, so the bridge offers
# it roots; sreq2 no policy lets them through, so it is not. The upstream
# asks once initialized, outside any call, when nobody listens yet:
# refused, recorded no_stream. The SDK client's roots/list_changed is
# relayed, and the roots/list that answers it goes to that client's GET
# stream under its policy; one whose policy denies roots is not relayed.
rl() { sed -n "s/^$1 //p" "$FLAGS/roots.log" 2>/dev/null; }
check_match "sreq was offered roots" '"roots":\{"listChanged":true\}' "$(rl offered | head -n 1)"
check_eq "sreq2 was not" 0 "$(sed -n 's/^offered //p' "$FLAGS2/roots.log" 2>/dev/null | grep -c roots)"
check_eq "its roots/list at start, with nobody listening, got a JSON-RPC error" -32601 \
    "$(rl roots | head -n 1 | jq -r .error.code)"
unowned() {	# the mcp.server_request records of no sandbox
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.server_request 2>/dev/null |
	    jq -c 'select(.sandbox == null or .sandbox == "")'
}
check "... and was recorded" wait_for 10 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request 2>/dev/null | grep -q no_stream"
check_eq "its record: sreq, roots/list, denied no_stream, nobody listened" \
    "sreq roots/list deny no_stream refused: outside any call, no session listens" \
    "$(unowned | jq -r 'select(.reason == "no_stream") | "\(.server) \(.method) \(.decision) \(.reason) \(.detail)"' | head -n 1)"
nchanged=$(grep -c '^changed' "$FLAGS/roots.log")
world_mcp_client "sandbox:$B" --url "$URL/sreq" --header "Authorization: Bearer $TB" \
    --serve-requests --roots-changed --call ask '{"kind":"sampling"}' >"$OUT/rb" 2>"$OUT/rb.err" ||
    sed 's/^/#   /' "$OUT/rb.err"
check_eq "a roots change under a policy that denies roots is not relayed" "$nchanged" \
    "$(grep -c '^changed' "$FLAGS/roots.log")"
world_mcp_client "sandbox:$D" --url "$URL/sreq" --header "Authorization: Bearer $TD" \
    --serve-requests --roots-changed roots/list >"$OUT/rc" 2>"$OUT/rc.err" ||
    sed 's/^/#   /' "$OUT/rc.err"
check_eq "one it allows is relayed; the upstream's roots/list reached the client on its GET stream" \
    '["roots/list"]' "$(jq -c .served "$OUT/rc" 2>/dev/null)"
check "the upstream got the client's roots" wait_for 10 sh -c "grep -q '^roots .*file:///work' '$FLAGS/roots.log'"
check "... recorded" wait_for 10 sh -c "'$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.server_request --sandbox '$D' 2>/dev/null | grep -q 'session.s stream'"
check_match "its record: allowed, answered, on its session's stream" \
    '^roots/list allow allowed forwarded as sluice-[0-9a-f]{32}; answered; policy allow; on its session.s stream$' \
    "$(records "$D" | jq -r 'select(.detail | test("stream$")) | select(.decision == "allow") | "\(.method) \(.decision) \(.reason) \(.detail)"' | head -n 1)"

# ---------------------------------------------------------------- limits
# The server-request bounds and deadline come from the daemon config's
# limits: sluiced again with a deadline of 1 s and one request per
# session, then with one per sandbox. The clients are curl, by hand: they
# never answer unless told to, so nothing here waits on a clock but the
# bridge's.
cat >"$POL/lim.yaml" <<EOF
version: 1
name: lim
mcp:
  tools:
    - tool: sreq/ask
      decision: allow
      args:
        kind: {enum: [sampling, twice]}
    - tool: sreq2/ask
      decision: allow
      args:
        kind: {enum: [sampling]}
  server_requests:
    - server: "*"
      sampling: allow
EOF
restart_with() {	# restart_with LIMIT...: sluiced again with these limits
	world_stop_sluiced || return 1
	world_sluiced_config "$CFG" "$POL"
	{ echo "limits:"; printf '  %s\n' "$@"; servers_cfg; } >>"$CFG"
	world_start_sluiced "$CFG" && world_bridge_listening
}
hsession() {	# hsession SBX TOKEN SERVER: a new session by hand, its id on stdout
	world_sandbox "$1" curl -s -m 10 -D - -o /dev/null -X POST \
	    -H "Authorization: Bearer $2" -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/$3" |
	    awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' | tr -d '\r' >"$OUT/hs.id"
	world_sandbox "$1" curl -s -m 10 -o /dev/null -X POST -H "Authorization: Bearer $2" \
	    -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $(cat "$OUT/hs.id")" -H "$H_VER" \
	    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$URL/$3"
	cat "$OUT/hs.id"
}
hcall() {	# hcall SBX TOKEN SID SERVER FILE ID KIND: ask(KIND) by hand, its stream in FILE
	world_sandbox "$1" curl -s -N -m 60 -o "$5" -X POST \
	    -H "Authorization: Bearer $2" -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $3" -H "$H_VER" \
	    --data "{\"jsonrpc\":\"2.0\",\"id\":$6,\"method\":\"tools/call\",\"params\":{\"name\":\"ask\",\"arguments\":{\"kind\":\"$7\"}}}" \
	    "$URL/$4"
}
result_of() {	# result_of FILE ID: the tool's text in the result of call ID
	# An event stream when something was carried on it, else one body.
	if grep -q '^data: ' "$1"; then sed -n 's/^data: //p' "$1"; else cat "$1"; fi |
	    jq -r "select(.id == $2) | .result.content[0].text"
}
carried() {	# carried FILE: how many sampling requests the stream carried
	sed -n 's/^data: //p' "$1" | jq -r 'select(.method == "sampling/createMessage") | .id' | wc -l
}
has_record() {	# has_record SBX PATTERN
	records "$1" | grep -q "$2"
}
restart_with "server_request_deadline: 1s" "server_requests_per_session: 1" ||
    { not_ok "sluiced restarts with a 1 s deadline, one per session"; finish; }
ok "sluiced restarts with a 1 s deadline, one per session"
E=se$$ F=sf$$ G=sg$$
TE=$(sl sandbox create --policy lim --subject erin --id "$E" | jq -r .token)
SE1=$(hsession "$E" "$TE" sreq)
[ -n "$SE1" ] && ok "a session by hand" || not_ok "a session by hand"
hcall "$E" "$TE" "$SE1" sreq "$OUT/dl" 11 sampling
check_eq "a client that never answers: the request went to it" 1 "$(carried "$OUT/dl")"
check_eq "... and after the deadline the upstream was told, the call finished" -32001 \
    "$(result_of "$OUT/dl" 11 | jq -r .error.code)"
check "... the request recorded no_answer" wait_for 10 has_record "$E" no_answer
check_eq "its record: denied, no_answer, forwarded without an answer" \
    "deny no_answer forwarded; no answer in time" \
    "$(records "$E" | jq -r 'select(.reason == "no_answer") | "\(.decision) \(.reason) \(.detail | sub("; policy.*"; ""))"' | head -n 1)"
hcall "$E" "$TE" "$SE1" sreq "$OUT/tw" 12 twice
check_eq "two at once in a session bound to one: one went to the client" 1 "$(carried "$OUT/tw")"
check_eq "... the other was refused to the upstream at once, the first ran out" "-32001 -32601" \
    "$(result_of "$OUT/tw" 12 | jq -r '[.[].error.code] | "\(.[0]) \(.[1])"')"
check "... the refused one recorded" wait_for 10 has_record "$E" overload
check_match "its record names the session's bound" \
    '^deny overload not forwarded: too many wait for the client in its session; policy allow; in call [0-9a-f]{32}$' \
    "$(records "$E" | jq -r 'select(.reason == "overload") | "\(.decision) \(.reason) \(.detail)"' | head -n 1)"

nanswer() { records "$E" | jq -r 'select(.reason == "no_answer") | .detail' | grep -c .; }
nanswered() { [ "$(nanswer)" -gt "$1" ]; }
n0=$(nanswer)
r=$(mpost "$E" "$TE" "$(mreq 41 sampling "$SAMPLING")")
check_eq "stateless, and the client never retries: asked for input" input_required \
    "$(mbody "$r" | jq -r .result.resultType)"
check "... after the deadline the request is recorded no_answer" wait_for 10 nanswered "$n0"
EC=$(records "$E" | jq -r 'select(.reason == "no_answer") | .detail' | tail -n 1 | sed 's/.*in call //')
ecall() { "$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$E" 2>/dev/null |
    jq -r --arg c "$EC" 'select(.call_id == $c) | .decision'; }
ecall_done() { [ -n "$(ecall)" ]; }
check "... and the call it held ends, recorded" wait_for 10 ecall_done
check_eq "its record: allowed (the upstream answered it)" allow "$(ecall)"
r=$(mpost "$E" "$TE" "$(mreq 42 sampling "$SAMPLING" "$(mretry "$(mbody "$r" | jq -r '.result.inputRequests | keys[0]')" late "$(mbody "$r" | jq -r .result.requestState)")")")
check_eq "a retry after that is refused" "400 -32602" "$(mstatus "$r") $(mbody "$r" | jq -r .error.code)"

restart_with "server_requests_per_session: 1" "server_requests_per_sandbox: 1" ||
    { not_ok "sluiced restarts with one per sandbox"; finish; }
ok "sluiced restarts with one per sandbox"
TF=$(sl sandbox create --policy lim --subject frank --id "$F" | jq -r .token)
TG=$(sl sandbox create --policy lim --subject grace --id "$G" | jq -r .token)
SF1=$(hsession "$F" "$TF" sreq) SF2=$(hsession "$F" "$TF" sreq2) SG1=$(hsession "$G" "$TG" sreq2)
[ -n "$SF1" ] && [ -n "$SF2" ] && [ -n "$SG1" ] && ok "three sessions by hand" ||
    not_ok "three sessions by hand"
hcall "$F" "$TF" "$SF1" sreq "$OUT/sb1" 21 sampling &
pb1=$!
wait_for 10 grep -q 'sampling/createMessage' "$OUT/sb1" &&
    ok "one request waits on the sandbox's client" || not_ok "one request waits on the sandbox's client"
hcall "$F" "$TF" "$SF2" sreq2 "$OUT/sb2" 22 sampling
check_eq "a second in another session of the sandbox is refused to the upstream" "0 -32601" \
    "$(carried "$OUT/sb2") $(result_of "$OUT/sb2" 22 | jq -r .error.code)"
check "... and recorded" wait_for 10 has_record "$F" overload
check_match "its record names the sandbox's bound" \
    '^sreq2 deny overload not forwarded: too many wait for the client in its sandbox; policy allow' \
    "$(records "$F" | jq -r 'select(.reason == "overload") | "\(.server) \(.decision) \(.reason) \(.detail)"' | head -n 1)"
hcall "$G" "$TG" "$SG1" sreq2 "$OUT/sg" 23 sampling &
pg=$!
wait_for 10 grep -q 'sampling/createMessage' "$OUT/sg" &&
    ok "another sandbox is not held by it" || not_ok "another sandbox is not held by it"
for x in "F TF SF1 sb1 sreq" "G TG SG1 sg sreq2"; do
	set -- $x
	rid=$(sed -n 's/^data: //p' "$OUT/$4" | jq -r 'select(.method == "sampling/createMessage") | .id' | head -n 1)
	reply "$rid" "answer-$1" >"$OUT/a.$1"
	check_eq "the waiting one of $1 is answered" 202 "$(answer "${!1}" "${!2}" "${!3}" "$OUT/a.$1" "$5")"
done
wait "$pb1" "$pg"
check_eq "both calls got their client's answer" "answer-F answer-G" \
    "$(result_of "$OUT/sb1" 21 | jq -r .result.content.text) $(result_of "$OUT/sg" 23 | jq -r .result.content.text)"

check "sluiced stops cleanly" world_stop_sluiced
SAN='runtime error|ERROR: (Address|Leak)Sanitizer'
if grep -qE "$SAN" "$WORLD_DIR/log/sluiced.log"; then
	not_ok "sanitizers: no report in sluiced's log"
	grep -E -A30 "$SAN" "$WORLD_DIR/log/sluiced.log" | head -n 60 | sed 's/^/#   /'
else
	ok "sanitizers: no report in sluiced's log"
fi
verdict=$("$SLUICE" audit verify --db "$WORLD_DIR/state/audit.db" 2>&1)
check_match "the audit log's chain verifies, the new kind and all" '^result: +verified' "$verdict"
finish
