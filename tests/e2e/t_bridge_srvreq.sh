#!/bin/bash
# t_bridge_srvreq.sh: requests an upstream makes of the agent's client,
# end to end. The official SDK client (servers/mcp_client.mjs, offering
# sampling, elicitation and roots and answering each) in a sandbox calls a
# tool of an upstream over stdio (servers/sreq_server.mjs) that, while the
# call is in flight, asks the client for a sample, a form answer or its
# roots, and returns what it got back. Shown here: a kind the policy
# denies (and one it leaves out) is answered to the upstream with a
# JSON-RPC error and never reaches the client; one it allows or asks about
# is refused too (the bridge does not carry them) and recorded as not
# forwarded; a method no client serves is -32601; each is an
# mcp.server_request record with what was asked, tied to its call; the
# OCSF export maps the kind. notifications/cancelled from the SDK client:
# a call waiting for approval is withdrawn, never forwarded, recorded as
# cancelled and charges no budget; an approved call in flight is
# cancelled upstream under the upstream's request id, recorded as
# cancelled, and its budget stays spent. The bridge keeps serving. Torn
# down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v nft >/dev/null && command -v curl >/dev/null &&
    command -v node >/dev/null || { not_ok "jq, nft, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
CFG=$E2E_TMP/sluice.yaml
POL=$E2E_TMP/policies OUT=$E2E_TMP/out FLAGS=$E2E_TMP/sreq
mkdir -p "$POL" "$OUT" "$FLAGS"
# The upstream runs as the bridge's user: its log is writable by it.
: >"$FLAGS/calls.log" && chmod 0777 "$FLAGS" && chmod 0666 "$FLAGS/calls.log"

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
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<EOF
servers:
  - name: sreq
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $FLAGS]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'" &&
    ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
A=sa$$; B=sb$$; C=sc$$
TA=$(sl sandbox create --policy sr --subject alice --id "$A" | jq -r .token)
TB=$(sl sandbox create --policy bare --subject bob --id "$B" | jq -r .token)
TC=$(sl sandbox create --policy cq --subject carol --id "$C" | jq -r .token)
[[ $TA =~ ^[0-9a-f]{64}$ && $TB =~ ^[0-9a-f]{64}$ && $TC =~ ^[0-9a-f]{64}$ ]] && ok "sandboxes created" ||
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

# ---------------------------------------------------------------- allow, ask
ask "$A" "$TA" elicitation >"$OUT/e" 2>"$OUT/e.err" || sed 's/^/#   /' "$OUT/e.err"
check_eq "allowed elicitation: refused, not carried to the client" "-32601 []" \
    "$(got "$OUT/e" .error.code) $(served "$OUT/e")"
ask "$A" "$TA" roots >"$OUT/ra" 2>"$OUT/ra.err" || sed 's/^/#   /' "$OUT/ra.err"
check_eq "roots the policy asks about: refused, nobody asked" "-32601 []" \
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
check_eq "allowed elicitation recorded as not forwarded" "deny not_forwarded" \
    "$(records "$A" | jq -r 'select(.method == "elicitation/create") | "\(.decision) \(.reason)"' | head -n 1)"
check_match "its record says what the policy would have done" 'policy allow' \
    "$(records "$A" | jq -r 'select(.method == "elicitation/create") | .detail' | head -n 1)"
check_match "asked roots recorded: policy ask" 'policy ask' \
    "$(records "$A" | jq -r 'select(.method == "roots/list") | .detail' | head -n 1)"
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

# ---------------------------------------------------------------- cancel
npend() { "$SLUICE" -s "$WORLD_SOCK" approvals --json 2>/dev/null | jq -e "length == $1" >/dev/null; }
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
