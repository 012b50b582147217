#!/usr/bin/env bash
# t_privsep_bridge.sh: what a sandbox sends to the bridge port (HTTP,
# JSON-RPC, SSE) is parsed by a process that could not hurt the host if it
# were taken over, that alone holds the upstream credentials, and whose
# going away refuses tool calls rather than opening anything.
#
# The bridge process is a child of sluiced: its own uid, no capabilities,
# no_new_privs, a seccomp filter (read from /proc), none of the parent's
# files open. Its stdio servers are started by a starter of its own, as the
# bridge's user and outside the filter. Stopped, a call gets no answer and
# never reaches the upstream; killed, it is restarted and recorded, and
# calls work again; it goes with sluiced, and so do its servers.
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
SECRETS=$E2E_TMP/secrets
CFG=$E2E_TMP/sluice.yaml
NODE=$(command -v node)
mkdir -p "$POL" "$FLAGS" "$SECRETS"
# The drift server runs as the bridge's user and writes its calls here.
chmod 0777 "$FLAGS"
: >"$FLAGS/calls.log"
chmod 0666 "$FLAGS/calls.log"
# The credential is root's, 0600: only the bridge process (as root,
# before it drops) and its starter may read it.
printf 'bridge-secret-%s\n' "$$" >"$SECRETS/drift.cred"
chmod 0700 "$SECRETS"
chmod 0600 "$SECRETS/drift.cred"
cat >"$POL/pb.yaml" <<-'P'
	version: 1
	name: pb
	mcp:
	  tools:
	    - tool: drift/stable
	      decision: allow
	      args:
	        note: {type: string}
	    - tool: drift/shifty
	      decision: ask
	      args:
	        note: {type: string}
P
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<EOF
servers:
  - name: drift
    transport: stdio
    command: [$NODE, $WORLD_SERVERS/drift_server.mjs, $FLAGS]
    credential: {file: $SECRETS/drift.cred, child_env: DRIFT_TOKEN}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
PARENT=$_WORLD_SLUICED_PID
DB=$WORLD_DIR/state/audit.db

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
metrics() { world_host curl -s --max-time 30 --unix-socket "$WORLD_SOCK" http://localhost/metrics; }
# br_pid: the bridge process now (a child of sluiced in the bridge room).
br_pid() { pgrep -P "$PARENT" -f -- '--room bridge' | head -n 1; }
# br_settled [NOT_PID]: a bridge process (other than NOT_PID) has dropped
# its privileges (its filter, the last step, is on).
br_settled() {
	local p
	p=$(br_pid)
	[ -n "$p" ] && [ "$p" != "${1:-}" ] &&
	    [ "$(proc_status "$p" Seccomp)" = 2 ]
}
server_pid() { pgrep -f -- "drift_server.mjs $FLAGS" | head -n 1; }
findings() { sqlite3 "file:$DB?mode=ro" "SELECT count(*) FROM records WHERE kind = 5 AND CAST(canon AS TEXT) LIKE '%\"type\":\"process_exit\"%' AND CAST(canon AS TEXT) LIKE '%bridge process%'" 2>/dev/null; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
S=pb$$
TOK=$(sl sandbox create --policy pb --subject alice --id "$S" | jq -r .token)
[[ $TOK =~ ^[0-9a-f]{64}$ ]] || { not_ok "sandbox created"; finish; }
ok "sandbox created"
# call [TIMEOUT_MS]: drift/stable from the sandbox; prints the result.
call() {
	world_mcp_client "sandbox:$S" --url "$URL/drift" --timeout "${1:-15000}" \
	    --header "Authorization: Bearer $TOK" --call stable '{"note":"x"}'
}
calls() { grep -c stable "$FLAGS/calls.log"; }

# ---------------------------------------------------- 1: what it may do
check "a bridge process runs as a child of sluiced" wait_for 20 br_settled
P=$(br_pid)
BU=$(id -u sluice-bridge)
check_eq "its uids are sluice-bridge (real, effective, saved, fs)" \
    "$BU $BU $BU $BU" "$(proc_status "$P" Uid | tr -s ' \t' ' ')"
check_eq "it has no effective capabilities" 0000000000000000 "$(proc_status "$P" CapEff)"
check_eq "it has no permitted capabilities" 0000000000000000 "$(proc_status "$P" CapPrm)"
check_eq "its bounding set is empty" 0000000000000000 "$(proc_status "$P" CapBnd)"
check_eq "no_new_privs is set" 1 "$(proc_status "$P" NoNewPrivs)"
check_eq "a seccomp filter is on (mode 2)" 2 "$(proc_status "$P" Seccomp)"
# Its own database (bridge.db and its write-ahead log) and nothing of the
# parent's: no audit log, no state database, no key, no credential file.
files=$(for f in /proc/"$P"/fd/*; do readlink "$f"; done |
    grep -v -e '^socket:' -e '^pipe:' -e '^anon_inode:' -e '^/dev/null$' \
        -e '/bridge\.db$' -e '/bridge\.db-wal$' |
    grep -v -F "$WORLD_DIR/log/sluiced.log")
check_eq "it holds no file of the parent's (audit log, state, key)" "" "$files"
check "the parent never opened the credential file for reading" \
    sh -c "! grep -q bridge-secret /proc/$PARENT/environ"
# The parent's memory would be the place to look; what can be read from
# outside is whether the secret is in its environment or open files.
check_eq "the parent holds no credential file open" "" \
    "$(for f in /proc/"$PARENT"/fd/*; do readlink "$f"; done | grep -F "$SECRETS" || true)"

# ---------------------------------------------------- 2: its servers
check "the stdio server is running" wait_for 20 test -n "$(server_pid)"
SP=$(server_pid)
check_eq "the stdio server runs as sluice-bridge" "$BU" \
    "$(proc_status "$SP" Uid | awk '{ print $1 }')"
check_eq "the stdio server has no capabilities" 0000000000000000 "$(proc_status "$SP" CapEff)"
check_eq "the stdio server is not under the bridge's filter" 0 "$(proc_status "$SP" Seccomp)"
check "the stdio server got its credential" \
    grep -q "DRIFT_TOKEN=bridge-secret-$$" "/proc/$SP/environ"

# ---------------------------------------------------- 3: it serves
check_match "a call is answered through the bridge process" "note from stable" "$(call)"
check_eq "it reached the upstream once" 1 "$(calls)"
recorded() {
	test "$(sqlite3 "file:$DB?mode=ro" "SELECT count(*) FROM records WHERE CAST(canon AS TEXT) LIKE '%\"tool\":\"stable\"%'" 2>/dev/null)" -ge 1
}
check "its record is in the parent's audit log" wait_for 10 recorded

# ------------------------------------------------- 4: stopped, then killed
# Stopped, it answers nothing: the call times out and never reaches the
# upstream (nothing is decided without it).
kill -STOP "$P"
out=$(call 3000 2>&1)
check_fails "bridge stopped: the call gets no result" grep -q "note from" <<<"$out"
check_eq "bridge stopped: nothing reached the upstream" 1 "$(calls)"
exits0=$(findings)
kill -KILL "$P"
check "killed: a new bridge process is started" wait_for 30 br_settled "$P"
P2=$(br_pid)
check_eq "the new one has no capabilities either" 0000000000000000 "$(proc_status "$P2" CapEff)"
check_eq "the new one is filtered too" 2 "$(proc_status "$P2" Seccomp)"
check "the death is recorded (a process_exit finding)" wait_for 10 \
    test "$(findings)" -gt "${exits0:-0}"
answered() { call 5000 2>/dev/null | grep -q 'note from stable'; }
check "restarted: a call is answered again" wait_for 30 answered
ex=$(metrics | awk '$1 == "sluice_process_exits_total{room=\"bridge\"}" { print $2 }')
check "sluice_process_exits_total{room=\"bridge\"} is at least 1" test "${ex:-0}" -ge 1
check_eq "sluice_process_up{room=\"bridge\"} is 1 again" 1 \
    "$(metrics | awk '$1 == "sluice_process_up{room=\"bridge\"}" { print $2 }')"

# -------------------------------------------------- 5: it goes with sluiced
# A call waiting for a person when sluiced stops is denied in Sluice's
# name and recorded: the bridge process hands its records over first.
world_mcp_client "sandbox:$S" --url "$URL/drift" --timeout 20000 \
    --header "Authorization: Bearer $TOK" --call shifty '{"note":"y"}' \
    >"$E2E_TMP/ask.out" 2>&1 &
ASK=$!
npend() { test "$(sl approvals --json 2>/dev/null | jq length)" = "$1"; }
check "a call waits for approval" wait_for 20 npend 1
SP2=$(server_pid)
world_stop_sluiced
wait "$ASK"
check_fails "its caller got no result" grep -q "note from" "$E2E_TMP/ask.out"
check_eq "it is recorded as denied by sluice" "denied sluice deny" \
    "$("$SLUICE" audit tail --db "$DB" --kind mcp.call 2>/dev/null |
      jq -r 'select(.tool == "shifty") | "\(.approval) \(.approver) \(.decision)"')"
check "the stopped daemon's bridge process is gone" wait_for 10 sh -c "! kill -0 $P2 2>/dev/null"
check "and its stdio server" wait_for 10 sh -c "! kill -0 ${SP2:-0} 2>/dev/null"

# ------------------------------------- 6: the build without sanitizers
# The sanitizers' filters allow calls of their own; the production filter
# is the one that must hold for the work itself.
if [ -x "${SLUICE_PLAIN_BUILD:-}/sluiced" ]; then
	SLUICED=$SLUICE_PLAIN_BUILD/sluiced
	exits0=$(findings)
	world_start_sluiced "$CFG" || { not_ok "the plain build starts"; finish; }
	PARENT=$_WORLD_SLUICED_PID
	check "plain build: a bridge process runs" wait_for 20 br_settled
	check_match "plain build: a call is answered" "note from stable" "$(call)"
	check_eq "plain build: no process_exit finding" "${exits0:-0}" "$(findings)"
	world_stop_sluiced
else
	echo "# no build without sanitizers (SLUICE_PLAIN_BUILD): part 6 not run"
fi
finish
