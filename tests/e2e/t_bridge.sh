#!/bin/bash
# t_bridge.sh: the capability bridge inside sluiced, end to end.
# Code in a sandbox calls MCP tools through Sluice with the official SDK
# client (servers/mcp_client.mjs); the upstreams are server-everything over
# stdio (with a credential in its environment) and over Streamable HTTP on
# 192.0.2.30 (with a credential header), and a tiny server whose definitions
# drift on demand (servers/drift_server.mjs). Shown here: the filtered list,
# an allowed call, a constraint denial with a readable reason, 50 concurrent
# calls against a budget of 10, approve/deny/timeout through the CLI, drift
# withheld with a finding, get-env's credential redacted, a token used from
# the wrong sandbox (401 and a record), the credential nowhere in the
# sandbox, budgets across a restart of sluiced, taint cutting egress at
# once, and hostile HTTP (malformed JSON-RPC, batches, wrong content types,
# huge bodies, unknown sessions) answered with the spec's statuses while the
# bridge keeps serving. Everything runs in the world of world.sh and is
# torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq nft curl node; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
EVERYTHING=$E2E_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
[ -e "$EVERYTHING" ] || { not_ok "server-everything installed (tests/deps.sh)"; finish; }
world_up || { not_ok "world_up"; finish; }
world_mcp_http_start 3001 || { not_ok "server-everything over HTTP"; finish; }

NODE=$(command -v node)
POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
DRIFT=$E2E_TMP/drift
SECRETS=$E2E_TMP/secrets
mkdir -p "$POL" "$DRIFT" "$SECRETS"
# The drift server runs as the bridge's user: its directory is writable
# by it.
chmod 0777 "$DRIFT"
chmod 0700 "$SECRETS"
# Fake credentials, unique to this run so that a grep cannot match by luck.
STDIO_CRED="sk-fake-stdio-$$-$RANDOM$RANDOM"
HTTP_CRED="sk-fake-http-$$-$RANDOM$RANDOM"
printf '%s' "$STDIO_CRED" >"$SECRETS/ev.cred"
printf '%s' "$HTTP_CRED" >"$SECRETS/evh.cred"

# Two policies that differ only in approval_timeout: mcpt waits long
# enough that approving is never a race, mcpshort times out quickly.
cat >"$POL/mcpt.yaml" <<'EOF'
version: 1
name: mcpt
egress:
  allow:
    - cidr: 203.0.113.80/32
      ports: [80]
    - cidr: 192.0.2.10/32
      ports: [80]
mcp:
  approval_timeout: 60s
  audit_args: full
  taint:
    level: confidential
    keep:
      - cidr: 192.0.2.10/32
        ports: [80]
  results:
    max_bytes: 256KiB
    redact: [aws_keys, private_keys, bearer_tokens, upstream_credentials]
  budgets:
    - name: ten
      scope: sandbox
      calls: 10
  tools:
    - tool: ev/echo
      decision: allow
      args:
        message: {type: string, max_length: 40, pattern: "^[a-z0-9 ]*$"}
      required: [message]
    - tool: ev/get-env
      decision: allow
    - tool: ev/get-sum
      decision: allow
      budgets: [ten]
      args:
        a: {type: number}
        b: {type: number}
      required: [a, b]
    - tool: ev/get-tiny-image
      decision: allow
      classification: confidential
    - tool: evh/echo
      decision: ask
      args:
        message: {type: string, max_length: 40}
      required: [message]
    - tool: evh/get-env
      decision: allow
    - tool: drift/stable
      decision: allow
    - tool: drift/stable2
      decision: allow
    - tool: drift/shifty
      decision: allow
    - tool: ev/*
      decision: deny
EOF
sed -e 's/^name: mcpt$/name: mcpshort/' -e 's/approval_timeout: 60s/approval_timeout: 2s/' \
    "$POL/mcpt.yaml" >"$POL/mcpshort.yaml"
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<EOF
servers:
  - name: ev
    transport: stdio
    command: [$NODE, $EVERYTHING, stdio]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
    credential: {file: $SECRETS/ev.cred, child_env: API_TOKEN}
  - name: evh
    transport: http
    url: http://$WORLD_MCP:3001/mcp
    credential: {file: $SECRETS/evh.cred, header: X-Api-Key}
  - name: drift
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/drift_server.mjs, $DRIFT]
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
if wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'"; then
	ok "the bridge listens on $WORLD_SERVICE:$WORLD_BRIDGE_PORT"
else
	not_ok "the bridge listens"; world_sluiced_log | tail -n 20 | sed 's/^/#   /'
	finish
fi

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
OUT=$E2E_TMP/out
mkdir -p "$OUT"

# mk ID [POLICY]: create sandbox ID (policy mcpt); prints its token.
mk() {
	sl sandbox create --policy "${2:-mcpt}" --subject alice --id "$1" |
	    jq -r .token
}
A=ba$$; B=bb$$; C=bc$$
TA=$(mk "$A"); TB=$(mk "$B"); TC=$(mk "$C" mcpshort)
for t in "$TA" "$TB" "$TC"; do
	[[ $t =~ ^[0-9a-f]{64}$ ]] || { not_ok "sandboxes created"; finish; }
done
ok "three sandboxes created"

# client SBX TOKEN SERVER ARGS...: the SDK client inside sandbox SBX.
client() {
	local sbx=$1 tok=$2 srv=$3; shift 3
	world_mcp_client "sandbox:$sbx" --url "$URL/$srv" \
	    --header "Authorization: Bearer $tok" "$@"
}

# ---------------------------------------------------------------- listing
if client "$A" "$TA" ev --list >"$OUT/list" 2>"$OUT/list.err"; then
	names=$(jq -r '.tools[].name' "$OUT/list" | sort | tr '\n' ' ')
	check_eq "ev: only allowed tools are listed" \
	    "echo get-env get-sum get-tiny-image " "$names"
else
	not_ok "ev: list through the bridge"; sed 's/^/#   /' "$OUT/list.err"
fi

# ---------------------------------------------------------------- calls
client "$A" "$TA" ev --call echo '{"message":"hello bridge"}' >"$OUT/echo" 2>&1
check_match "ev/echo allowed end to end" "Echo: hello bridge" "$(cat "$OUT/echo")"
check_eq "ev/echo not an error" "null" "$(jq -r '.isError // null' "$OUT/echo" 2>/dev/null | head -n1)"

client "$A" "$TA" ev --call echo '{"message":"HELLO; rm -rf /"}' >"$OUT/bad" 2>&1
check_eq "constraint broken: isError" "true" "$(jq -r .isError "$OUT/bad" 2>/dev/null)"
reason=$(jq -r '.content[0].text' "$OUT/bad" 2>/dev/null)
check_match "constraint broken: readable reason" "[A-Za-z].*" "$reason"
echo "# denial text: $reason"

client "$A" "$TA" ev --call get-structured-content '{"location":"New York"}' >"$OUT/hid" 2>&1
check_eq "unlisted tool is denied" "true" "$(jq -r .isError "$OUT/hid" 2>/dev/null)"

# ---------------------------------------------------------------- redaction
client "$A" "$TA" ev --call get-env '{}' >"$OUT/env" 2>&1
check_match "get-env answered" "PATH" "$(cat "$OUT/env")"
check_fails "get-env: the stdio credential is redacted" grep -q "$STDIO_CRED" "$OUT/env"
check_match "get-env: API_TOKEN is there, its value is not" "API_TOKEN" "$(cat "$OUT/env")"

mcprec() {	# mcprec SBX TOOL: the first mcp.call record of TOOL
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call \
	    --sandbox "$1" 2>/dev/null | jq -c "select(.tool == \"$2\")" | head -n 1
}
wait_for 5 sh -c "[ -n \"\$('$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call 2>/dev/null | grep get-env)\" ]"
check_eq "get-env's record counts the redaction" true \
    "$(mcprec "$A" get-env | jq '.redactions >= 1')"
check_eq "echo's record: who, what, decision, result" \
    "$A alice mcpt ev echo allow true true true" \
    "$(mcprec "$A" echo | jq -r '[.sandbox.id, .subject, .policy.id, .server, .tool,
      .decision, (.session | length > 0), (.result_bytes > 0),
      (.result_digest | startswith("sha256:"))] | join(" ")')"
check_match "echo's record keeps the arguments (audit_args: full)" 'hello bridge' \
    "$(mcprec "$A" echo | jq -r .arguments)"

# ---------------------------------------------------------------- HTTP upstream
client "$A" "$TA" evh --list >"$OUT/hlist" 2>&1
check_eq "evh: only allowed tools are listed" "echo get-env " \
    "$(jq -r '.tools[].name' "$OUT/hlist" 2>/dev/null | sort | tr '\n' ' ')"
client "$A" "$TA" evh --call get-env '{}' >"$OUT/henv" 2>&1
check_match "evh/get-env answered over HTTP" "PATH" "$(cat "$OUT/henv")"

# ---------------------------------------------------------------- approvals
# approve: the call waits until `sluice approve` from outside (the CLI
# needs only the control socket, so it runs here).
npend() { "$SLUICE" -s "$WORLD_SOCK" approvals --json 2>/dev/null | jq -e "length == $1"; }
findings() { "$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind finding 2>/dev/null; }
has_finding() { findings | grep -q "$1"; }
client "$A" "$TA" evh --timeout 15000 --call echo '{"message":"please"}' >"$OUT/ask1" 2>&1 &
p1=$!
if wait_for 10 npend 1; then
	ok "ask: the call is pending"
else
	not_ok "ask: the call is pending"
fi
sl approvals >"$OUT/approvals.txt"
sed 's/^/# /' "$OUT/approvals.txt"
check_match "approvals: table shows tool and arguments" 'evh/echo.*please' "$(cat "$OUT/approvals.txt")"
ID=$(sl approvals --json | jq -r '.[0].id')
check "approve $ID" sl approve "$ID" --reason "looks fine"
wait "$p1"
check_match "approved call returns the upstream result" "Echo: please" "$(cat "$OUT/ask1")"
# The approver is who ran `sluice approve`, as the control socket's kernel
# credentials say (this script's uid), whatever name the CLI sent.
check_eq "the approved call's record names approver (uid and name) and reason" \
    "approved $(id -un) $(id -u) allow" \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$A" 2>/dev/null |
      grep 'please' | jq -r '"\(.approval) \(.approver) \(.approver_uid) \(.decision)"')"
check_fails "approve twice: unknown id" sl approve "$ID"
check_fails "approve a bogus id" sl approve nosuchid
check_fails "approve an id with a path in it" sl approve ../v1/reload
check_eq "approve without an id: usage" 2 "$(sl approve >/dev/null 2>&1; echo $?)"

client "$A" "$TA" evh --timeout 15000 --call echo '{"message":"nope"}' >"$OUT/ask2" 2>&1 &
p2=$!
wait_for 10 npend 1
ID=$(sl approvals --json | jq -r '.[0].id // empty')
check "deny $ID" sl deny "$ID" --reason "not today"
wait "$p2"
check_eq "denied call: isError" "true" "$(jq -r .isError "$OUT/ask2" 2>/dev/null)"

# The control API refuses bad decisions without touching a pending call.
api() {	# api METHOD PATH [BODY]: the HTTP status of one control request
	curl -s -o /dev/null -w '%{http_code}' -m 10 --unix-socket "$WORLD_SOCK" \
	    -X "$1" ${3:+-H 'Content-Type: application/json' --data-binary "$3"} \
	    "http://localhost$2"
}
check_eq "POST approval without a body: 400" 400 "$(api POST /v1/approvals/abc)"
check_eq "POST approval, bad decision: 400" 400 \
    "$(api POST /v1/approvals/abc '{"decision":"maybe","approver":"x"}')"
# No name is needed (the socket says who calls): only the unknown id fails.
check_eq "POST approval without a name: identity from the socket (unknown id: 404)" 404 \
    "$(api POST /v1/approvals/abc '{"decision":"approve"}')"
check_eq "POST approval, note and approver both: 400" 400 \
    "$(api POST /v1/approvals/abc '{"decision":"approve","note":"a","approver":"b"}')"
check_eq "POST approval, empty note: 400" 400 \
    "$(api POST /v1/approvals/abc '{"decision":"approve","note":""}')"
check_eq "POST approval, note not a string: 400" 400 \
    "$(api POST /v1/approvals/abc '{"decision":"approve","note":7}')"
check_eq "POST approval, unknown field: 400" 400 \
    "$(api POST /v1/approvals/abc '{"decision":"approve","approver":"x","as":"root"}')"
check_eq "POST approval, control character in approver: 400" 400 \
    "$(api POST /v1/approvals/abc '{"decision":"approve","approver":"a\u001b[2J"}')"
check_eq "POST approval, unknown id: 404" 404 \
    "$(api POST /v1/approvals/abc '{"decision":"deny","approver":"x"}')"

# A client cannot approve in someone else's name: uid 65534 (in group root,
# to reach the 0660 socket) says it is "root"; the record says who it is.
NOBODY=$(getent passwd 65534 | cut -d: -f1)
chmod 0711 "$E2E_TMP"
client "$A" "$TA" evh --timeout 15000 --call echo '{"message":"spoofed"}' >"$OUT/ask3" 2>&1 &
p3=$!
wait_for 10 npend 1
ID=$(sl approvals --json | jq -r '.[0].id // empty')
SPOOF=$(setpriv --reuid=65534 --regid=0 --clear-groups -- \
    curl -s -m 10 --unix-socket "$WORLD_SOCK" -X POST -H 'Content-Type: application/json' \
    --data-binary '{"decision":"approve","approver":"root"}' "http://localhost/v1/approvals/$ID")
check_eq "approval by uid 65534 claiming to be root: answered as uid 65534" \
    "approved ${NOBODY:-65534} 65534" \
    "$(printf '%s' "$SPOOF" | jq -r '"\(.decision) \(.approver) \(.approver_uid)"' 2>/dev/null)"
wait "$p3"
check_match "the spoofed approval still ran the call" "Echo: spoofed" "$(cat "$OUT/ask3")"
check_eq "its record: the real uid and name; the claimed name only as a note" \
    "${NOBODY:-65534} 65534 root" \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$A" 2>/dev/null |
      grep 'spoofed' | jq -r '"\(.approver) \(.approver_uid) \(.approver_note)"')"
chmod 0711 "$E2E_TMP"	# as lib.sh leaves it

# /metrics: every call recorded so far waited for its durable record once,
# and those waits add up to a positive time.
M=$(curl -s -m 10 --unix-socket "$WORLD_SOCK" http://localhost/metrics)
NCALLS=$(printf '%s\n' "$M" | awk '/^sluice_mcp_calls_total/ { n += $2 } END { print n + 0 }')
check_eq "metrics: one durable-record wait per recorded call ($NCALLS)" "$NCALLS" \
    "$(printf '%s\n' "$M" | awk '/^sluice_mcp_record_wait_seconds_count/ { print $2 }')"
check "metrics: calls waited a positive time for their records" \
    awk -v n="$NCALLS" -v s="$(printf '%s\n' "$M" | awk '/^sluice_mcp_record_wait_seconds_sum/ { print $2 }')" \
    'BEGIN { exit !(n > 0 && s > 0) }'
check_eq "pins of an unknown server: 404" 404 "$(api GET /v1/mcp/nosuch/pins)"
check_eq "accept an unknown tool: 404" 404 "$(api POST /v1/mcp/ev/tools/nosuch/accept)"
check_fails "sluice mcp pins of an unknown server fails" sl mcp pins nosuch

# timeout: C's policy has approval_timeout 2 s; nobody answers.
client "$C" "$TC" evh --timeout 15000 --call echo '{"message":"late"}' >"$OUT/ask3" 2>&1
check_eq "unanswered call times out denied" "true" "$(jq -r .isError "$OUT/ask3" 2>/dev/null)"
check_match "the timeout says so" "[Nn]obody approved|time" "$(jq -r '.content[0].text' "$OUT/ask3" 2>/dev/null)"
check_eq "nothing pending after the timeout" "0" "$(sl approvals --json | jq length)"

# ---------------------------------------------------------------- drift
client "$A" "$TA" drift --list >"$OUT/d1" 2>&1
check_eq "drift: both tools listed first" "shifty stable " \
    "$(jq -r '.tools[].name' "$OUT/d1" 2>/dev/null | sort | tr '\n' ' ')"
sl mcp pins drift >"$OUT/pins" 2>&1
check_match "mcp pins prints a snippet with pins" 'sha256:[0-9a-f]{64}' "$(cat "$OUT/pins")"
check_match "mcp pins names the tool" 'drift/shifty' "$(cat "$OUT/pins")"
touch "$DRIFT/drift"
client "$A" "$TA" drift --list >"$OUT/d2" 2>&1
check_eq "drift: the changed tool is withheld" "stable " \
    "$(jq -r '.tools[].name' "$OUT/d2" 2>/dev/null | sort | tr '\n' ' ')"
: >"$DRIFT/calls.log"
chmod 0666 "$DRIFT/calls.log"
client "$A" "$TA" drift --call shifty '{"note":"x"}' >"$OUT/d3" 2>&1
check_eq "drift: calling the withheld tool is denied" "true" "$(jq -r .isError "$OUT/d3" 2>/dev/null)"
check_fails "drift: the withheld call never reached the upstream" grep -q shifty "$DRIFT/calls.log"
wait_for 5 has_finding tool_drift
check_match "drift: a finding is recorded" 'mcp.tool_drift' "$(findings)"
check "mcp accept drift shifty" sl mcp accept drift shifty
client "$A" "$TA" drift --list >"$OUT/d4" 2>&1
check_eq "drift: accepted definition is listed again" "shifty stable " \
    "$(jq -r '.tools[].name' "$OUT/d4" 2>/dev/null | sort | tr '\n' ' ')"
# list_changed: the pins are checked when the upstream says so, not at
# the next list or call. The announcing call renames `stable` after the
# listing that call made, so only a listing because of list_changed
# finds it gone.
drift_disappeared() { findings | grep 'tool_drift' | grep -c 'disappeared'; }
n0=$(drift_disappeared)
touch "$DRIFT/announce"
client "$A" "$TA" drift --call stable >"$OUT/d5" 2>&1
check_match "drift: the announcing call is answered" 'note from stable' "$(cat "$OUT/d5")"
if wait_for 10 sh -c "[ \$('$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind finding 2>/dev/null | grep tool_drift | grep -c disappeared) -gt $n0 ]"; then
	ok "drift: list_changed re-checks the pins at once (a finding, no list asked)"
else
	not_ok "drift: list_changed re-checks the pins at once (a finding, no list asked)"
fi
rm -f "$DRIFT/renamed"

# ---------------------------------------------------------------- identity
code=$(world_sandbox "$B" curl -s -o /dev/null -w '%{http_code}' -m 5 \
    -X POST -H "Authorization: Bearer $TA" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$URL/ev")
check_eq "A's token from sandbox B: 401" "401" "$code"
code=$(world_sandbox "$B" curl -s -o /dev/null -w '%{http_code}' -m 5 \
    -X POST -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    --data '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$URL/ev")
check_eq "no token: 401" "401" "$code"
check_fails "SDK client with A's token from B fails" client "$B" "$TA" ev --list
wait_for 5 has_finding auth_failed
check_match "401 is recorded" 'mcp.auth_failed' "$(findings)"

# ---------------------------------------------------------------- raw HTTP
# raw SBX CURLARGS...: "CODE" of one request from inside the sandbox.
raw() {
	local sbx=$1; shift
	world_sandbox "$sbx" curl -s -o "$OUT/raw.body" -w '%{http_code}' -m 10 "$@"
}
H_AUTH="Authorization: Bearer $TB"
H_ACC='Accept: application/json, text/event-stream'
H_JSON='Content-Type: application/json'
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
check_eq "malformed JSON: 400" 400 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" --data '{"jsonrpc":' "$URL/ev")"
check_match "malformed JSON: -32700" '-32700' "$(cat "$OUT/raw.body")"
check_eq "batch array: 400" 400 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" --data "[$INIT]" "$URL/ev")"
check_eq "wrong content type: 415" 415 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H 'Content-Type: text/plain' --data "$INIT" "$URL/ev")"
check_eq "no acceptable Accept: 406" 406 "$(raw "$B" -X POST -H "$H_AUTH" -H 'Accept: text/html' -H "$H_JSON" --data "$INIT" "$URL/ev")"
head -c 3000000 /dev/zero | tr '\0' 'a' >"$OUT/huge"
check_eq "huge body: 413" 413 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" --data-binary "@$OUT/huge" "$URL/ev")"
check_eq "unknown session: 404" 404 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" -H 'Mcp-Session-Id: nosuchsession' -H 'MCP-Protocol-Version: 2025-06-18' --data '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' "$URL/ev")"
check_eq "unknown server: 404" 404 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/nosuch")"
check_eq "foreign Origin: 403" 403 "$(raw "$B" -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" -H 'Origin: http://evil.example.net' --data "$INIT" "$URL/ev")"
check_eq "PUT: 405" 405 "$(raw "$B" -X PUT -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/ev")"
client "$B" "$TB" ev --call echo '{"message":"still here"}' >"$OUT/after" 2>&1
check_match "the bridge keeps serving after hostile input" "Echo: still here" "$(cat "$OUT/after")"

# ---------------------------------------------------------------- budgets
# One session by hand, then 50 tools/call at once against calls: 10.
hdrs=$E2E_TMP/init.hdr
world_sandbox "$B" curl -s -m 10 -D "$hdrs" -o /dev/null -X POST -H "$H_AUTH" \
    -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/ev"
SID=$(awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' "$hdrs" | tr -d '\r')
[ -n "$SID" ] && ok "session by hand: $SID" || not_ok "session by hand"
world_sandbox "$B" curl -s -m 10 -o /dev/null -X POST -H "$H_AUTH" -H "$H_ACC" \
    -H "$H_JSON" -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-06-18' \
    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$URL/ev"
seq 1 50 | world_sandbox "$B" xargs -P 50 -I{} curl -s -m 30 -o "$OUT/sum.{}" \
    -X POST -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $SID" \
    -H 'MCP-Protocol-Version: 2025-06-18' \
    --data '{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{"name":"get-sum","arguments":{"a":{},"b":1}}}' \
    "$URL/ev"
okn=$(grep -l 'The sum of' "$OUT"/sum.* 2>/dev/null | wc -l)
check_eq "50 concurrent calls, budget 10: 10 answered" 10 "$okn"
calls() {	# calls SBX DECISION: mcp.call records of get-sum
	world_host "$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call \
	    --sandbox "$1" 2>/dev/null |
	    jq -s "[.[] | select(.tool == \"get-sum\" and .decision == \"$2\")] | length"
}
check_eq "audit: exactly 10 get-sum calls allowed" 10 "$(calls "$B" allow)"
check_eq "audit: 40 get-sum calls denied" 40 "$(calls "$B" deny)"
check_match "audit: the denials name the budget" budget_exhausted \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call --sandbox "$B" 2>/dev/null | grep get-sum | grep '"deny"' | head -n 1)"

# ---------------------------------------------------------------- secrets
{
	sl exec "$B" -- env
	cat /etc/netns/sluice-"$B"/* 2>/dev/null
	world_sandbox "$B" sh -c 'cat /etc/resolv.conf /etc/hosts' 2>/dev/null
	cat "$OUT"/* 2>/dev/null
	world_host "$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" 2>/dev/null
	world_sluiced_log
} >"$E2E_TMP/everything-seen" 2>&1
check_fails "stdio credential appears nowhere the sandbox or the log sees" \
    grep -q "$STDIO_CRED" "$E2E_TMP/everything-seen"
check_fails "HTTP credential appears nowhere the sandbox or the log sees" \
    grep -q "$HTTP_CRED" "$E2E_TMP/everything-seen"
check_match "exec environment has the sandbox token" "SLUICE_TOKEN=$TB" \
    "$(grep SLUICE_TOKEN "$E2E_TMP/everything-seen")"

# ---------------------------------------------------------------- restart
world_stop_sluiced || not_ok "sluiced stops cleanly"
world_start_sluiced "$CFG" || { not_ok "sluiced restarts"; finish; }
wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'"
client "$B" "$TB" ev --call get-sum '{"a":1,"b":2}' >"$OUT/sum-after" 2>&1
check_eq "budget survives a restart: call denied" "true" "$(jq -r .isError "$OUT/sum-after" 2>/dev/null)"
check_match "budget survives a restart: the reason is the budget" "[Bb]udget" \
    "$(jq -r '.content[0].text' "$OUT/sum-after" 2>/dev/null)"
check_eq "audit: after the restart still 10 get-sum calls allowed" 10 "$(calls "$B" allow)"
client "$B" "$TB" ev --call echo '{"message":"after restart"}' >"$OUT/echo-after" 2>&1
check_match "token survives the restart" "Echo: after restart" "$(cat "$OUT/echo-after")"

# ---------------------------------------------------------------- taint
web() { world_sandbox "$1" curl -s -o /dev/null -w '%{http_code}' -m 5 "http://$2/ip"; }
check_eq "C reaches web before taint" 200 "$(web "$C" "$WORLD_WEB")"
client "$C" "$TC" ev --call get-tiny-image '{}' >"$OUT/img" 2>&1
check_match "tainting call answered" '"image"' "$(cat "$OUT/img")"
check_fails "right after the tainting call web is cut" \
    world_sandbox "$C" curl -s -o /dev/null -m 3 "http://$WORLD_WEB/ip"
check_eq "the keep-list host still works" 200 "$(web "$C" "$WORLD_PKG")"
check_eq "another sandbox is not tainted" 200 "$(web "$A" "$WORLD_WEB")"
check_match "sandbox C shows tainted" true \
    "$(sl sandbox show "$C" 2>/dev/null | jq -r '.tainted' 2>/dev/null)"

# ---------------------------------------------------------------- delete
client "$A" "$TA" evh --timeout 15000 --call echo '{"message":"orphan"}' >"$OUT/ask4" 2>&1 &
p4=$!
wait_for 10 npend 1
check "sandbox rm A with a pending approval" sl sandbox rm "$A"
check_eq "its pending approval is gone" 0 "$(sl approvals --json | jq length)"
wait "$p4"
check_fails "the removed sandbox's waiting call got no result" \
    grep -q 'Echo: orphan' "$OUT/ask4"

check_eq "status reports the bridge" 0 \
    "$(sl status --json | jq -r '.mcp.pending_approvals')"
check "sluiced stops cleanly" world_stop_sluiced
check_fails "sanitizers: no report in sluiced's log" \
    grep -qE 'runtime error|ERROR: (Address|Leak)Sanitizer' "$WORLD_DIR/log/sluiced.log"
# No signing key in this config: "verified_with_warnings" is the best
# result, and what matters here is that the chain is intact.
check_match "the audit log's chain verifies" '^result: +verified' \
    "$("$SLUICE" audit verify --db "$WORLD_DIR/state/audit.db" 2>&1)"
finish
