#!/bin/bash
# t_fleet.sh: two Sluice hosts sharing one PostgreSQL database, as an
# operator sets them up (README "Running a fleet"). A throwaway cluster
# (tests/e2e/pg.sh) listens on a Unix socket only; its owner role makes the
# schema (`sluice fleet migrate`), the daemons' role gets INSERT and SELECT
# on the witness table. Each sluiced runs in a network and mount namespace
# of its own (the isolate.sh recipe, once per daemon), so the two set up
# their host sides without meeting; they share the database's socket and
# the scenario's files.
#
# Checked: the start refused, with a clear error, on a bad conninfo, a
# wrong password, a password in the config and a schema from a newer
# sluiced; UPDATE and DELETE on the witness refused to the daemons' role
# (privilege) and to the owner (trigger); every host's signed checkpoints
# reach the witness, `audit verify --witness` passes for both at assurance
# external, then reports TRUNCATION for a host whose log tail was cut and
# FORK for one whose history was rewritten and re-signed with its own key;
# the shared budgets' reservation: 50 at once against a limit of 10 make
# exactly 10, a restart of the database keeps the count, windows align
# and never go back, a release gives a call back;
# the database stopped under a running daemon: the log goes on, the witness
# says it is behind (status, /metrics) and catches up when it is back, and
# a reservation is refused within the deadline.
. "$(dirname "$0")/isolate.sh"
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pg.sh"

require_root
for t in jq curl sqlite3; do
	command -v "$t" >/dev/null || { echo "not ok - $t missing"; exit 1; }
done

T=$E2E_TMP
# Run last: the hosts' sandboxes outlive a stopped daemon by design, and
# their cgroups live in the machine's cgroup tree, not in a namespace here.
cleanup_push 'cat "$T"/*/sluiced.log 2>/dev/null | sluice_cgroups_sweep'
if ! pg_start 2>"$T/pg.err"; then
	echo "not ok - the throwaway PostgreSQL cluster starts"
	sed 's/^/#   /' "$T/pg.err" | head -n 20
	exit 1
fi
ok "the throwaway PostgreSQL cluster starts (Unix socket only)"
OWNER_CI=$(pg_conninfo sluice_owner "$PG_DB")
HOST_CI=$(pg_conninfo sluice_host "$PG_DB")
owner_sql() { pg_as sluice_owner "$PG_OWNER_PASS" "$PG_DB" "$1"; }
host_sql() { pg_as sluice_host "$PG_HOST_PASS" "$PG_DB" "$1"; }

# ------------------------------------------------------------- the hosts
# host_setup NAME: its directories, key, policy and config.
host_setup() {
	local h=$1 d=$T/$1
	mkdir -p "$d/pol" "$d/state"
	printf 'version: 1\nname: minimal\n' >"$d/pol/minimal.yaml"
	"$SLUICE" audit keygen --origin "fleet.e2e$$.example/$h" \
	    --out "$d/audit.key" >"$d/vkey.out" 2>&1 || return 1
	grep -o "^fleet.e2e$$.example/$h+[0-9a-f]*+[A-Za-z0-9+/=]*" \
	    "$d/vkey.out" | head -n 1 >"$d/vkey"
	(umask 077; printf '%s\n' "$PG_HOST_PASS" >"$d/pg.pw")
	host_config "$h" "$HOST_CI" "password_file: $d/pg.pw"
}
# host_config NAME CONNINFO EXTRA: the config, with EXTRA in fleet:.
host_config() {
	local h=$1 d=$T/$1
	cat >"$d/sluice.yaml" <<EOF
version: 1
state_dir: $d/state
run_dir: $d/run
socket: $d/run/sluice.sock
policy_dir: $d/pol
dns:
  upstreams:
    - 192.0.2.53
audit:
  db: $d/state/audit.db
  key: $d/audit.key
  origin: fleet.e2e$$.example/$h
fleet:
  postgresql: "$2"
  host: $h
  deadline_ms: 2000
  $3
EOF
}
sl() { "$SLUICE" -s "$T/$1/run/sluice.sock" "${@:2}"; }
alive() { sl "$1" status >/dev/null 2>&1; }
metric() {
	curl -s --max-time 30 --unix-socket "$T/$1/run/sluice.sock" \
	    http://localhost/metrics | awk -v k="$2" '$1 == k { print $2 }'
}
# start NAME: sluiced in a namespace of its own; 0 once it answers.
start() {
	local h=$1
	unshare --net --mount --propagation private bash -c '
		mount -t tmpfs tmpfs /run/netns && mount -t tmpfs tmpfs /etc/netns &&
		ip link set lo up && exec "$0" --config "$1" --foreground' \
	    "$SLUICED" "$T/$h/sluice.yaml" >>"$T/$h/sluiced.log" 2>&1 &
	eval "PID_$h=$!"
	cleanup_push "kill -KILL $!"
	wait_for 60 alive "$h"
}
stop() {
	local p
	p=$(eval echo "\$PID_$1")
	kill -TERM "$p" 2>/dev/null
	wait_for 60 sh -c "! kill -0 $p 2>/dev/null"
}
# refused NAME: sluiced --config exits non-zero within the deadline and
# prints to stderr (into $T/NAME/refused.err).
refused() {
	timeout 60 unshare --net --mount --propagation private bash -c '
		mount -t tmpfs tmpfs /run/netns && mount -t tmpfs tmpfs /etc/netns &&
		ip link set lo up && exec "$0" --config "$1" --foreground' \
	    "$SLUICED" "$T/$1/sluice.yaml" >"$T/$1/refused.err" 2>&1
	local rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]
}

host_setup alpha || { echo "not ok - host alpha set up"; exit 1; }
host_setup beta || { echo "not ok - host beta set up"; exit 1; }

# ------------------------------------------------- refusals at start
# Before the schema exists: the daemons' role may not make it.
if refused alpha; then ok "without the schema the daemons' role is refused"; else
	not_ok "without the schema the daemons' role is refused"; fi
check_match "... and told to run sluice fleet migrate as the owner" \
    'this role may not migrate it .*sluice fleet migrate' "$(cat "$T/alpha/refused.err")"

out=$(SLUICE_PG_PASSWORD=$PG_OWNER_PASS "$SLUICE" fleet migrate "$OWNER_CI" 2>&1)
check_eq "sluice fleet migrate as the owner makes the schema" \
    "fleet schema at version 3" "$out"
out=$(SLUICE_PG_PASSWORD=$PG_OWNER_PASS "$SLUICE" fleet migrate "$OWNER_CI" 2>&1)
check_eq "a second migrate finds nothing to do" "fleet schema at version 3" "$out"
check_eq "schema_version holds the history of the migrations" "1 2 3" \
    "$(owner_sql "SELECT version FROM schema_version ORDER BY version" | paste -sd' ')"
# The GRANTs of README "Running a fleet".
owner_sql "GRANT SELECT ON schema_version TO sluice_host;
GRANT SELECT, INSERT ON checkpoints TO sluice_host;
GRANT SELECT, INSERT, UPDATE ON budgets TO sluice_host;
GRANT SELECT, INSERT, UPDATE ON approvals TO sluice_host;" ||
	not_ok "the owner grants the daemons' role"

host_config alpha "host=$T/nowhere port=$PG_PORT user=sluice_host dbname=$PG_DB" \
    "password_file: $T/alpha/pg.pw"
if refused alpha; then ok "a conninfo that reaches no server: refused"; else
	not_ok "a conninfo that reaches no server: refused"; fi
check_match "... naming what it tried and why" \
    "fleet: cannot connect to PostgreSQL \(.*host=$T/nowhere.*\): .*No such file or directory" \
    "$(cat "$T/alpha/refused.err")"

host_config alpha "$HOST_CI" "password_file: $T/alpha/wrong.pw"
(umask 077; echo "not-the-password" >"$T/alpha/wrong.pw")
if refused alpha; then ok "a wrong password: refused"; else
	not_ok "a wrong password: refused"; fi
check_match "... as the server says it" \
    'fleet: cannot connect.*password authentication failed for user "sluice_host"' \
    "$(cat "$T/alpha/refused.err")"
check "... and the password is in no message" \
    sh -c "! grep -q not-the-password '$T/alpha/refused.err'"

chmod 0644 "$T/alpha/wrong.pw"
if refused alpha; then ok "a password file others may read: refused"; else
	not_ok "a password file others may read: refused"; fi
check_match "... saying how to fix it" 'chmod 0600' "$(cat "$T/alpha/refused.err")"

host_config alpha "$HOST_CI password=$PG_HOST_PASS" ""
if refused alpha; then ok "a password inside the conninfo: refused"; else
	not_ok "a password inside the conninfo: refused"; fi
check_match "... by the config loader, FILE:LINE:COL" \
    "sluice.yaml:[0-9]+:[0-9]+: fleet.postgresql must not hold a password" \
    "$(cat "$T/alpha/refused.err")"
check "... which does not echo it" \
    sh -c "! grep -qF '$PG_HOST_PASS' '$T/alpha/refused.err'"

owner_sql "INSERT INTO schema_version (version) VALUES (99)"
host_config alpha "$HOST_CI" ""
if SLUICE_PG_PASSWORD=$PG_HOST_PASS refused alpha; then
	ok "a schema from a newer sluiced: refused"
else
	not_ok "a schema from a newer sluiced: refused"
fi
check_match "... with both versions named" \
    'schema is at version 99, newer than this sluiced knows \(3\)' \
    "$(cat "$T/alpha/refused.err")"
out=$(SLUICE_PG_PASSWORD=$PG_OWNER_PASS "$SLUICE" fleet migrate "$OWNER_CI" 2>&1)
check_match "... and migrate will not touch it either" 'version 99, newer' "$out"
owner_sql "DELETE FROM schema_version WHERE version = 99"
host_config alpha "$HOST_CI" "password_file: $T/alpha/pg.pw"

# ------------------------------------------------------ the witness
if start alpha && start beta; then
	ok "two sluiced hosts start against the shared database"
else
	not_ok "two sluiced hosts start against the shared database"
	for h in alpha beta; do sed "s/^/#   $h: /" "$T/$h/sluiced.log" | tail -n 20; done
	finish
fi
check_eq "status names the fleet host" "alpha" \
    "$(sl alpha status --json | jq -r .fleet.host)"

# A checkpoint is signed after a commit at most once a second: each poll
# commits a record (a reload), so that one comes.
reload_quiet() { sl "$1" reload >/dev/null 2>&1; }
witnessed() { host_sql "SELECT coalesce(max(size), 0) FROM checkpoints WHERE host = '$1'"; }
local_size() { sqlite3 "file:$T/$1/state/audit.db?mode=ro" "SELECT coalesce(max(size), 0) FROM checkpoints"; }
caught_up() { [ "$(local_size "$1")" -gt 0 ] && [ "$(witnessed "$1")" -ge "$(local_size "$1")" ]; }
# caught_up_live HOST: the same while the host keeps signing: what was
# signed when we asked is witnessed.
caught_up_live() {
	local want
	reload_quiet "$1"
	want=$(local_size "$1")
	[ "$want" -gt 0 ] && wait_for 10 test "$(witnessed "$1")" -ge "$want"
}
# signed_past HOST N: the host's log has signed a checkpoint past N.
signed_past() { reload_quiet "$1"; [ "$(local_size "$1")" -ge "$2" ]; }
for h in alpha beta; do
	wait_for 60 signed_past "$h" 8 || not_ok "$h signs checkpoints"
	if wait_for 60 caught_up_live "$h"; then
		ok "$h: its signed checkpoints reach the witness"
	else
		not_ok "$h: its signed checkpoints reach the witness (local $(local_size "$h"), witnessed $(witnessed "$h"))"
	fi
done
check_eq "the witness rows carry the host's signature line" 0 \
    "$(host_sql "SELECT count(*) FROM checkpoints WHERE signature NOT LIKE '— fleet.e2e$$.example/' || host || ' %'")"
check_eq "... and the root of the note" 0 \
    "$(host_sql "SELECT count(*) FROM checkpoints WHERE position(encode(root, 'base64') IN note) = 0")"
check_eq "/metrics: nothing pending" 0 "$(metric alpha sluice_fleet_witness_pending)"
check_eq "/metrics: the witness is up" 1 "$(metric alpha sluice_fleet_witness_up)"

# Append-only, for the role the hosts have and for the owner.
out=$(host_sql "UPDATE checkpoints SET size = size + 1000 WHERE host = 'alpha'" 2>&1)
check_match "UPDATE by the daemons' role is refused" 'permission denied for table checkpoints' "$out"
out=$(host_sql "DELETE FROM checkpoints WHERE host = 'alpha'" 2>&1)
check_match "DELETE by the daemons' role is refused" 'permission denied for table checkpoints' "$out"
out=$(owner_sql "UPDATE checkpoints SET note = 'x' WHERE host = 'alpha'" 2>&1)
check_match "UPDATE by the owner is refused by the trigger" 'checkpoints is append-only: UPDATE refused' "$out"
out=$(owner_sql "TRUNCATE checkpoints" 2>&1)
check_match "TRUNCATE by the owner is refused by the trigger" 'checkpoints is append-only: TRUNCATE refused' "$out"

# verify HOST DB [ARGS]: audit verify against the witness, JSON in $T/v.json.
verify() {
	SLUICE_PG_PASSWORD=$PG_HOST_PASS "$SLUICE" audit verify --db "$2" \
	    --key "$(cat "$T/$1/vkey")" --witness "$HOST_CI" --host "$1" --json \
	    >"$T/v.json" 2>"$T/v.err"
}
for h in alpha beta; do
	verify "$h" "$T/$h/state/audit.db"; rc=$?
	if [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; then ok "$h: verify --witness passes (exit $rc)"; else
		not_ok "$h: verify --witness passes (exit $rc)"; sed 's/^/#   /' "$T/v.err" "$T/v.json" | head; fi
	check_eq "$h: assurance external" external "$(jq -r .assurance "$T/v.json")"
done
SLUICE_PG_PASSWORD=$PG_HOST_PASS "$SLUICE" audit verify --db "$T/alpha/state/audit.db" \
    --key "$(cat "$T/alpha/vkey")" --witness "$HOST_CI" --host beta >/dev/null 2>&1
check_eq "alpha's log against beta's witness rows: an error, no verdict" 2 "$?"

# Tampering on copies of the log, the triggers dropped first, as someone
# with root on the host would.
tamper() {	# tamper HOST NAME SQL
	sqlite3 "$T/$1/state/audit.db" ".backup '$T/$2.db'"
	sqlite3 "$T/$2.db" "DROP TRIGGER rec_no_upd; DROP TRIGGER rec_no_del;
	    DROP TRIGGER mn_no_upd; DROP TRIGGER mn_no_del;
	    DROP TRIGGER ck_no_upd; DROP TRIGGER ck_no_del; $3"
}
stop alpha
check "a clean stop sends the final checkpoint to the witness too" caught_up alpha
N=$(sqlite3 "$T/alpha/state/audit.db" "SELECT count(*) FROM records")
W=$(witnessed alpha)
K=$((W - 3))
tamper alpha cut "DELETE FROM records WHERE seq >= $K;
    DELETE FROM merkle_nodes WHERE ((idx + 1) << level) > $K;
    DELETE FROM checkpoints WHERE size > $K;"
verify alpha "$T/cut.db"; rc=$?
check_eq "a cut log tail: verify --witness exits 1" 1 "$rc"
check_eq "... reporting TRUNCATION" TRUNCATION "$(jq -r .first_failure.check "$T/v.json")"
check_eq "... and how many records are missing" 3 "$(jq -r .missing "$T/v.json")"
check_eq "... at assurance none" none "$(jq -r .assurance "$T/v.json")"

# A rewritten history, re-signed with the host's own key: the edited
# record's hash and every tree node and checkpoint after it rebuilt is
# what sluice would do; the cheapest faithful rewrite is a log made anew
# under the same origin and key, with other records.
mkdir -p "$T/forge/pol" "$T/forge/state"
printf 'version: 1\nname: other\n' >"$T/forge/pol/other.yaml"
sed -e "s#$T/alpha/state#$T/forge/state#g; s#$T/alpha/pol#$T/forge/pol#g; s#$T/alpha/run#$T/forge/run#g" \
    -e '/^fleet:/,$d' "$T/alpha/sluice.yaml" >"$T/forge/sluice.yaml"
start forge || not_ok "a forger's daemon starts"
# Longer than what the witness holds, so that the roots are compared.
for ((i = 0; i < W + 5; i++)); do
	sl forge reload >/dev/null || { grep -A40 "ERROR: AddressSanitizer" "$T/forge/sluiced.log" | sed 's/^/#   forge: /' | head -n 60; break; }
done
stop forge
verify alpha "$T/forge/state/audit.db"; rc=$?
check_eq "a re-signed history: verify --witness exits 1" 1 "$rc"
check_eq "... reporting FORK against the witness" FORK \
    "$(jq -r .first_failure.check "$T/v.json")"

# ------------------------------------------------ shared budgets
# The reservation hosts make (gateway/fleet/budget.c), from a small client that
# makes one per process: 50 at once, half for each host's name, against
# one subject budget of 10.
RESERVE=$T/fleet_reserve
if ! cc -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -I"$TOP" \
    $(pkg-config --cflags libpq) -o "$RESERVE" "$E2E_DIR/tools/fleet_reserve.c" \
    "$TOP/gateway/fleet/pg.c" "$TOP/gateway/fleet/budget.c" $(pkg-config --libs libpq) 2>"$T/cc.err"; then
	not_ok "tools/fleet_reserve.c compiles"; sed 's/^/#   /' "$T/cc.err" | head
fi
reserve() { SLUICE_PG_PASSWORD=$PG_HOST_PASS "$RESERVE" "$HOST_CI" reserve "$@"; }
pids=()
for i in $(seq 1 50); do
	reserve alice calls 10 >"$T/r.$i" 2>&1 &
	pids+=($!)
done
# Only these: the daemons are children of this shell too.
wait "${pids[@]}"
check_eq "50 concurrent reservations against a budget of 10: exactly 10 reserved" 10 \
    "$(cat "$T"/r.* | grep -c '^reserved')"
check_eq "... and 40 refused as used up" 40 "$(cat "$T"/r.* | grep -c '^exhausted')"
cat "$T"/r.* | grep -v '^reserved\|^exhausted' | sed 's/^/#   /' | head -n 5
check_eq "... each of the 10 saw a different count before it" "0 1 2 3 4 5 6 7 8 9" \
    "$(cat "$T"/r.* | awk '$1 == "reserved" { print $2 }' | sort -n | paste -sd' ')"
check_eq "the row holds 10 calls" 10 \
    "$(host_sql "SELECT calls FROM budgets WHERE owner = 'alice' AND name = 'calls'")"
out=$(reserve bob calls 10)
check_match "another subject has a budget of its own" '^reserved 0 ' "$out"
pg_stop && pg_resume
check_eq "the budget survives a restart of the database" exhausted "$(reserve alice calls 10)"
# A released reservation gives its call back, in its window.
out=$(reserve carol hourly 2 3600)
check_match "a windowed budget reserves" '^reserved 0 [0-9]+$' "$out"
wat=${out##* }
check_eq "... in the window aligned on its length" $(( $(date +%s) / 3600 * 3600 )) "$wat"
check_match "... a second call" '^reserved 1 ' "$(reserve carol hourly 2 3600)"
check_eq "... a third is over" exhausted "$(reserve carol hourly 2 3600)"
SLUICE_PG_PASSWORD=$PG_HOST_PASS "$RESERVE" "$HOST_CI" release carol hourly 3600 "$wat"
check_match "... one released, one more fits" '^reserved 1 ' "$(reserve carol hourly 2 3600)"
# A row from an older window (as the window turns) starts afresh; one
# from a newer window (a host whose clock is behind) is not reset.
owner_sql "UPDATE budgets SET window_start = window_start - 3600 WHERE owner = 'carol'" >/dev/null
check_match "a row of the previous window starts the new one afresh" '^reserved 0 ' \
    "$(reserve carol hourly 2 3600)"
owner_sql "UPDATE budgets SET window_start = window_start + 3600, calls = 2 WHERE owner = 'carol'" >/dev/null
check_eq "a row of a newer window is not reset by a host behind" exhausted \
    "$(reserve carol hourly 2 3600)"

# ------------------------------------------ the database goes away
start alpha || not_ok "alpha restarts"
up() { [ "$(metric alpha sluice_fleet_witness_up)" = 1 ]; }
wait_for 30 up || not_ok "alpha's witness is up after its restart"
pg_stop
before=$(local_size alpha)
grown() { reload_quiet alpha; [ "$(local_size alpha)" -gt "$before" ]; }
check "with the database down the log still signs checkpoints" wait_for 30 grown
check "... and the daemon serves" alive alpha
t0=$(date +%s)
out=$(reserve alice calls 10); rc=$?
check_eq "a shared reservation with the database down: unavailable (denied)" 3 "$rc"
check "... within the deadline" test $(( $(date +%s) - t0 )) -le 5
behind() { reload_quiet alpha; [ "$(metric alpha sluice_fleet_witness_pending)" -ge 1 ]; }
check "/metrics: the witness is behind" wait_for 30 behind
check_eq "/metrics: the witness is down" 0 "$(metric alpha sluice_fleet_witness_up)"
check_eq "status: the fleet is down" false "$(sl alpha status --json | jq -r .fleet.up)"
check_match "status: with the reason" 'connect|insert' \
    "$(sl alpha status --json | jq -r .fleet.witness.last_error)"
check_match "sluice status says so in words" \
    'fleet: host alpha, database DOWN.*witness: [1-9][0-9]* checkpoints pending' \
    "$(sl alpha status | tr '\n' ' ')"
pg_resume || not_ok "the database comes back"
check "the witness catches up when it is back" wait_for 90 caught_up_live alpha
check "/metrics: a reconnect was counted" \
    test "$(metric alpha sluice_fleet_witness_reconnects_total)" -ge 1
# Backoff: from 200 ms doubling to 30 s, so an outage of a few seconds is
# a handful of attempts, never a busy loop.
check "... after a handful of attempts, with backoff" \
    test "$(metric alpha sluice_fleet_witness_failures_total)" -le 20
verify alpha "$T/alpha/state/audit.db"; rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; then ok "after the outage verify --witness passes (exit $rc)"; else
	not_ok "after the outage verify --witness passes (exit $rc)"; fi
stop alpha
stop beta

# ------------------------------------ shared budgets through the bridge
# Both hosts serve the same stdio MCP server (each its own process; every
# tools/call it gets is a line of the one calls.log) under a policy whose
# subject budget of 10 calls the fleet shares. The sandboxes of one
# subject, one on each host, call at once; the upstream side counts.
FLAGS=$T/mcp
mkdir -p "$FLAGS"
chmod 0777 "$FLAGS"
: >"$FLAGS/calls.log"
chmod 0666 "$FLAGS/calls.log"
NODE=$(command -v node)
for h in alpha beta; do
	cat >"$T/$h/pol/fb.yaml" <<-'P'
	version: 1
	name: fb
	mcp:
	  budgets:
	    - name: fleetcalls
	      scope: subject
	      calls: 10
	  tools:
	    - tool: drift/stable
	      decision: allow
	      budgets: [fleetcalls]
	      args:
	        note: {type: string}
	    - tool: drift/shifty
	      decision: allow
	      args:
	        note: {type: string}
	P
	# Calls of shifty wait for a person (the fleet's approval queue).
	cat >"$T/$h/pol/fa.yaml" <<-'P'
	version: 1
	name: fa
	mcp:
	  approval_timeout: 10m
	  tools:
	    - tool: drift/shifty
	      decision: ask
	      args:
	        note: {type: string}
	P
	cat >>"$T/$h/sluice.yaml" <<-EOF
	servers:
	  - name: drift
	    transport: stdio
	    command: [$NODE, $E2E_DIR/servers/drift_server.mjs, $FLAGS]
	EOF
done
if start alpha && start beta; then ok "both hosts start with the MCP server"; else
	not_ok "both hosts start with the MCP server"
	for h in alpha beta; do sed "s/^/#   $h: /" "$T/$h/sluiced.log" | tail -n 20; done
	finish
fi
URL=http://10.231.255.254:8080/mcp/drift
H_ACC='Accept: application/json, text/event-stream'
H_JSON='Content-Type: application/json'
H_VER='MCP-Protocol-Version: 2025-06-18'
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
# in_sb HOST ID CMD...: CMD in sandbox ID of HOST (its namespaces are
# under the daemon's own /run/netns).
in_sb() {
	local p
	p=$(eval echo "\$PID_$1")
	nsenter -t "$p" -m -- nsenter --net="/run/netns/sluice-$2" -- "${@:3}"
}
# sandbox HOST ID SUBJECT [POLICY]: a sandbox of POLICY (fb); its token
# in $T/tok.ID.
sandbox() {
	sl "$1" sandbox create --policy "${4:-fb}" --subject "$3" --id "$2" |
	    jq -r .token >"$T/tok.$2"
	[[ $(cat "$T/tok.$2") =~ ^[0-9a-f]{64}$ ]]
}
# session HOST ID: an initialized session; its id in $T/sid.ID.
session() {
	in_sb "$1" "$2" curl -s -m 20 -D "$T/hdr.$2" -o /dev/null -X POST \
	    -H "Authorization: Bearer $(cat "$T/tok.$2")" -H "$H_ACC" -H "$H_JSON" \
	    --data "$INIT" "$URL" || return 1
	awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' "$T/hdr.$2" |
	    tr -d '\r' >"$T/sid.$2"
	[ -s "$T/sid.$2" ] || return 1
	in_sb "$1" "$2" curl -s -m 20 -o /dev/null -X POST \
	    -H "Authorization: Bearer $(cat "$T/tok.$2")" -H "$H_ACC" -H "$H_JSON" \
	    -H "Mcp-Session-Id: $(cat "$T/sid.$2")" -H "$H_VER" \
	    --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$URL"
}
# mcall HOST ID TOOL: one tools/call; the answer on stdout.
mcall() {
	in_sb "$1" "$2" curl -s -m 30 -X POST \
	    -H "Authorization: Bearer $(cat "$T/tok.$2")" -H "$H_ACC" -H "$H_JSON" \
	    -H "Mcp-Session-Id: $(cat "$T/sid.$2")" -H "$H_VER" \
	    --data "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"$3\",\"arguments\":{\"note\":\"x\"}}}" \
	    "$URL"
}
# burst HOST ID N: N calls of stable at once, answers in $T/ans.ID.*
burst() {
	seq 1 "$3" | in_sb "$1" "$2" xargs -P "$3" -I@ curl -s -m 60 -o "$T/ans.$2.@" \
	    -X POST -H "Authorization: Bearer $(cat "$T/tok.$2")" -H "$H_ACC" -H "$H_JSON" \
	    -H "Mcp-Session-Id: $(cat "$T/sid.$2")" -H "$H_VER" \
	    --data '{"jsonrpc":"2.0","id":@,"method":"tools/call","params":{"name":"stable","arguments":{"note":"x"}}}' \
	    "$URL"
}
upstream_calls() { grep -c '^stable$' "$FLAGS/calls.log"; }
# audited HOST TOOL REASON: mcp.call records of TOOL with REASON on HOST.
audited() {
	"$SLUICE" audit tail --db "$T/$1/state/audit.db" --kind mcp.call 2>/dev/null |
	    jq -s "[.[] | select(.tool == \"$2\" and .reason == \"$3\")] | length"
}
SA=fa$$
SB=fb$$
SE=fe$$
sessions() { session alpha "$SA" && session beta "$SB" && session beta "$SE"; }
if sandbox alpha "$SA" dora && sandbox beta "$SB" dora && sandbox beta "$SE" erin &&
    wait_for 30 sessions; then
	ok "a sandbox of subject dora on each host, with a session"
else
	not_ok "a sandbox of subject dora on each host, with a session"
	for h in alpha beta; do sed "s/^/#   $h: /" "$T/$h/sluiced.log" | tail -n 20; done
fi
burst alpha "$SA" 25 &
b1=$!
burst beta "$SB" 25 &
b2=$!
wait "$b1" "$b2"
check_eq "25 + 25 calls at once from two hosts, shared budget 10: 10 reach the upstream" \
    10 "$(upstream_calls)"
check_eq "... 10 are answered" 10 "$(grep -l 'note from stable' "$T"/ans.* 2>/dev/null | wc -l)"
check_eq "... 40 are refused as the budget used up" 40 \
    "$(grep -l 'fleetcalls.*used up' "$T"/ans.* 2>/dev/null | wc -l)"
check_eq "... and so recorded, on both hosts together" 40 \
    $(( $(audited alpha stable budget_exhausted) + $(audited beta stable budget_exhausted) ))
check_eq "the database holds 10 calls for dora" 10 \
    "$(host_sql "SELECT calls FROM budgets WHERE scope = 'subject' AND owner = 'dora' AND name = 'fleetcalls'")"
# The bridge tells the parent once a second.
sb_up() { [ "$(sl "$1" status --json | jq -r .mcp.shared_budgets.up)" = "$2" ]; }
check "status: the bridge's shared budgets are up" wait_for 10 sb_up alpha true

stop alpha
stop beta
if start alpha && start beta; then ok "both hosts restart"; else not_ok "both hosts restart"; fi
# The sandboxes' namespaces went with each daemon's own mount namespace:
# new sandboxes of the same subjects, which is what the budget counts.
SA=fa2$$
SB=fb2$$
SE=fe2$$
if sandbox alpha "$SA" dora && sandbox beta "$SB" dora && sandbox beta "$SE" erin &&
    wait_for 30 sessions; then
	ok "... with sandboxes of the same subjects and their sessions"
else
	not_ok "... with sandboxes of the same subjects and their sessions"
fi
check_match "after both restart: dora's budget is still used up (alpha)" 'used up' \
    "$(mcall alpha "$SA" stable)"
check_match "... and on beta" 'used up' "$(mcall beta "$SB" stable)"
check_eq "... nothing more reached the upstream" 10 "$(upstream_calls)"

pg_stop
out=$(mcall alpha "$SA" stable)
check_match "database down: a call under the shared budget is refused" \
    'shared by the fleet and could not be checked' "$out"
check_eq "... recorded as shared_state_unavailable" 1 \
    "$(audited alpha stable shared_state_unavailable)"
check_match "... a call under no budget still works" 'note from shifty' \
    "$(mcall alpha "$SA" shifty)"
check_match "... on the other host too" 'note from shifty' "$(mcall beta "$SE" shifty)"
check_eq "... nothing budgeted reached the upstream" 10 "$(upstream_calls)"
bdown() { [ "$(metric "$1" sluice_fleet_budgets_up)" = 0 ]; }
check "/metrics: sluice_fleet_budgets_up is 0" wait_for 10 bdown alpha
check "status: the bridge's shared budgets are down" wait_for 10 sb_up alpha false
# A bridge with no call meanwhile finds out by itself.
check "... also on the host that made no shared call" wait_for 20 bdown beta
pg_resume || not_ok "the database comes back"
bup() { [ "$(metric beta sluice_fleet_budgets_up)" = 1 ] && [ "$(metric beta sluice_fleet_budget_reconnects_total)" -ge 1 ]; }
check "the bridge reconnects on its own (sluice_fleet_budgets_up 1)" wait_for 60 bup
check_match "after recovery: another subject's call is answered" 'note from stable' \
    "$(mcall beta "$SE" stable)"
check_eq "... and reached the upstream" 11 "$(upstream_calls)"
check_match "... and dora's is refused as used up again" 'used up' "$(mcall alpha "$SA" stable)"

# ------------------------------------------------ one approval queue
# A call held on alpha, listed and decided from beta; every decision is
# one conditional UPDATE of the shared row, so two people deciding at
# once get one winner.
SQ=fq$$
session_q() { session alpha "$SQ"; }
if sandbox alpha "$SQ" hana fa && wait_for 30 session_q; then
	ok "a sandbox of the asking policy on alpha, with a session"
else
	not_ok "a sandbox of the asking policy on alpha, with a session"
fi
# pending HOST: the ids every host's pending calls have, as HOST lists them.
pending() { sl "$1" approvals --json | jq -r '.[].id' | paste -sd' '; }
listed() { [ -n "$(pending "$1")" ]; }
# held N: a call of shifty from SQ in the background, its answer in
# $T/held.N; 0 once beta lists it (its id in $T/id.N).
held() {
	local before
	before=$(pending beta)
	mcall alpha "$SQ" shifty >"$T/held.$1" 2>&1 &
	eval "HELD_$1=$!"
	newid() { [ -n "$(comm -13 <(tr ' ' '\n' <<<"$before" | sort) \
	    <(pending beta | tr ' ' '\n' | sort))" ]; }
	wait_for 30 newid || return 1
	comm -13 <(tr ' ' '\n' <<<"$before" | sort) \
	    <(pending beta | tr ' ' '\n' | sort) | head -n 1 >"$T/id.$1"
}
answered() { wait "$(eval echo "\$HELD_$1")"; }
row() { host_sql "SELECT $2 FROM approvals WHERE id = '$(cat "$T/id.$1")'"; }
if held 1; then ok "a call held on alpha is listed on beta"; else
	not_ok "a call held on alpha is listed on beta"
	sed 's/^/#   alpha: /' "$T/alpha/sluiced.log" | tail -n 20
fi
ID1=$(cat "$T/id.1")
check_eq "... as held by alpha" alpha \
    "$(sl beta approvals --json | jq -r ".[] | select(.id == \"$ID1\") | .host")"
check_match "... in the table sluice approvals prints, with the host" \
    "^HOST +ID .*alpha +$ID1 +$SQ +hana +drift/shifty" "$(sl beta approvals | tr '\n' ' ')"
check_match "... and alpha lists it too" "$ID1" "$(pending alpha)"
out=$(sl beta approve "$ID1" 2>&1); rc=$?
check_eq "beta's CLI approves it" 0 "$rc"
answered 1
check_match "... and the call on alpha completes" 'note from shifty' "$(cat "$T/held.1")"
check_eq "... its row says approved, by beta, taken by alpha" "approved|beta|taken" \
    "$(row 1 "decision || '|' || approver_host || '|' || closed")"
# calls_of HOST KIND JQ: records of KIND on HOST matching the jq filter.
recs() {
	"$SLUICE" audit tail --db "$T/$1/state/audit.db" --kind "$2" 2>/dev/null |
	    jq -s "[.[] | select($3)] | length"
}
check_eq "alpha's mcp.call record names the approver and beta" 1 \
    "$(recs alpha mcp.call ".tool == \"shifty\" and .approval == \"approved\" and .approver_host == \"beta\" and .approver_uid == 0")"
check_eq "beta records the decision as mcp.approval, held by alpha" 1 \
    "$(recs beta mcp.approval ".call_id == \"$ID1\" and .held_by == \"alpha\" and .approver_host == \"beta\" and .approval == \"approved\"")"
out=$(sl alpha deny "$ID1" 2>&1); rc=$?
check_eq "deciding it again, from alpha: nothing to decide (exit 1)" 1 "$rc"
check_match "... not found" 'no pending call' "$out"

if held 2; then ok "a second held call"; else not_ok "a second held call"; fi
out=$(sl alpha deny "$(cat "$T/id.2")" --reason "not today" 2>&1)
check_eq "the holding host denies its own call through the queue" 0 "$?"
answered 2
check_match "... the call is refused with the reason" 'declined this call: not today' \
    "$(cat "$T/held.2")"
check_eq "... its row says denied, by alpha, taken" "denied|alpha|taken" \
    "$(row 2 "decision || '|' || approver_host || '|' || closed")"

# Two people at once, one on each host.
if held 3; then ok "a third held call"; else not_ok "a third held call"; fi
ID3=$(cat "$T/id.3")
sl alpha approve "$ID3" >"$T/d.a" 2>&1 &
pa=$!
sl beta deny "$ID3" >"$T/d.b" 2>&1 &
pb=$!
wait "$pa"; ra=$?
wait "$pb"; rb=$?
check_eq "approve on alpha and deny on beta at once: exactly one wins" 1 \
    $(( (ra == 0) + (rb == 0) ))
answered 3
if [ "$ra" -eq 0 ]; then want='note from shifty'; else want='declined this call'; fi
check_match "... and the call goes the winner's way" "$want" "$(cat "$T/held.3")"

# The database down: a call that would wait cannot be posted, and is
# refused at once rather than wait where nobody could decide it.
pg_stop
out=$(mcall alpha "$SQ" shifty)
check_match "database down: a call that asks is refused" 'Approvals are unavailable' "$out"
check_eq "... recorded as shared_state_unavailable" 1 \
    "$(recs alpha mcp.call ".tool == \"shifty\" and .reason == \"shared_state_unavailable\"")"
out=$(sl beta approvals 2>&1); rc=$?
check_eq "... sluice approvals says it cannot list (exit 1)" 1 "$rc"
check_match "... naming the queue" "approval queue does not answer" "$out"
check_match "... a call under no budget still works on beta" 'note from shifty' \
    "$(mcall beta "$SE" shifty)"
pg_resume || not_ok "the database comes back"
aq_up() { [ "$(sl alpha status --json | jq -r .mcp.approval_queue.up)" = true ]; }
check "the approval queue reconnects on its own" wait_for 60 aq_up
check_match "sluice status says so in words" \
    'approval queue: database up, [0-9]+ posted, [0-9]+ decided here, [0-9]+ delivered here' \
    "$(sl alpha status | tr '\n' ' ')"
check_match "... and the shared budgets too" 'shared budgets: database up' \
    "$(sl alpha status | tr '\n' ' ')"

# A call still waiting when its host stops: its row is closed, so no
# other host lists it any more.
if held 4; then ok "a fourth held call"; else not_ok "a fourth held call"; fi
stop alpha
answered 4
check_eq "alpha stopped: the waiting call's row is closed as gone" "gone" "$(row 4 closed)"
check_eq "... and beta lists nothing" "" "$(pending beta)"

# lock_row OWNER: an open transaction (psql on fd 7, pid in lockpid) holds
# OWNER's fleetcalls row locked (an uncommitted insert of it) until
# `unlock_row`. 0 once the lock is held.
lock_row() {
	rm -f "$T/lock.in"
	mkfifo "$T/lock.in"
	: >"$T/lock.out"
	PGPASSWORD=$PG_HOST_PASS "$PG_BIN/psql" -X -q -At -h "$PG_SOCK" -p "$PG_PORT" \
	    -U sluice_host -d "$PG_DB" -f - <"$T/lock.in" >"$T/lock.out" 2>&1 &
	lockpid=$!
	exec 7>"$T/lock.in"
	echo "BEGIN; INSERT INTO budgets (scope, owner, name, window_s, window_start, calls, cost, result_bytes) VALUES ('subject', '$1', 'fleetcalls', 0, 0, 0, 0, 0); SELECT 'locked';" >&7
	wait_for 30 grep -q '^locked' "$T/lock.out"
}
unlock_row() {
	echo "COMMIT;" >&7
	exec 7>&-
	wait "$lockpid"
}
# lock_waits: how many statements of the daemons' role wait on a lock.
lock_waits() { pg_super_db "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND usename = 'sluice_host'"; }
calls_of() { host_sql "SELECT calls FROM budgets WHERE scope = 'subject' AND owner = '$1' AND name = 'fleetcalls'"; }

# ------------------------- a reservation past its deadline
# The reservation of a call waits on a row lock past the deadline (2 s):
# the call is refused shared_state_unavailable. The statement must not
# live on in the database: once the lock goes it would count a call that
# never ran. And the connection it was sent on must not stay busy with
# it: the next call is reserved and runs.
start alpha || not_ok "alpha restarts"
SH=fh$$
session_h() { session alpha "$SH"; }
if sandbox alpha "$SH" hana && wait_for 30 session_h; then ok "a sandbox of hana"; else
	not_ok "a sandbox of hana"; fi
lock_row hana || not_ok "hana's budget row is locked"
mcall alpha "$SH" stable >"$T/late.h" 2>&1
check_match "a reservation past the deadline: the call is refused" \
    'shared by the fleet and could not be checked' "$(cat "$T/late.h")"
# Each waiting statement of the daemons' role, until none is left; the
# database stops it within the deadline, whether or not the lock goes.
nolockwait() { [ "$(lock_waits)" -eq 0 ]; }
check "... and the database no longer runs its statement, the lock still held" \
    wait_for 30 nolockwait
unlock_row
check_eq "... so nothing is counted once the lock goes" 0 "$(calls_of hana)"
mcall alpha "$SH" stable >"$T/next.h" 2>&1
check_match "the next call of hana is reserved and runs" 'note from stable' \
    "$(cat "$T/next.h")"
check_eq "... and counted once" 1 "$(calls_of hana)"
stop alpha

# ------------------------- a reservation won while the bridge stops
# The reservation of a call is held back by a row lock (an uncommitted
# insert of the same budget row); alpha is told to stop while it waits,
# which ends the call unforwarded; then the lock goes and the
# reservation is won after all. Its call never went out, so it must be
# given back: the row ends with no call counted.
sed -i 's/deadline_ms: 2000/deadline_ms: 30000/' "$T/alpha/sluice.yaml"
start alpha || not_ok "alpha restarts (a long deadline)"
SG=fg$$
session_g() { session alpha "$SG"; }
if sandbox alpha "$SG" gina && wait_for 30 session_g; then ok "a sandbox of gina"; else
	not_ok "a sandbox of gina"; fi
lock_row gina || not_ok "the budget row is locked"
mcall alpha "$SG" stable >"$T/held.g" 2>&1 &
hg=$!
waiting() { [ "$(lock_waits)" -ge 1 ]; }
check "the call's reservation waits on the lock" wait_for 30 waiting
kill -TERM "$PID_alpha"
# The client's connection ends once the bridge has stopped the call;
# the bridge then waits for the reservation, which the lock holds.
wait "$hg"
unlock_row
check "alpha stops" wait_for 60 sh -c "! kill -0 $PID_alpha 2>/dev/null"
check_eq "a reservation won as the bridge stopped is given back" 0 "$(calls_of gina)"
check_eq "... and nothing of gina's reached the upstream" 12 "$(upstream_calls)"
stop beta
check "both stop cleanly" sh -c "! grep -q 'ERROR: AddressSanitizer\|runtime error' '$T/alpha/sluiced.log' '$T/beta/sluiced.log'"
finish
