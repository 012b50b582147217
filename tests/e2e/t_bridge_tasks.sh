#!/bin/bash
# t_bridge_tasks.sh: the tasks extension of the 2026-07-28 revision
# (io.modelcontextprotocol/tasks), served by the bridge itself, end to
# end. Every request is built by hand and sent with curl from inside a
# sandbox, as t_bridge_rev.sh does, to upstreams over stdio
# (servers/sreq_server.mjs, which asks its client things during a call).
# Shown here: server/discover advertises the extension; a call that waits
# for a person (`decision: ask`) is answered with a task handle, tasks/get
# shows it working while it awaits approval, and once approved by the CLI
# its result (a declined one: the refusal, as the call's answer would be);
# tasks/cancel before approval: cancelled, recorded so, and no budget
# charged (the next call's record shows the budget's use); cancel of an
# approved call in flight: the upstream hears notifications/cancelled
# under its own id; an upstream asking for sampling during a call makes
# the call a task, input_required with what is asked, and tasks/update
# with the answer completes it; another sandbox's tasks/get or cancel of
# the id is refused exactly as an unknown id, and never recorded; the
# bound on tasks per sandbox (the daemon config's limits) refuses the
# next with a clear message while the bridge keeps serving; malformed
# tasks/... params: -32602; a client that did not declare the extension
# is served as before (an ask-call waits on its request, the upstream's
# requests come in an InputRequiredResult) and its tasks/... get -32021,
# as does its subscriptions/listen asking for taskIds;
# removing a sandbox drops its tasks. Every task's records name it.
# Torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v curl >/dev/null && command -v node >/dev/null ||
    { not_ok "jq, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
CFG=$E2E_TMP/sluice.yaml POL=$E2E_TMP/policies OUT=$E2E_TMP/out
FLAGS=$E2E_TMP/sreq FLAGS2=$E2E_TMP/sreq2
mkdir -p "$POL" "$OUT" "$FLAGS" "$FLAGS2"
: >"$FLAGS/calls.log" && : >"$FLAGS2/calls.log" && chmod 0777 "$FLAGS" "$FLAGS2" &&
    chmod 0666 "$FLAGS/calls.log" "$FLAGS2/calls.log"
cat >"$POL/tk.yaml" <<EOF
version: 1
name: tk
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
        kind: {enum: [other, hang]}
    - tool: sreq2/ask
      decision: allow
      args:
        kind: {enum: [sampling]}
  server_requests:
    - server: sreq
      sampling: allow
    - server: sreq2
      sampling: allow
EOF
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<EOF
limits:
  tasks_per_sandbox: 6
servers:
  - name: sreq
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $FLAGS]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
  - name: sreq2
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $FLAGS2]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
world_bridge_listening && ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
A=ka$$ B=kb$$ C=kc$$
TA=$(world_sandbox_token tk alice "$A")
TB=$(world_sandbox_token tk bob "$B")
TC=$(world_sandbox_token tk carol "$C")
[[ $TA =~ ^[0-9a-f]{64}$ && $TB =~ ^[0-9a-f]{64}$ && $TC =~ ^[0-9a-f]{64}$ ]] &&
    ok "sandboxes created" || { not_ok "sandboxes created"; finish; }

V=2026-07-28
TASKS='{"extensions":{"io.modelcontextprotocol/tasks":{}}}'
# req ID METHOD PARAMS CAPS: a request of the revision, _meta filled.
req() {
	jq -nc --argjson id "$1" --arg m "$2" --argjson p "$3" --argjson c "$4" \
	    '{jsonrpc: "2.0", id: $id, method: $m, params: ($p + {_meta: {
	      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
	      "io.modelcontextprotocol/clientInfo": {name: "curl", version: "1"},
	      "io.modelcontextprotocol/clientCapabilities": $c}})}'
}
# rev SBX TOKEN SERVER METHOD NAME BODY: the answer's body, then its
# status on a line of its own (NAME empty: no Mcp-Name).
rev() {
	local sbx=$1 tok=$2 srv=$3 m=$4 n=$5 body=$6
	world_sandbox "$sbx" curl -s -m 30 -X POST -w '\n%{http_code}' \
	    -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
	    -H 'Accept: application/json, text/event-stream' \
	    -H "MCP-Protocol-Version: $V" -H "Mcp-Method: $m" ${n:+-H "Mcp-Name: $n"} \
	    --data-binary "$body" "$URL/$srv"
}
status() { tail -n 1 <<<"$1"; }
body() { sed '$d' <<<"$1"; }
# call SBX TOKEN SERVER KIND [CAPS]: tools/call ask(KIND), with the
# extension declared unless CAPS says otherwise.
N=100
call() {
	N=$((N + 1))
	rev "$1" "$2" "$3" tools/call ask \
	    "$(req $N tools/call "{\"name\":\"ask\",\"arguments\":{\"kind\":\"$4\"}}" "${5:-$TASKS}")"
}
# task SBX TOKEN METHOD ID [MORE] [CAPS]: tasks/METHOD of task ID.
task() {
	N=$((N + 1))
	rev "$1" "$2" sreq "tasks/$3" "$4" "$(req $N "tasks/$3" \
	    "$(jq -nc --arg t "$4" --argjson x "${5:-{\}}" '{taskId: $t} + $x')" "${6:-$TASKS}")"
}
tstatus() { body "$(task "$1" "$2" get "$3")" | jq -r .result.status; }
npend() { sl approvals --json 2>/dev/null | jq -e "length == $1" >/dev/null; }
pending_id() { sl approvals --json | jq -r --arg s "$1" '[.[] | select(.sandbox == $s)][0].id'; }
calls() {	# calls SBX: SBX's mcp.call records, one a line
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.call \
	    --sandbox "$1" 2>/dev/null
}
of_task() { calls "$1" | jq -c --arg d "task $2" 'select(.detail == $d)'; }

# ---------------------------------------------------------------- discover
r=$(rev "$A" "$TA" sreq server/discover '' "$(req 1 server/discover '{}' '{}')")
check_eq "server/discover advertises the extension" '200 {}' \
    "$(status "$r") $(body "$r" | jq -c '.result.capabilities.extensions["io.modelcontextprotocol/tasks"]')"

# ---------------------------------------------------------------- approve
r=$(call "$A" "$TA" sreq other)
T1=$(body "$r" | jq -r .result.taskId)
check_eq "an ask-call is answered with a task, working" '200 task working' \
    "$(status "$r") $(body "$r" | jq -r '.result | "\(.resultType) \(.status)"')"
check_match "... its id random and long" '^sluice-task-[0-9a-f]{32}$' "$T1"
check_match "... saying it awaits approval, with a poll interval and its times" \
    'approval.* [0-9]+ 20[0-9-]+T[0-9:.]+Z' \
    "$(body "$r" | jq -r '.result | "\(.statusMessage) \(.pollIntervalMs) \(.createdAt)"')"
r=$(task "$A" "$TA" get "$T1")
check_eq "tasks/get: working, complete as a result" '200 working complete' \
    "$(status "$r") $(body "$r" | jq -r '.result | "\(.status) \(.resultType)"')"
check "the call waits for approval" wait_for 10 npend 1
check "approve it by the CLI" sl approve "$(pending_id "$A")" --reason "fine"
wait_for 10 eval '[ "$(tstatus "$A" "$TA" "$T1")" = completed ]'
r=$(task "$A" "$TA" get "$T1")
check_eq "tasks/get: completed with the upstream's result" 'completed -32601 number' \
    "$(body "$r" | jq -r '.result | "\(.status) \(.result.content[0].text | fromjson | .error.code) \(.ttlMs | type)"')"
check_eq "its call is recorded, approved, naming the task" 'allow approved' \
    "$(of_task "$A" "$T1" | jq -r '"\(.decision) \(.approval)"')"
check_eq "its intent names the task too" 1 \
    "$("$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.intent --sandbox "$A" 2>/dev/null |
      jq -c --arg d "task $T1" 'select(.detail == $d)' | wc -l)"

# ---------------------------------------------------------------- deny
r=$(call "$A" "$TA" sreq other)
T2=$(body "$r" | jq -r .result.taskId)
check "the second waits" wait_for 10 npend 1
check "decline it by the CLI" sl deny "$(pending_id "$A")" --reason "not now"
wait_for 10 eval '[ "$(tstatus "$A" "$TA" "$T2")" = completed ]'
check_match "a declined call's task holds the refusal, as its answer would" \
    '^completed true A person declined this call: not now$' \
    "$(body "$(task "$A" "$TA" get "$T2")" | jq -r '.result | "\(.status) \(.result.isError) \(.result.content[0].text)"')"

# ---------------------------------------------------------------- cancel
r=$(call "$A" "$TA" sreq other)
T3=$(body "$r" | jq -r .result.taskId)
check "the third waits" wait_for 10 npend 1
r=$(task "$A" "$TA" cancel "$T3")
check_eq "tasks/cancel before approval: acknowledged" '200 complete' \
    "$(status "$r") $(body "$r" | jq -r .result.resultType)"
check_eq "... the approval is withdrawn" 0 "$(sl approvals --json | jq length)"
check_eq "... the task is cancelled" cancelled "$(tstatus "$A" "$TA" "$T3")"
wait_for 10 sh -c "[ -n \"\$('$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox $A 2>/dev/null | grep $T3)\" ]"
check_eq "... recorded cancelled, never forwarded" 'deny cancelled cancelled -1' \
    "$(of_task "$A" "$T3" | jq -r '"\(.decision) \(.reason) \(.approval) \(.upstream_latency_us)"')"
# An approved call in flight: cancelled upstream under the upstream's id.
r=$(call "$A" "$TA" sreq hang)
T4=$(body "$r" | jq -r .result.taskId)
check "the fourth waits" wait_for 10 npend 1
check "approve the fourth" sl approve "$(pending_id "$A")"
check "it reaches the upstream" wait_for 10 grep -q '^call ' "$FLAGS/calls.log"
check_eq "tasks/get: working, in progress" 'working The call is in progress.' \
    "$(body "$(task "$A" "$TA" get "$T4")" | jq -r '.result | "\(.status) \(.statusMessage)"')"
UPID=$(sed -n 's/^call //p' "$FLAGS/calls.log" | head -n 1)
task "$A" "$TA" cancel "$T4" >/dev/null
check "the upstream hears notifications/cancelled under its own id" \
    wait_for 10 grep -qx "cancelled $UPID" "$FLAGS/calls.log"
wait_for 10 eval '[ "$(tstatus "$A" "$TA" "$T4")" = cancelled ]'
check_eq "... the task is cancelled" cancelled "$(tstatus "$A" "$TA" "$T4")"
wait_for 10 sh -c "[ -n \"\$('$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox $A 2>/dev/null | grep $T4)\" ]"
check_eq "... recorded: allowed, then cancelled upstream" 'allow cancelled true' \
    "$(of_task "$A" "$T4" | jq -r '"\(.decision) \(.reason) \(.upstream_latency_us >= 0)"')"
# Budget q counts the approved ones only: the first and this one.
check_eq "... the cancelled-before-approval call charged no budget" 2 \
    "$(of_task "$A" "$T4" | jq -r '.budget | fromjson | .q.calls')"

# ---------------------------------------------------------------- input
SAMPLING='{"sampling":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}'
r=$(call "$A" "$TA" sreq2 sampling "$SAMPLING")
T5=$(body "$r" | jq -r .result.taskId)
check_eq "an upstream's sampling during a call makes it a task: input_required" \
    '200 task input_required' "$(status "$r") $(body "$r" | jq -r '.result | "\(.resultType) \(.status)"')"
r=$(rev "$A" "$TA" sreq2 tasks/get "$T5" "$(req 150 tasks/get "{\"taskId\":\"$T5\"}" "$SAMPLING")")
K=$(body "$r" | jq -r '.result.inputRequests | keys[0]')
check_eq "tasks/get shows what is asked, under the bridge's id" \
    'input_required sampling/createMessage marker-sampling-please' \
    "$(body "$r" | jq -r --arg k "$K" '.result | "\(.status) \(.inputRequests[$k].method) \(.inputRequests[$k].params.messages[0].content.text)"')"
check_match "... an id that is not the upstream's" '^sluice-[0-9a-f]{32}$' "$K"
UPD=$(jq -nc --arg t "$T5" --arg k "$K" '{taskId: $t, inputResponses: {($k): {role: "assistant",
    model: "m", content: {type: "text", text: "task-answer"}}, "sluice-unknown": {x: 1}}}')
r=$(rev "$A" "$TA" sreq2 tasks/update "$T5" "$(req 151 tasks/update "$UPD" "$SAMPLING")")
check_eq "tasks/update: acknowledged" '200 complete' "$(status "$r") $(body "$r" | jq -r .result.resultType)"
wait_for 10 eval '[ "$(body "$(rev "$A" "$TA" sreq2 tasks/get "$T5" "$(req 152 tasks/get "{\"taskId\":\"$T5\"}" "$SAMPLING")")" | jq -r .result.status)" = completed ]'
r=$(rev "$A" "$TA" sreq2 tasks/get "$T5" "$(req 153 tasks/get "{\"taskId\":\"$T5\"}" "$SAMPLING")")
check_eq "... the task completes: the upstream got the answer" 'completed task-answer' \
    "$(body "$r" | jq -r '.result | "\(.status) \(.result.content[0].text | fromjson | .result.content.text)"')"
r=$(task "$A" "$TA" get "$T5")
check_eq "the task is bound to its server's path too" '400 -32602' \
    "$(status "$r") $(body "$r" | jq -r .error.code)"

# ---------------------------------------------------------------- others
r=$(call "$A" "$TA" sreq other)
T6=$(body "$r" | jq -r .result.taskId)
check "the sixth waits" wait_for 10 npend 1
UNK=$(task "$A" "$TA" get sluice-task-00000000000000000000000000000000)
check_eq "an unknown task id: 400 -32602" '400 -32602' "$(status "$UNK") $(body "$UNK" | jq -r .error.code)"
for m in get cancel; do
	r=$(task "$B" "$TB" $m "$T6")
	check_eq "another sandbox's tasks/$m of the id: refused exactly as an unknown id" \
	    "$(status "$UNK") $(body "$UNK" | jq -c '.error')" "$(status "$r") $(body "$r" | jq -c '.error')"
done
r=$(task "$B" "$TB" update "$T6" '{"inputResponses":{}}')
check_eq "... and its tasks/update" '400 -32602' "$(status "$r") $(body "$r" | jq -r .error.code)"
check_eq "... the task is untouched, still waiting" '1 working' \
    "$(sl approvals --json | jq length) $(tstatus "$A" "$TA" "$T6")"
check_eq "... and none of those attempts is recorded" '' "$(calls "$B")"

# ---------------------------------------------------------------- bound
r=$(call "$A" "$TA" sreq other)
check_eq "a seventh task of the sandbox: refused, the call not queued" \
    '200 true 1' "$(status "$r") $(body "$r" | jq -r .result.isError) $(sl approvals --json | jq length)"
check_match "... with a clear message" 'Too many tasks' "$(body "$r" | jq -r '.result.content[0].text')"
check_eq "... recorded as an overload" 'deny overload' \
    "$(calls "$A" | jq -r 'select(.message // "" | test("Too many tasks")) | "\(.decision) \(.reason)"' | head -n 1)"
r=$(call "$C" "$TC" sreq other)
TC1=$(body "$r" | jq -r .result.taskId)
check_eq "another sandbox still gets its task" 'task working' \
    "$(body "$r" | jq -r '.result | "\(.resultType) \(.status)"')"
check "approve A's sixth" sl approve "$(pending_id "$A")"
wait_for 10 eval '[ "$(tstatus "$A" "$TA" "$T6")" = completed ]'
check_eq "the bridge keeps serving A's tasks" completed "$(tstatus "$A" "$TA" "$T6")"

# ---------------------------------------------------------------- params
for p in '{}' '{"taskId":7}' '{"taskId":["x"]}'; do
	N=$((N + 1))
	r=$(rev "$A" "$TA" sreq tasks/get '' "$(req $N tasks/get "$p" "$TASKS")")
	check_eq "tasks/get with $p: -32602" '400 -32602' "$(status "$r") $(body "$r" | jq -r .error.code)"
done
LONG=$(printf 'x%.0s' $(seq 200))
r=$(task "$A" "$TA" get "$LONG")
check_eq "tasks/get with a taskId of 200 bytes: -32602" '400 -32602' \
    "$(status "$r") $(body "$r" | jq -r .error.code)"
r=$(rev "$A" "$TA" sreq tasks/get "$T1" "$(req 190 tasks/get "{\"taskId\":\"$T6\"}" "$TASKS")")
check_eq "tasks/get with Mcp-Name not the body's taskId: -32020" '400 -32020' \
    "$(status "$r") $(body "$r" | jq -r .error.code)"
r=$(task "$A" "$TA" update "$T6")
check_eq "tasks/update without inputResponses: -32602" '400 -32602' \
    "$(status "$r") $(body "$r" | jq -r .error.code)"
r=$(task "$A" "$TA" update "$T6" '{"inputResponses":[1]}')
check_eq "tasks/update with inputResponses not an object: -32602" '400 -32602' \
    "$(status "$r") $(body "$r" | jq -r .error.code)"
r=$(task "$A" "$TA" get "$T6" '{}' '{}')
check_eq "tasks/get from a client that did not declare the extension: -32021" \
    '400 -32021 {}' "$(status "$r") $(body "$r" | jq -c '.error | "\(.code) \(.data.requiredCapabilities.extensions["io.modelcontextprotocol/tasks"])"' | tr -d '"')"

r=$(rev "$A" "$TA" sreq subscriptions/listen '' \
    "$(req 192 subscriptions/listen "{\"notifications\":{\"taskIds\":[\"$T6\"]}}" '{}')")
check_eq "subscriptions/listen for taskIds without the extension: -32021" '400 -32021' \
    "$(status "$r") $(body "$r" | jq -r .error.code)"

# ---------------------------------------------------------------- unchanged
call "$B" "$TB" sreq other '{}' >"$OUT/plain" &
pp=$!
check "without the extension an ask-call waits on its request" wait_for 10 npend 2
check "approve it" sl approve "$(pending_id "$B")"
wait "$pp"
check_eq "... and is answered the call's result, as before" '200 complete -32601' \
    "$(status "$(cat "$OUT/plain")") $(body "$(cat "$OUT/plain")" | jq -r '.result | "\(.resultType) \(.content[0].text | fromjson | .error.code)"')"
r=$(call "$B" "$TB" sreq2 sampling '{"sampling":{}}')
check_eq "... and an upstream's request comes in an InputRequiredResult" '200 input_required' \
    "$(status "$r") $(body "$r" | jq -r .result.resultType)"

# ---------------------------------------------------------------- removal
check "sandbox rm C with a task waiting for approval" sl sandbox rm "$C"
check_eq "its approval is gone" 0 "$(sl approvals --json | jq length)"
wait_for 10 sh -c "[ -n \"\$('$SLUICE' audit tail --db '$WORLD_DIR/state/audit.db' --kind mcp.call --sandbox $C 2>/dev/null | grep $TC1)\" ]"
check_eq "its call is recorded, denied by Sluice, naming the task" 'deny denied sluice' \
    "$(of_task "$C" "$TC1" | jq -r '"\(.decision) \(.approval) \(.approver)"')"

check "sluiced stops cleanly" world_stop_sluiced
check_fails "sanitizers: no report in sluiced's log" \
    grep -qE 'runtime error|ERROR: (Address|Leak)Sanitizer' "$WORLD_DIR/log/sluiced.log"
check_match "the audit log's chain verifies" '^result: +verified' \
    "$("$SLUICE" audit verify --db "$WORLD_DIR/state/audit.db" 2>&1)"
finish
