# tests/bench/fleet.sh: the fleet section of `make bench`, sourced by
# run.sh (it uses run.sh's row, stats, note, bg_ns and the e2e world).
#
# What a fleet costs a budgeted tools/call: the same sandbox calls the same
# fast upstream under three rules that differ only in their budget, one
# the fleet shares (scope subject: reserved in PostgreSQL before the call
# goes out), one kept on the host (scope sandbox: SQLite), and none; in
# alternating order, so the machine's drift falls on every side alike.
# Then 16 sessions at once, shared against local, and the reservation
# statement alone in a loop (bench_fleet): one host, two hosts at once on
# one subject's row, and the same upsert in SQLite as the anchor. The
# throwaway cluster (tests/e2e/pg.sh) listens on a Unix socket only; fsync
# is turned on in it, so both stores are durable as they would be in use.

sec_fleet() {
	local W=$BENCH_WORK/fleet r x n=300 warm=30 ROUNDS=${FLEET_ROUNDS:-4} NODE B ID TOK
	local POL CFG D
	mkdir -p "$W"
	D=$W/r
	mkdir -p "$D"
	NODE=$(command -v node) || { not_yet "node missing"; return 0; }
	[ -x "$BIN/bench_fleet" ] || { not_yet "bench_fleet not built (libpq)"; return 0; }
	bench_world fleet || return 1
	# shellcheck disable=SC1091
	. "$top/tests/e2e/pg.sh"
	pg_start 2>"$W/pg.err" ||
	    { not_yet "no PostgreSQL cluster: $(tail -c 200 "$W/pg.err")"; return 0; }
	pg_super "ALTER SYSTEM SET fsync = on" >/dev/null &&
	    pg_super "SELECT pg_reload_conf()" >/dev/null ||
	    { note "fleet: fsync could not be turned on; rows not comparable"; return 1; }
	local OWNER_CI HOST_CI
	OWNER_CI=$(pg_conninfo sluice_owner "$PG_DB")
	HOST_CI=$(pg_conninfo sluice_host "$PG_DB")
	SLUICE_PG_PASSWORD=$PG_OWNER_PASS "$SLUICE" fleet migrate "$OWNER_CI" >"$W/migrate.log" 2>&1 ||
	    { note "fleet: migrate failed: $(tail -c 200 "$W/migrate.log")"; return 1; }
	pg_as sluice_owner "$PG_OWNER_PASS" "$PG_DB" "GRANT SELECT ON schema_version TO sluice_host;
GRANT SELECT, INSERT ON checkpoints TO sluice_host;
GRANT SELECT, INSERT, UPDATE ON budgets TO sluice_host;
GRANT SELECT, INSERT, UPDATE ON approvals TO sluice_host;" >/dev/null ||
	    { note "fleet: the GRANTs failed"; return 1; }
	(umask 077; printf '%s\n' "$PG_HOST_PASS" >"$W/pg.pw")
	cat >>"$CFG" <<-EOF
	fleet:
	  postgresql: "$HOST_CI"
	  host: bench
	  deadline_ms: 5000
	  password_file: $W/pg.pw
	servers:
	  - name: fs
	    transport: http
	    url: http://$WORLD_MCP:3103/mcp
	  - name: fl
	    transport: http
	    url: http://$WORLD_MCP:3103/mcp
	  - name: fn
	    transport: http
	    url: http://$WORLD_MCP:3103/mcp
	  - name: fa
	    transport: http
	    url: http://$WORLD_MCP:3103/mcp
	EOF
	cat >"$POL/fleetbench.yaml" <<-'EOF'
	version: 1
	name: fleetbench
	mcp:
	  budgets:
	    - name: shared
	      scope: subject
	      calls: 100000000
	    - name: local
	      scope: sandbox
	      calls: 100000000
	  tools:
	    - tool: fs/echo
	      decision: allow
	      budgets: [shared]
	      args:
	        message: {type: string, max_length: 40}
	    - tool: fl/echo
	      decision: allow
	      budgets: [local]
	      args:
	        message: {type: string, max_length: 40}
	    - tool: fn/echo
	      decision: allow
	      args:
	        message: {type: string, max_length: 40}
	    - tool: fa/echo
	      decision: ask
	      args:
	        message: {type: string, max_length: 40}
	EOF
	bg_ns w-inet "$W/fast.log" "$NODE" "$top/tests/bench/fast_mcp.mjs" --http "$WORLD_MCP:3103"
	mcp_listens 3103 || { note "fleet: the fast upstream did not start"; return 1; }
	world_start_sluiced "$CFG" 2>"$W/start.err" ||
	    { note "fleet: sluiced did not start: $(tail -c 200 "$W/start.err")"; return 1; }
	ID=$BENCH_TAG-fl
	TOK=$(world_host "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy fleetbench \
	    --subject bench --id "$ID" 2>"$W/create.err" | jq -r .token)
	[[ $TOK =~ ^[0-9a-f]{64}$ ]] ||
	    { note "fleet: sandbox create failed: $(head -c 200 "$W/create.err")"; return 1; }
	B=$top/tests/bench/bench_mcp.mjs
	export E2E_NODE_MODULES=$top/tests/e2e/node_modules
	# fl_run SERVER OUT [ARGS]: bench_mcp.mjs from the sandbox against SERVER.
	fl_run() {
		world_sandbox "$ID" "$NODE" "$B" --url \
		    "http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/$1" --header \
		    "Authorization: Bearer $TOK" --secs 60 "${@:3}" >"$2" 2>"$2.err"
	}
	local order sm sp smin smax sn am ap amin amax an
	# 16 sessions at once: each holds a POST and an event stream, well
	# within the 96 connections a sandbox may hold to the bridge.
	local CS=16 CN=100 CW=5
	say "fleet: 2 rounds of $CS sessions x $CN tools/call at once, shared and local budget"
	for ((r = 0; r < 2; r++)); do
		if ((r % 2 == 0)); then order="fs fl"; else order="fl fs"; fi
		for x in $order; do
			fl_run "$x" "$D/c$x.$r" --n $CN --warm $CW --sessions $CS ||
			    { note "fleet: $CS sessions, $x failed: $(head -c 200 "$D/c$x.$r.err")"; continue 2; }
			awk '/^rate/ { print $2 }' "$D/c$x.$r" >>"$D/c$x.rate"
		done
		say "  round $r: calls/s shared $(tail -n 1 "$D/cfs.rate"), local $(tail -n 1 "$D/cfl.rate")"
	done
	if [ -s "$D/cfs.rate" ] && [ -s "$D/cfl.rate" ]; then
		read -r sm _ smin smax _ < <(stats "$D/cfs.rate")
		read -r am _ amin amax _ < <(stats "$D/cfl.rate")
		row fleet "budgeted tools/call per second, $CS sessions at once, shared budget in PostgreSQL" calls/s \
		    "$sm" "$smin" "$smax" "local budget (SQLite)" "$am" "$amin" "$amax" "(reported)" none -
	fi

	say "fleet: $ROUNDS rounds of $n sequential tools/call (after $warm untimed) per budget, order rotating"
	for ((r = 0; r < ROUNDS; r++)); do
		case $((r % 3)) in
		0) order="fs fl fn" ;; 1) order="fl fn fs" ;; *) order="fn fs fl" ;;
		esac
		for x in $order; do
			fl_run "$x" "$D/$x.$r" --n $n --warm $warm ||
			    { note "fleet: round $r, $x failed: $(head -c 200 "$D/$x.$r.err")"; continue 2; }
		done
		for x in fs fl fn; do
			grep -v '^rate' "$D/$x.$r" >"$D/$x.$r.lat"
			cat "$D/$x.$r.lat" >>"$D/$x.lat"
		done
		local ms ml mn
		ms=$(stats "$D/fs.$r.lat" | cut -d' ' -f1)
		ml=$(stats "$D/fl.$r.lat" | cut -d' ' -f1)
		mn=$(stats "$D/fn.$r.lat" | cut -d' ' -f1)
		awk -v a="$ms" -v b="$mn" 'BEGIN { printf "%.1f\n", a - b }' >>"$D/fs.added"
		awk -v a="$ml" -v b="$mn" 'BEGIN { printf "%.1f\n", a - b }' >>"$D/fl.added"
		say "  round $r: median µs shared $ms, local $ml, no budget $mn"
	done
	[ -s "$D/fs.added" ] || { note "fleet: no complete round"; return 1; }
	read -r sm sp smin smax sn < <(stats "$D/fs.lat")
	read -r am ap amin amax an < <(stats "$D/fl.lat")
	row fleet "budgeted tools/call latency, median, shared budget in PostgreSQL (n=$sn; local n=$an)" µs \
	    "$sm" "$smin" "$smax" "the same call, local budget (SQLite)" "$am" "$amin" "$amax" "(reported)" none -
	row fleet "budgeted tools/call latency, p99, shared budget in PostgreSQL" µs \
	    "$sp" - - "the same call, local budget (SQLite)" "$ap" - - "(reported)" none -
	read -r sm _ smin smax _ < <(stats "$D/fs.added")
	read -r am _ amin amax _ < <(stats "$D/fl.added")
	row fleet "tools/call added latency of the budget over no budget, median of $ROUNDS rounds, shared (PostgreSQL)" µs \
	    "$sm" "$smin" "$smax" "local budget (SQLite), added over no budget" "$am" "$amin" "$amax" "(reported)" none -
	local owned
	owned=$(pg_as sluice_host "$PG_HOST_PASS" "$PG_DB" \
	    "SELECT calls FROM budgets WHERE scope = 'subject' AND owner = 'bench' AND name = 'shared'")
	if [ "${owned:-0}" -lt $(( (n + warm) * ROUNDS / 2 )) ]; then
		note "fleet: the shared row holds ${owned:-no} calls: the shared side did not reserve in PostgreSQL"
		return 1
	fi
	say "  the shared budget's row counts $owned calls"

	# An approval made on another host: the row decided in the database
	# as that host's CLI would (with the NOTIFY), and the time from its
	# decision to this host's intent record for the call, which is made
	# when the call is released to go upstream.
	say "fleet: 5 approvals decided by another host, time to the call's release"
	local id dec ts
	: >"$D/rel.ms"
	for ((r = 0; r < 5; r++)); do
		fl_run fa "$D/a.$r" --n 1 --warm 0 &
		local ap=$!
		id=
		for ((i = 0; i < 100; i++)); do
			id=$(pg_as sluice_host "$PG_HOST_PASS" "$PG_DB" \
			    "SELECT id FROM approvals WHERE decision IS NULL AND closed_at IS NULL LIMIT 1")
			[ -n "$id" ] && break
			sleep 0.1
		done
		[ -n "$id" ] || { note "fleet: approval $r: no row appeared"; wait "$ap"; continue; }
		dec=$(pg_as sluice_host "$PG_HOST_PASS" "$PG_DB" "WITH d AS (UPDATE approvals SET
		    decision = 'approved', approver = 'bench', approver_uid = 0,
		    approver_host = 'other', decided_at = clock_timestamp()
		    WHERE id = '$id' RETURNING host, decided_at)
		    SELECT extract(epoch FROM decided_at), pg_notify('sluice_approvals', host) FROM d" | cut -d'|' -f1)
		wait "$ap" || { note "fleet: approval $r: the call failed: $(head -c 200 "$D/a.$r.err")"; continue; }
		ts=$(world_host "$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.intent 2>/dev/null |
		    jq -r 'select(.server == "fa" and .approver_host == "other") | .ts' | tail -n 1)
		[ -n "$ts" ] && [ -n "$dec" ] ||
		    { note "fleet: approval $r: no intent record or decision time"; continue; }
		awk -v t="$ts" -v d="$dec" 'BEGIN { printf "%.2f\n", t / 1e6 - d * 1000 }' >>"$D/rel.ms"
		say "  approval $r: released $(tail -n 1 "$D/rel.ms") ms after the decision"
	done
	if [ -s "$D/rel.ms" ]; then
		read -r sm _ smin smax sn < <(stats "$D/rel.ms")
		row fleet "a call approved on another host: its release (intent record) after the decision, median of $sn" ms \
		    "$sm" "$smin" "$smax" - - - - "≤ 100 ms" s_le 100
	fi

	# The reservation statement alone: one host, two hosts at once.
	local SECS=5 s1 s2
	say "fleet: reservations in a loop for $SECS s: SQLite, one host, two hosts on one row (3 rounds)"
	for ((r = 0; r < 3; r++)); do
		rm -f "$W/local.db" "$W/local.db-wal" "$W/local.db-shm"
		"$BIN/bench_fleet" --sqlite "$W/local.db" bench $SECS >"$D/q.$r" 2>"$D/q.err" ||
		    { note "fleet: the SQLite loop failed: $(head -c 200 "$D/q.err")"; continue; }
		SLUICE_PG_PASSWORD=$PG_HOST_PASS "$BIN/bench_fleet" "$HOST_CI" bench1 $SECS \
		    >"$D/one.$r" 2>"$D/one.err" ||
		    { note "fleet: the reservation loop failed: $(head -c 200 "$D/one.err")"; continue; }
		SLUICE_PG_PASSWORD=$PG_HOST_PASS "$BIN/bench_fleet" "$HOST_CI" bench2 $SECS \
		    >"$D/two_a.$r" 2>"$D/two.err" &
		s1=$!
		SLUICE_PG_PASSWORD=$PG_HOST_PASS "$BIN/bench_fleet" "$HOST_CI" bench2 $SECS \
		    >"$D/two_b.$r" 2>>"$D/two.err" &
		s2=$!
		wait "$s1" && wait "$s2" ||
		    { note "fleet: two loops at once failed: $(head -c 200 "$D/two.err")"; continue; }
		awk '/^rate/ { print $2 }' "$D/q.$r" >>"$D/q.rate"
		awk '/^rate/ { print $2 }' "$D/one.$r" >>"$D/one.rate"
		awk '/^rate/ { s += $2 } END { printf "%.1f\n", s }' "$D/two_a.$r" "$D/two_b.$r" >>"$D/two.rate"
		say "  round $r: reservations/s SQLite $(tail -n 1 "$D/q.rate"), one host $(tail -n 1 "$D/one.rate"), two hosts $(tail -n 1 "$D/two.rate")"
	done
	[ -s "$D/two.rate" ] || { note "fleet: no complete reservation round"; return 1; }
	read -r am _ amin amax _ < <(stats "$D/q.rate")
	read -r sm _ smin smax _ < <(stats "$D/one.rate")
	row fleet "shared reservations per second, one host (one connection, durable)" /s \
	    "$sm" "$smin" "$smax" "the same upsert in SQLite, WAL, synchronous=FULL" "$am" "$amin" "$amax" "(reported)" none -
	read -r sm _ smin smax _ < <(stats "$D/two.rate")
	row fleet "shared reservations per second, two hosts at once on one subject's row (sum)" /s \
	    "$sm" "$smin" "$smax" "the same upsert in SQLite, WAL, synchronous=FULL" "$am" "$amin" "$amax" "(reported)" none -
	return 0
}
