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
# OCSF export maps the kind; the bridge keeps serving. Torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v nft >/dev/null && command -v curl >/dev/null &&
    command -v node >/dev/null || { not_ok "jq, nft, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
CFG=$E2E_TMP/sluice.yaml
POL=$E2E_TMP/policies OUT=$E2E_TMP/out
mkdir -p "$POL" "$OUT"

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
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'" &&
    ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
A=sa$$; B=sb$$
TA=$(sl sandbox create --policy sr --subject alice --id "$A" | jq -r .token)
TB=$(sl sandbox create --policy bare --subject bob --id "$B" | jq -r .token)
[[ $TA =~ ^[0-9a-f]{64}$ && $TB =~ ^[0-9a-f]{64}$ ]] && ok "sandboxes created" ||
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
