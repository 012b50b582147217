#!/usr/bin/env bash
# t_bridge_intent.sh: a tool call leaves a record before it leaves for its
# upstream, so that no crash can leave an upstream action unrecorded.
#
# An upstream that holds its calls (servers/hold_server.mjs) logs each call
# it receives; several calls from a sandbox are held there when sluiced (the
# parent, which writes the audit log) is killed with SIGKILL. After the
# restart: every call the upstream received has its mcp.intent in the log,
# every intent without an outcome was closed by exactly one
# mcp.outcome_unknown written by the restart, the calls that finished are
# not among them, a second restart closes nothing again, and the log
# verifies. Then the bridge process alone is killed with calls held:
# sluiced closes the intents it left open at once (no restart of sluiced
# needed), starts a new one, every call the upstream received has its
# intent, each one got exactly one mcp.outcome_unknown written after the
# kill, and a restart of sluiced closes none of them again. Last, a
# server request (sampling, of servers/sreq_server.mjs) carried to a client
# that has not answered it when the bridge process is killed: the log
# holds its mcp.server_request record, of unknown outcome.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq node pgrep sqlite3; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
id -u sluice-bridge >/dev/null 2>&1 ||
    { not_ok "user sluice-bridge exists (tests/deps.sh)"; finish; }

world_up || { not_ok "world_up"; finish; }
POL=$E2E_TMP/policies
FLAGS=$E2E_TMP/flags
CFG=$E2E_TMP/sluice.yaml
NODE=$(command -v node)
N=6
SRF=$E2E_TMP/sreq
mkdir -p "$POL" "$FLAGS" "$SRF"
# The servers run as the bridge's user and write their calls here.
chmod 0777 "$FLAGS" "$SRF"
: >"$FLAGS/calls.log"
chmod 0666 "$FLAGS/calls.log"
cat >"$POL/hi.yaml" <<-'P'
	version: 1
	name: hi
	mcp:
	  tools:
	    - tool: hold/quick
	      decision: allow
	      args:
	        k: {type: string}
	    - tool: hold/hold
	      decision: allow
	      args:
	        k: {type: string}
	    - tool: sreq/ask
	      decision: allow
	      args:
	        kind: {enum: [sampling]}
	  server_requests:
	    - server: sreq
	      sampling: allow
P
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<-C
	servers:
	  - name: hold
	    transport: stdio
	    command: [$NODE, $WORLD_SERVERS/hold_server.mjs, $FLAGS]
	  - name: sreq
	    transport: stdio
	    command: [$NODE, $WORLD_SERVERS/sreq_server.mjs, $SRF]
C
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
PARENT=$_WORLD_SLUICED_PID
DB=$WORLD_DIR/state/audit.db

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
au() { SLUICE_AUDIT_DB=$DB "$SLUICE" audit "$@"; }
verify_ok() { au verify >"$E2E_TMP/verify.out" 2>&1; r=$?; [ $r -eq 0 ] || [ $r -eq 3 ] || { cat "$E2E_TMP/verify.out"; return 1; }; }
br_pid() { pgrep -P "$PARENT" -f -- '--room bridge' | head -n 1; }
# mcp KIND: the records of KIND as JSON lines (each with its seq).
mcp() { au tail --kind "$1" -n 100000 2>/dev/null; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
S=hi$$
TOK=$(sl sandbox create --policy hi --subject alice --id "$S" | jq -r .token)
[[ $TOK =~ ^[0-9a-f]{64}$ ]] || { not_ok "sandbox created"; finish; }
ok "sandbox created"
# call TOOL K [TIMEOUT_MS]: TOOL with {"k": K} from the sandbox.
call() {
	world_mcp_client "sandbox:$S" --url "$URL/hold" --timeout "${3:-15000}" \
	    --header "Authorization: Bearer $TOK" --call "$1" "{\"k\":\"$2\"}"
}
# received TOOL: the k of each call of TOOL the upstream received.
received() { jq -r --arg t "$1" 'select(.tool == $t) | .k' "$FLAGS/calls.log" | sort; }
# intent_of K: the call id of the intent whose arguments are {"k": K}.
intent_of() {
	mcp mcp.intent | jq -r --arg k "$1" \
	    'select((.arguments | fromjson | .k) == $k) | .call_id'
}

# ------------------------------------------------- 1: calls that finish
check_match "a quick call is answered" "quick q1 done" "$(call quick q1)"
check_match "another one" "quick q2 done" "$(call quick q2)"
Q1=$(intent_of q1)
check_match "the finished call has an intent with a call id" '^[0-9a-f]{32}$' "$Q1"
check_eq "and an outcome (mcp.call) with the same call id" allow \
    "$(mcp mcp.call | jq -r --arg c "$Q1" 'select(.call_id == $c) | .decision')"
iseq=$(mcp mcp.intent | jq -r --arg c "$Q1" 'select(.call_id == $c) | .seq')
oseq=$(mcp mcp.call | jq -r --arg c "$Q1" 'select(.call_id == $c) | .seq')
check "the intent comes before the outcome" test "${iseq:-0}" -lt "${oseq:-0}"

# hold_n P: N calls of hold, k P1 to PN, in the background (their output
# in $E2E_TMP/hold-PI.out, their pids in pids); held P: the upstream holds
# them all.
hold_n() {
	local i
	pids=()
	for ((i = 1; i <= N; i++)); do
		call hold "$1$i" 60000 >"$E2E_TMP/hold-$1$i.out" 2>&1 &
		pids+=($!)
	done
	cleanup_push "kill ${pids[*]} 2>/dev/null"
}
held() { [ "$(received hold | grep -c "^$1")" -ge "$N" ]; }

# ------------------------------------------ 2: calls held, sluiced killed
hold_n h
check "the upstream holds $N calls" wait_for 60 held h
BP=$(br_pid)
kill -KILL "$PARENT"
wait "$PARENT" 2>/dev/null
_WORLD_SLUICED_PID=
check "the bridge process goes with its parent" wait_for 15 \
    sh -c "! kill -0 ${BP:-0} 2>/dev/null"
for p in "${pids[@]}"; do
	kill "$p" 2>/dev/null
	wait "$p" 2>/dev/null
done
check_fails "no held call got a result" grep -q "hold h[0-9]* done" \
    "$E2E_TMP"/hold-h*.out
opens=$(mcp log.open | wc -l)
check_eq "no outcome_unknown before the restart" 0 \
    "$(mcp mcp.outcome_unknown | wc -l)"

world_start_sluiced "$CFG" || { not_ok "sluiced restarts after SIGKILL"; finish; }
ok "sluiced restarts after SIGKILL"
PARENT=$_WORLD_SLUICED_PID
check_eq "a new log.open" "$((opens + 1))" "$(mcp log.open | wc -l)"
restart_seq=$(mcp log.open | tail -n 1 | jq -r .seq)

# Every call the upstream received has an intent in the log.
missing=0
for k in $(received hold) $(received quick); do
	[ -n "$(intent_of "$k")" ] || { echo "# received, no intent: $k"; missing=$((missing + 1)); }
done
check_eq "every call the upstream received ($(wc -l <"$FLAGS/calls.log")) has an intent record" 0 "$missing"

# Every intent without an outcome got exactly one mcp.outcome_unknown,
# written after the restart; those with an outcome got none.
n_unknown() { mcp mcp.outcome_unknown | wc -l; }
check "the restart closes the open intents" wait_for 20 \
    test "$(n_unknown)" -ge "$N"
bad=0
for id in $(mcp mcp.intent | jq -r .call_id); do
	o=$(mcp mcp.call | jq -r --arg c "$id" 'select(.call_id == $c) | .seq' | grep -c .)
	u=$(mcp mcp.outcome_unknown | jq -r --arg c "$id" 'select(.call_id == $c) | .seq')
	nu=$(printf '%s' "$u" | grep -c .)
	[ "$o" -eq 1 ] && [ "$nu" -eq 0 ] && continue
	[ "$o" -eq 0 ] && [ "$nu" -eq 1 ] && [ "$u" -gt "$restart_seq" ] && continue
	echo "# call $id: $o outcomes, $nu unknown (at ${u:-none}; restart at $restart_seq)"
	bad=$((bad + 1))
done
check_eq "each intent has one outcome or one outcome_unknown after the restart" 0 "$bad"
check_eq "the held calls are the ones closed as unknown ($N)" "$N" "$(n_unknown)"
check_eq "outcome_unknown names the tool" hold \
    "$(mcp mcp.outcome_unknown | jq -r .tool | sort -u)"
check "audit verify passes after the crash" verify_ok
check_match "OCSF: an intent is API Activity" '"class_uid":6003' \
    "$(au tail --format ocsf --kind mcp.intent 2>/dev/null | head -n 1)"
check_match "OCSF: an unknown outcome has status Unknown" '"status_id":0' \
    "$(au tail --format ocsf --kind mcp.outcome_unknown 2>/dev/null | head -n 1)"

# ----------------------------------- 3: it works again, closes nothing twice
: >"$FLAGS/release"
answered() { call quick q3 5000 2>/dev/null | grep -q 'quick q3 done'; }
check "a call is answered after the restart" wait_for 30 answered
world_stop_sluiced
world_start_sluiced "$CFG" || { not_ok "sluiced starts again"; finish; }
PARENT=$_WORLD_SLUICED_PID
check_match "and after a clean restart" "quick q4 done" "$(call quick q4)"
check_eq "a clean restart closes nothing again" "$N" "$(n_unknown)"
check "audit verify passes at the end" verify_ok

# --------------------------- 4: the bridge process killed, sluiced running
# The parent outlives its bridge process: the intents the dead process
# left open are closed by the parent at once, not at the next start of
# sluiced, and the bridge is started again.
rm -f "$FLAGS/release"
answered_q() { call quick "$1" 5000 2>/dev/null | grep -q "quick $1 done"; }
check "the bridge answers before the kill" wait_for 30 answered_q q5
unknown0=$(n_unknown)
opens0=$(mcp log.open | wc -l)
hold_n b
check "the upstream holds $N calls again" wait_for 60 held b
BP=$(br_pid)
kill_seq=$(mcp mcp.intent | tail -n 1 | jq -r .seq)
kill -KILL "$BP"
br_new() { local p; p=$(br_pid); [ -n "$p" ] && [ "$p" != "$BP" ]; }
check "the parent starts a new bridge process" wait_for 30 br_new
check "sluiced itself still runs" kill -0 "$PARENT"
check "the dead process's open intents are closed, sluiced not restarted" \
    wait_for 20 test "$(n_unknown)" -ge $((unknown0 + N))
check_eq "no new log.open: it was the same sluiced" "$opens0" "$(mcp log.open | wc -l)"
for p in "${pids[@]}"; do
	wait "$p" 2>/dev/null
done
check_fails "no held call got a result" grep -q "hold b[0-9]* done" \
    "$E2E_TMP"/hold-b*.out
missing=0 bad=0
for k in $(received hold | grep '^b'); do
	id=$(intent_of "$k")
	if [ -z "$id" ]; then
		echo "# received, no intent: $k"
		missing=$((missing + 1))
		continue
	fi
	o=$(mcp mcp.call | jq -r --arg c "$id" 'select(.call_id == $c) | .seq' | grep -c .)
	u=$(mcp mcp.outcome_unknown | jq -r --arg c "$id" 'select(.call_id == $c) | .seq')
	nu=$(printf '%s' "$u" | grep -c .)
	[ "$o" -eq 0 ] && [ "$nu" -eq 1 ] && [ "$u" -gt "$kill_seq" ] && continue
	echo "# call $k ($id): $o outcomes, $nu unknown (at ${u:-none}; kill after $kill_seq)"
	bad=$((bad + 1))
done
check_eq "every call the upstream received ($(received hold | grep -c '^b')) has an intent record" 0 "$missing"
check_eq "each got one outcome_unknown, written after the kill" 0 "$bad"
check_eq "the held calls are the ones closed ($N)" $((unknown0 + N)) "$(n_unknown)"
check_match "outcome_unknown says the bridge process ended" 'bridge process ended' \
    "$(mcp mcp.outcome_unknown | tail -n 1 | jq -r .detail)"
check "the new bridge process answers" wait_for 30 answered_q q6
world_stop_sluiced
world_start_sluiced "$CFG" || { not_ok "sluiced starts after the bridge's death"; finish; }
PARENT=$_WORLD_SLUICED_PID
check "and after a restart of sluiced" wait_for 30 answered_q q7
check_eq "which closes none of them again" $((unknown0 + N)) "$(n_unknown)"
check "audit verify passes after the bridge's death" verify_ok

# ------------------ 5: a server request at the client, the bridge killed
# By hand (curl), a client that never answers: the call's answer becomes
# an event stream carrying the upstream's sampling request, and the
# bridge process is killed while the request waits there.
H_ACC='Accept: application/json, text/event-stream'
H_JSON='Content-Type: application/json'
H_VER='MCP-Protocol-Version: 2025-06-18'
H_AUTH="Authorization: Bearer $TOK"
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}},"clientInfo":{"name":"curl","version":"1"}}}'
check "the bridge answers before the kill" wait_for 30 answered_q q8
world_sandbox "$S" curl -s -m 10 -D "$E2E_TMP/sr.hdr" -o /dev/null -X POST \
    -H "$H_AUTH" -H "$H_ACC" -H "$H_JSON" --data "$INIT" "$URL/sreq"
SID=$(awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' "$E2E_TMP/sr.hdr" | tr -d '\r')
world_sandbox "$S" curl -s -m 10 -o /dev/null -X POST -H "$H_AUTH" -H "$H_ACC" \
    -H "$H_JSON" -H "Mcp-Session-Id: $SID" -H "$H_VER" \
    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$URL/sreq"
world_sandbox "$S" curl -s -N -m 60 -o "$E2E_TMP/sr.stream" -X POST -H "$H_AUTH" \
    -H "$H_ACC" -H "$H_JSON" -H "Mcp-Session-Id: $SID" -H "$H_VER" \
    --data '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{"kind":"sampling"}}}' \
    "$URL/sreq" &
pc=$!
cleanup_push "kill $pc 2>/dev/null"
check "the sampling request waits at the client" wait_for 20 \
    grep -q 'sampling/createMessage' "$E2E_TMP/sr.stream"
RID=$(sed -n 's/^data: //p' "$E2E_TMP/sr.stream" | jq -r 'select(.method == "sampling/createMessage") | .id' | head -n 1)
unk_sr() { mcp mcp.server_request | jq -c 'select(.reason == "outcome_unknown")'; }
check_eq "no server request of unknown outcome before the kill" 0 "$(unk_sr | wc -l)"
BP=$(br_pid)
kill -KILL "$BP"
check "the parent starts a new bridge process" wait_for 30 br_new
check "the request has its record" wait_for 20 sh -c "[ \"\$(SLUICE_AUDIT_DB='$DB' '$SLUICE' audit tail --kind mcp.server_request -n 100000 2>/dev/null | grep -c outcome_unknown)\" -ge 1 ]"
check_eq "one, of unknown outcome, for that sandbox, server and method" \
    "1 $S sreq sampling/createMessage unknown outcome_unknown" \
    "$(unk_sr | wc -l) $(unk_sr | jq -r '"\(.sandbox.id // .sandbox) \(.server) \(.method) \(.decision) \(.reason)"' | head -n 1)"
check_match "its detail: carried under the bridge's id, in its call, then the bridge ended" \
    "^forwarded as $RID; policy allow; in call [0-9a-f]{32}; outcome unknown: the bridge process ended" \
    "$(unk_sr | jq -r .detail | head -n 1)"
check_match "it keeps the digest of what was asked" '^sha256:[0-9a-f]{64}$' \
    "$(unk_sr | jq -r .arguments_digest | head -n 1)"
kill "$pc" 2>/dev/null
wait "$pc" 2>/dev/null
check "the new bridge process answers" wait_for 30 answered_q q9
world_stop_sluiced
check_eq "a clean stop records no more of them" 1 "$(unk_sr | wc -l)"
check "audit verify passes at the very end" verify_ok
finish
