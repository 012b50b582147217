#!/bin/bash
# tests/bench/run.sh: `make bench`, Sluice measured against its anchors.
#
# One run on one machine, every comparison side by side in that run
# (these machines are noisy), medians of several repetitions with min/max,
# one table printed and written to tests/bench/RESULTS.md together with the
# machine and the exact command. Where a target is missed the table says so.
#
# The run is a list of independent sections. Each runs as a child of this
# script (`run.sh --section NAME`) under its own timeout, builds its own
# network namespaces (names start with the per-run tag $BENCH_TAG) and
# removes them on every exit path; the parent sweeps whatever a killed
# section left. A section whose subject does not exist yet prints
# "not yet: <why>"; later work adds sections (see README.md).
#
# Sections append result rows to $BENCH_WORK/rows.tsv (see row() below) and
# free-text lines to $BENCH_WORK/notes; the parent renders both at the end.
#
# Knobs (environment): BENCH_REPS (iperf3 pairs, default 5),
# BENCH_CPS_REPS (connection-rate pairs, 5), BENCH_AUDIT_REPS (3),
# BENCH_LC_ITERS (lifecycle iterations per side, 200), BENCH_IPERF_SECS (2,
# after a 1 s warm-up), BENCH_CPS_SECS (2), BENCH_ONLY (comma- or
# space-separated subset, e.g. dns,bridge; BENCH_SECTIONS is the same; a
# subset's table goes to BUILD/bench/RESULTS-subset.md, never to
# RESULTS.md), BENCH_BUDGET (seconds for all sections, 840), BENCH_BUILD
# (build directory with obj/, default build), BENCH_KEEP=1 keeps the work
# directory (logs, raw samples).
#
# Interrupted (Ctrl-C, TERM): the running section is stopped, its EXIT
# trap removes what it made, and the parent sweeps the run's tag; no
# RESULTS.md is written.
set -u
export LC_ALL=C

top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
SELF=$top/tests/bench/run.sh

export BENCH_TAG=${BENCH_TAG:-slb$$}
export BENCH_BUILD=${BENCH_BUILD:-build}
export BENCH_REPS=${BENCH_REPS:-5}
export BENCH_AUDIT_REPS=${BENCH_AUDIT_REPS:-3}
export BENCH_LC_ITERS=${BENCH_LC_ITERS:-200}
export BENCH_IPERF_SECS=${BENCH_IPERF_SECS:-2}
export BENCH_CPS_SECS=${BENCH_CPS_SECS:-2}
export BENCH_CPS_REPS=${BENCH_CPS_REPS:-5}
BIN=$top/$BENCH_BUILD/bench
# BENCH_ONLY=dns,bridge (or BENCH_SECTIONS="dns bridge"): a subset.
SECTIONS=${BENCH_ONLY:-${BENCH_SECTIONS:-"lifecycle datapath dns gate bridge audit memory srt limits fleet"}}
SECTIONS=${SECTIONS//,/ }
# Only a run of every section replaces tests/bench/RESULTS.md (the table
# the README is made from); a subset's table goes to the build directory.
if [ -n "${BENCH_ONLY:-}${BENCH_SECTIONS:-}" ]; then
	RESULTS=$top/$BENCH_BUILD/bench/RESULTS-subset.md
else
	RESULTS=$top/tests/bench/RESULTS.md
fi

# Per-section time limits (seconds), and a budget for all sections
# together (BENCH_BUDGET, 900 s): a section never gets more than what is
# left of it, so the whole `make bench` stays under 16 minutes on a 2-core
# machine even when every section runs into its limit (building the bench
# programs takes well under a minute). dns and bridge measure at 1 and at
# 1,000 sandboxes (making 999 takes up to 60 s).
declare -A LIMIT=([lifecycle]=170 [datapath]=400 [dns]=300 [gate]=150 [bridge]=400
    [srt]=150 [audit]=150 [memory]=85 [limits]=90 [fleet]=150)
BUDGET=${BENCH_BUDGET:-900}

say() { printf '%s\n' "$*"; }
note() { printf '%s\n' "$*" >>"$BENCH_WORK/notes"; say "  note: $*"; }
not_yet() { note "$SECTION: not yet: $*"; say "$SECTION: not yet: $*"; }

# row SECTION METRIC UNIT S_MED S_MIN S_MAX ANCHOR A_MED A_MIN A_MAX
#     TARGET_TEXT TARGET_KIND TARGET_VAL [RATIO RATIO_MIN RATIO_MAX]
# One line of the table. Empty values are "-". TARGET_KIND: s_le / s_ge
# (Sluice's median against TARGET_VAL), ratio_ge / ratio_le (the ratio
# against TARGET_VAL), none. The ratio is RATIO when given (paired runs:
# the median of the per-pair ratios), else Sluice's median divided by the
# anchor's.
row() {
	local IFS=$'\t'
	printf '%s\n' "$*" >>"$BENCH_WORK/rows.tsv"
}

# stats FILE: "median p99 min max n" of the numbers in FILE (one a line);
# median of an even count is the mean of the middle two, p99 the
# nearest-rank value. Prints "- - - - 0" for an empty file.
stats() {
	grep -E '^[0-9.eE+-]+$' "$1" 2>/dev/null | sort -g | awk '
	    { v[NR] = $1 }
	    END {
		if (NR == 0) { print "- - - - 0"; exit }
		med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		r = int(0.99 * NR); if (r < 0.99 * NR) r++; if (r < 1) r = 1
		printf "%.6g %.6g %.6g %.6g %d\n", med, v[r], v[1], v[NR], NR
	    }'
}

# ------------------------------------------------------------ cleanup

# Processes this run started in the background: "PID" lines in pids.
track() { echo "$1" >>"$BENCH_WORK/pids.$SECTION"; }

stop_tracked() {
	local f p i
	for f in "$BENCH_WORK"/pids.*; do
		[ -f "$f" ] || continue
		while read -r p; do
			[ -n "$p" ] || continue
			kill -TERM "$p" 2>/dev/null
		done <"$f"
		for ((i = 0; i < 20; i++)); do
			local alive=0
			while read -r p; do
				kill -0 "$p" 2>/dev/null && alive=1
			done <"$f"
			[ $alive -eq 0 ] && break
			sleep 0.1
		done
		while read -r p; do
			kill -KILL "$p" 2>/dev/null
			wait "$p" 2>/dev/null
		done <"$f"
		rm -f "$f"
	done
}

# kill_in_ns NAME: kill every process living in this run's namespace NAME
# (only ever one of ours: the name carries the per-run tag).
kill_in_ns() {
	local ino l i
	ino=$(stat -L -c %i "/run/netns/$1" 2>/dev/null) || return 0
	for i in 1 2 3; do
		l=$(find /proc/[0-9]*/ns/net -maxdepth 0 -lname "net:\[$ino\]" \
		    2>/dev/null | cut -d/ -f3)
		[ -z "$l" ] && return 0
		# shellcheck disable=SC2086
		kill -KILL $l 2>/dev/null
		sleep 0.1
	done
}

# sweep: remove everything carrying this run's tag. Safe to run twice.
sweep() {
	local n f
	stop_tracked
	for n in /run/netns/"$BENCH_TAG"-*; do
		[ -e "$n" ] || continue
		kill_in_ns "$(basename "$n")"
		ip netns del "$(basename "$n")" 2>/dev/null ||
		    { umount -l "$n" 2>/dev/null; rm -f "$n"; }
	done
	# Sandboxes sluiced made for the memory section (ids $BENCH_TAG-<n>):
	# one umount for all pins, as there may be a thousand.
	if compgen -G "/run/netns/sluice-$BENCH_TAG-*" >/dev/null; then
		umount -l /run/netns/sluice-"$BENCH_TAG"-* 2>/dev/null
		rm -f /run/netns/sluice-"$BENCH_TAG"-*
	fi
	rm -rf "/etc/netns/$BENCH_TAG"-* "/etc/netns/sluice-$BENCH_TAG"-* 2>/dev/null
	# Pins made by ns_create under the run's private directory.
	if [ -d "/run/$BENCH_TAG" ]; then
		for f in "/run/$BENCH_TAG"/netns/*; do
			[ -e "$f" ] || continue
			umount -l "$f" 2>/dev/null
			rm -f "$f"
		done
		umount -l "/run/$BENCH_TAG/netns" 2>/dev/null
		rm -rf "/run/$BENCH_TAG"
	fi
}

# ------------------------------------------------------------ helpers

# in_ns NAME CMD...: run CMD in this run's namespace $BENCH_TAG-NAME.
in_ns() {
	local n=$1; shift
	nsenter --net="/run/netns/$BENCH_TAG-$n" -- "$@"
}

# bg_ns NAME LOG CMD...: start CMD in $BENCH_TAG-NAME in the background,
# output to LOG, tracked for cleanup; BG_PID is its pid (nsenter execs CMD
# for a network namespace, so this is CMD itself, never a subshell).
bg_ns() {
	local n=$1 log=$2; shift 2
	nsenter --net="/run/netns/$BENCH_TAG-$n" -- "$@" >"$log" 2>&1 </dev/null &
	BG_PID=$!
	track $BG_PID
}

# wait_file SECS FILE: bounded wait for FILE to exist.
wait_file() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		[ -e "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# mass_create SOCK POLICY PREFIX FROM TO SECS OUT: sandboxes PREFIX<FROM>
# .. PREFIX<TO> (ids carry the run's tag, so sweep removes what is left)
# through sluiced's control API, in one curl process on one connection
# (no process start per sandbox: what is measured afterwards is the
# daemon), bounded by SECS. Prints the number of sandboxes the daemon
# holds afterwards (counted by `sluice status`, not from curl's output,
# which a time limit may cut); notes answers other than 201.
mass_create() {
	local sock=$1 pol=$2 pre=$3 from=$4 to=$5 secs=$6 out=$7 i n
	for ((i = from; i <= to; i++)); do
		printf 'url = "http://localhost/v1/sandboxes"\nunix-socket = "%s"\n' "$sock"
		printf 'request = "POST"\nheader = "Content-Type: application/json"\n'
		printf 'data = "{\\"id\\":\\"%s\\",\\"policy\\":\\"%s\\",\\"subject\\":\\"bench\\"}"\n' "$pre$i" "$pol"
		printf 'output = "/dev/null"\nwrite-out = "%%{http_code}\\n"\nmax-time = 10\n'
		((i < to)) && printf 'next\n'
	done >"$out.curl"
	timeout "$secs" curl -s -K "$out.curl" >"$out.codes" 2>"$out.err"
	grep -v '^201$' "$out.codes" | sort | uniq -c | head -n 3 |
	    while read -r c code; do note "$SECTION: $c creates answered $code" >&2; done
	n=$("$top/$BENCH_BUILD/sluice" -s "$sock" status --json 2>/dev/null |
	    jq -r '.sandboxes // empty')
	[[ $n =~ ^[0-9]+$ ]] || { note "$SECTION: could not read the sandbox count from sluice status" >&2; n=0; }
	echo "$n"
}

# at_1_and_1000 NAME POLICY ROUNDS OUT: growth for the
# dns and bridge sections. Runs "ROUNDS 1 '1 sandbox'", adds 999 idle
# sandboxes of POLICY through the control API (files OUT.*), then runs
# "ROUNDS 1k LABEL" at the scale reached, labelled so: a row never claims
# 1,000 it did not have. 1 when a round fails.
at_1_and_1000() {
	local name=$1 pol=$2 rounds=$3 out=$4 got
	"$rounds" 1 "1 sandbox" || return 1
	got=$(mass_create "$WORLD_SOCK" "$pol" "$BENCH_TAG-n" 1 999 75 "$out")
	say "$name: $((got)) sandboxes now (1 measured + idle)"
	if ((got >= 1000)); then
		"$rounds" 1k "1,000 sandboxes" || return 1
	elif ((got > 1)); then
		note "$name: only $got sandboxes were created within 75 s; the growth rows are at $got, not 1,000"
		"$rounds" 1k "$got sandboxes (1,000 not reached)" || return 1
	else
		note "$name: no idle sandboxes could be created; no growth rows"
	fi
}

# world_fast_down: before the e2e world's own cleanup, remove the
# sandboxes sluiced made in it in a few commands, not a few per sandbox
# (with 1,000 of them the world's per-namespace teardown would outlast the
# section's time limit): stop sluiced, unpin every tagged sandbox
# namespace at once, delete the sandbox links in one `ip -batch`.
world_fast_down() {
	[ -n "${WORLD_HOST_NS:-}" ] && [ -e "/run/netns/$WORLD_HOST_NS" ] || return 0
	world_stop_sluiced >/dev/null 2>&1
	if compgen -G "/run/netns/sluice-$BENCH_TAG-*" >/dev/null; then
		umount -l /run/netns/sluice-"$BENCH_TAG"-* 2>/dev/null
		rm -f /run/netns/sluice-"$BENCH_TAG"-*
	fi
	rm -rf /etc/netns/sluice-"$BENCH_TAG"-* 2>/dev/null
	ip -n "$WORLD_HOST_NS" -o link show 2>/dev/null |
	    awk -F': ' '{ print $2 }' | cut -d@ -f1 | grep '^sl-' |
	    sed 's/^/link del /' | ip -n "$WORLD_HOST_NS" -force -batch - 2>/dev/null
	return 0
}

# ms US: microseconds to milliseconds ("-" stays "-").
ms() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else printf "%.3f", v / 1000 }'; }

fmt_secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# ==================================================== section: lifecycle

# shell_round N ETCDIR SECS: the anchor, run inside the lifecycle
# namespace: up to N sandboxes (none started after SECS seconds) made and
# removed the usual shell way, one `ip`/`nft` command at a time, equivalent
# to ns_create + fw_sandbox_add. Prints "create_us delete_us" per
# iteration, like bench_lifecycle.
shell_round() {
	local n=$1 etc=$2 end=$((SECONDS + $3)) i t0 t1 t2 ns=$BENCH_TAG-sh h=sl-sh rules
	rules=$BENCH_WORK/shell-sandbox.nft
	cat >"$rules" <<-EOF
	table inet shsb {
		quota q { over 4000000 mbytes }
		chain forward {
			type filter hook forward priority filter; policy accept;
			iifname != "$h" oifname != "$h" return
			oifname "$h" ct state established,related accept
			oifname "$h" drop
			iifname "$h" quota name "q" drop
			iifname "$h" ip saddr != 10.231.0.2 drop
			ct state established,related accept
			ip daddr 198.51.100.66 reject with icmpx admin-prohibited
			ip daddr 192.0.2.0/24 tcp dport 443 accept
			ip daddr 198.51.100.0/24 tcp dport 80-443 accept
			ip daddr 192.0.2.123 udp dport 123 accept
			meta l4proto tcp reject with tcp reset
			reject with icmpx admin-prohibited
		}
	}
	EOF
	for ((i = 0; i < n && SECONDS < end; i++)); do
		t0=$EPOCHREALTIME
		ip netns add "$ns" &&
		ip link add "$h" type veth peer name eth0 netns "$ns" &&
		ip addr add 10.231.0.1/30 dev "$h" &&
		ip link set "$h" up &&
		nsenter --net="/run/netns/$ns" sysctl -q -w \
		    net.ipv6.conf.all.disable_ipv6=1 \
		    net.ipv6.conf.default.disable_ipv6=1 &&
		ip -n "$ns" link set lo up &&
		ip -n "$ns" addr add 10.231.0.2/30 dev eth0 &&
		ip -n "$ns" link set eth0 up &&
		ip -n "$ns" route add default via 10.231.0.1 &&
		mkdir -p "$etc/$ns" &&
		echo "nameserver $BENCH_SERVICE" >"$etc/$ns/resolv.conf" &&
		nft -f "$rules" || { echo "shell create failed" >&2; return 1; }
		t1=$EPOCHREALTIME
		nft delete table inet shsb &&
		ip link del "$h" &&
		ip netns del "$ns" &&
		rm -rf "${etc:?}/$ns" || { echo "shell delete failed" >&2; return 1; }
		t2=$EPOCHREALTIME
		awk -v a="$t0" -v b="$t1" -v c="$t2" \
		    'BEGIN { printf "%.1f %.1f\n", (b - a) * 1e6, (c - b) * 1e6 }'
	done
}
BENCH_SERVICE=10.231.255.254

# lc_parts FILE LABEL: a note with the medians of the parts (columns 3-6
# of bench_lifecycle's output), to show which module a slow total costs.
lc_parts() {
	local c m=() f=$BENCH_WORK/lifecycle/part
	for c in 3 4 5 6; do
		cut -d' ' -f$c "$1" >"$f"
		m+=("$(ms "$(stats "$f" | cut -d' ' -f1)")")
	done
	note "lifecycle, $2: medians of the parts (ms): create = ns_create ${m[0]} + fw_sandbox_add ${m[1]}; delete = fw_sandbox_del ${m[2]} + ns_delete ${m[3]}"
}

# bench_world NAME: the e2e world (tests/e2e/world.sh) for section NAME,
# its names carrying this run's tag so that sweep() removes them too (the
# world's own cleanup runs first, from the EXIT trap set here), and a
# sluiced config for it: CFG, with its policies in the directory POL
# (both assigned in the caller, which declares them local). 0, or 1 with
# a note.
bench_world() {
	export WORLD_TAG=$BENCH_TAG-w SLUICE_BUILD=$top/$BENCH_BUILD
	# shellcheck disable=SC1091
	. "$top/tests/e2e/lib.sh"
	# shellcheck disable=SC1091
	. "$top/tests/e2e/world.sh"
	trap 'world_fast_down; _run_cleanup; sweep' EXIT
	world_up 2>"$W/world.err" || { note "$1: world_up failed: $(head -c 200 "$W/world.err")"; return 1; }
	POL=$E2E_TMP/pol CFG=$E2E_TMP/sluice.yaml
	world_sluiced_config "$CFG" "$POL"
}

sec_lifecycle() {
	local lc=lc dir=/run/$BENCH_TAG etc rounds per r st pre op
	local W=$BENCH_WORK/lifecycle
	[ -x "$BIN/bench_lifecycle" ] || { not_yet "bench_lifecycle not built"; return 1; }
	mkdir -p "$W" "$dir" || return 1
	etc=$W/etc
	mkdir -p "$etc"
	ip netns add "$BENCH_TAG-$lc" || return 1
	in_ns $lc ip link set lo up
	rounds=4
	per=$(( (BENCH_LC_ITERS + rounds - 1) / rounds ))
	# Each round is bounded in time too (6 s Sluice, 20 s shell): on a
	# loaded machine the shell side may take a second per sandbox, and
	# fewer samples (the rows give n) beat a section killed at its limit.
	say "lifecycle: $rounds rounds of up to $per create+delete, Sluice and shell alternating"
	for ((r = 0; r < rounds; r++)); do
		in_ns $lc "$BIN/bench_lifecycle" -d "$dir" -n "$per" -t 6 \
		    >>"$W/sluice.txt" || { note "lifecycle: bench_lifecycle failed"; return 1; }
		in_ns $lc "$SELF" --shell-round "$per" "$etc" 20 \
		    >>"$W/shell.txt" || { note "lifecycle: shell anchor failed"; return 1; }
	done
	cut -d' ' -f1 "$W/sluice.txt" >"$W/s.create"
	cut -d' ' -f2 "$W/sluice.txt" >"$W/s.delete"
	cut -d' ' -f1 "$W/shell.txt" >"$W/a.create"
	cut -d' ' -f2 "$W/shell.txt" >"$W/a.delete"
	for op in create delete; do
		read -r sm sp smin smax sn < <(stats "$W/s.$op")
		read -r am ap amin amax an < <(stats "$W/a.$op")
		row lifecycle "Sandbox $op, median (n=$sn; shell n=$an)" ms "$(ms "$sm")" \
		    "$(ms "$smin")" "$(ms "$smax")" "shell (ip + nft -f)" \
		    "$(ms "$am")" "$(ms "$amin")" "$(ms "$amax")" "≤ 10 ms" s_le 10
		row lifecycle "Sandbox $op, p99" ms "$(ms "$sp")" - - \
		    "shell (ip + nft -f)" "$(ms "$ap")" - - - none -
	done

	lc_parts "$W/sluice.txt" "1 sandbox"

	# Growth: the same with 1,000 whole sandboxes already there.
	pre=1000
	say "lifecycle: $pre sandboxes present, then $per create+delete"
	st=$EPOCHREALTIME
	if in_ns $lc "$BIN/bench_lifecycle" -d "$dir" -n $per -t 15 -p $pre \
	    >"$W/sluice1k.txt"; then
		say "lifecycle: growth run took $(fmt_secs "$st" "$EPOCHREALTIME") s"
		lc_parts "$W/sluice1k.txt" "1,000 present"
		cut -d' ' -f1 "$W/sluice1k.txt" >"$W/s1k.create"
		cut -d' ' -f2 "$W/sluice1k.txt" >"$W/s1k.delete"
		for op in create delete; do
			read -r sm sp smin smax sn < <(stats "$W/s1k.$op")
			row lifecycle "Sandbox $op, median, 1,000 present (n=$sn)" \
			    ms "$(ms "$sm")" "$(ms "$smin")" "$(ms "$smax")" \
			    - - - - "≤ 10 ms" s_le 10
			row lifecycle "Sandbox $op, p99, 1,000 present" ms \
			    "$(ms "$sp")" - - - - - - - none -
		done
	else
		note "lifecycle: growth run (1,000 sandboxes present) failed"
	fi
	return 0
}

# ===================================================== section: datapath

# The world (all names $BENCH_TAG-*; addresses as in the e2e world):
#
#   s (sandbox)  eth0 10.231.0.2/30 --- sl-bench 10.231.0.1/30   h (host,
#                                                        the gateway: the
#   i (internet) eth0 203.0.113.2/24 --- up0 203.0.113.1/24  sluice table)
#                lo 203.0.113.80: iperf3 :5201, bench_connect :5202, :5203
#
# Filtered: table inet sluice awake (fw_init, the sender registered and
# 203.0.113.80 tcp 5201-5202 learned for it), table ip bnat dormant.
# Unfiltered (the anchor): inet sluice dormant, ip bnat (masquerade only)
# awake. Dormant tables have no hooks, so the anchor pays nothing for the
# sluice table and the filtered side pays for it in full.

DST=203.0.113.80

dp_world() {
	local n
	for n in h i s; do ip netns add "$BENCH_TAG-$n" || return 1; done
	ip -n "$BENCH_TAG-h" link add sl-bench type veth peer name eth0 \
	    netns "$BENCH_TAG-s" &&
	ip -n "$BENCH_TAG-h" link add up0 type veth peer name eth0 \
	    netns "$BENCH_TAG-i" &&
	in_ns h sysctl -q -w net.ipv4.ip_forward=1 &&
	ip -n "$BENCH_TAG-h" link set lo up &&
	ip -n "$BENCH_TAG-h" addr add "$BENCH_SERVICE/32" dev lo &&
	ip -n "$BENCH_TAG-h" addr add 10.231.0.1/30 dev sl-bench &&
	ip -n "$BENCH_TAG-h" link set sl-bench up &&
	ip -n "$BENCH_TAG-h" addr add 203.0.113.1/24 dev up0 &&
	ip -n "$BENCH_TAG-h" link set up0 up &&
	ip -n "$BENCH_TAG-h" route add default via 203.0.113.2 &&
	ip -n "$BENCH_TAG-s" link set lo up &&
	ip -n "$BENCH_TAG-s" addr add 10.231.0.2/30 dev eth0 &&
	ip -n "$BENCH_TAG-s" link set eth0 up &&
	ip -n "$BENCH_TAG-s" route add default via 10.231.0.1 &&
	ip -n "$BENCH_TAG-i" link set lo up &&
	ip -n "$BENCH_TAG-i" addr add "$DST/32" dev lo &&
	ip -n "$BENCH_TAG-i" addr add 203.0.113.2/24 dev eth0 &&
	ip -n "$BENCH_TAG-i" link set eth0 up
}

# dp_mode filtered|unfiltered|minimal. Minimal: the anchor plus table
# inet bmin, a forward hook with two rules, the least any nftables filter
# on the forward path costs (the floor row of dp_floor).
dp_mode() {
	case $1 in
	filtered)
		in_ns h nft -f - <<-EOF
		add table ip bnat { flags dormant; }
		add table inet bmin { flags dormant; }
		add table inet sluice
		EOF
		;;
	unfiltered)
		in_ns h nft -f - <<-EOF
		add table inet sluice { flags dormant; }
		add table inet bmin { flags dormant; }
		add table ip bnat
		EOF
		;;
	minimal)
		in_ns h nft -f - <<-EOF
		add table inet sluice { flags dormant; }
		add table ip bnat
		add table inet bmin
		EOF
		;;
	esac
}

# dp_sanity: the two modes really differ. Filtered: the learned port
# passes and port 5203 (not learned) is rejected; unfiltered: both pass.
dp_sanity() {
	local c=$BIN/bench_connect
	dp_mode filtered &&
	in_ns s "$c" client $DST 5202 5 2 >/dev/null &&
	! in_ns s "$c" client $DST 5203 1 2 >/dev/null 2>&1 &&
	dp_mode unfiltered &&
	in_ns s "$c" client $DST 5202 5 2 >/dev/null &&
	in_ns s "$c" client $DST 5203 5 2 >/dev/null
}

# dp_cps_pairs MODE LABEL PREFIX: BENCH_CPS_REPS pairs of connection-rate
# runs, MODE and unfiltered, their order alternating; each run's rate is
# appended to PREFIX.MODE or PREFIX.unfiltered. A run with failed
# connects is noted (its rate still counts); one with no rate fails.
dp_cps_pairs() {
	local mode=$1 label=$2 prefix=$3 r m order out cps
	for ((r = 0; r < BENCH_CPS_REPS; r++)); do
		if ((r % 2 == 0)); then order="$mode unfiltered"; else
			order="unfiltered $mode"; fi
		for m in $order; do
			dp_mode "$m" || return 1
			out=$(in_ns s timeout $((BENCH_CPS_SECS + 20)) \
			    "$BIN/bench_connect" client $DST 5202 50000 \
			    "$BENCH_CPS_SECS" 2>&1)
			cps=$(printf '%s' "$out" | awk '/^conns/ { print $8 }')
			if [ -z "$cps" ] || [ "$(printf '%s' "$out" | awk '/^conns/ { print $4 }')" != 0 ]; then
				note "datapath: $label $m: connect run: $out"
				[ -z "$cps" ] && return 1
			fi
			echo "$cps" >>"$prefix.$m"
		done
	done
}

# dp_measure LABEL: REPS pairs of iperf3 and connect-rate runs, the order
# of filtered/unfiltered alternating from one repetition to the next.
dp_measure() {
	local label=$1 r m order out bps W=$BENCH_WORK/datapath
	if ! dp_sanity; then
		note "datapath: $label: sanity check failed (filter not in the path, or the allowed flow refused)"
		return 1
	fi
	for ((r = 0; r < BENCH_REPS; r++)); do
		if ((r % 2 == 0)); then order="filtered unfiltered"; else
			order="unfiltered filtered"; fi
		for m in $order; do
			dp_mode "$m" || return 1
			out=$(in_ns s timeout $((BENCH_IPERF_SECS + 20)) iperf3 \
			    -c $DST -p 5201 -t "$BENCH_IPERF_SECS" -O 1 -J 2>&1)
			bps=$(printf '%s' "$out" | jq -r '.end.sum_received.bits_per_second // empty' 2>/dev/null)
			if [ -z "$bps" ]; then
				note "datapath: $label $m: iperf3 failed: $(printf '%s' "$out" | jq -r '.error // empty' 2>/dev/null | head -c 200)"
				return 1
			fi
			awk -v b="$bps" 'BEGIN { printf "%.4f\n", b / 1e9 }' >>"$W/tp.$label.$m"
		done
	done
	# Connection rates vary more than throughput on a shared machine and
	# each run is short: BENCH_CPS_REPS pairs (default 5).
	dp_cps_pairs filtered "$label" "$W/cps.$label" || return 1
	local what unit file
	for what in tp cps; do
		if [ $what = tp ]; then
			unit=Gbit/s; file="TCP throughput (iperf3)"
		else
			unit=conn/s; file="TCP connections/s"
		fi
		read -r sm _ smin smax _ < <(stats "$W/$what.$label.filtered")
		read -r am _ amin amax _ < <(stats "$W/$what.$label.unfiltered")
		# Pair i's two runs were back to back: the median of the
		# per-pair ratios cancels the machine's slower drifts better
		# than a ratio of medians.
		paste -d' ' "$W/$what.$label.filtered" "$W/$what.$label.unfiltered" |
		    awk '$2 > 0 { printf "%.6f\n", $1 / $2 }' >"$W/$what.$label.ratio"
		read -r pr _ prmin prmax _ < <(stats "$W/$what.$label.ratio")
		row datapath "$file, $label" "$unit" "$sm" "$smin" "$smax" \
		    "no filtering" "$am" "$amin" "$amax" "≥ 0.95× unfiltered" \
		    ratio_ge 0.95 "$pr" "$prmin" "$prmax"
		say "datapath: $label: $what sluice $sm ($smin-$smax) unfiltered $am ($amin-$amax) $unit; pair ratio $pr ($prmin-$prmax)"
	done
}

# dp_floor: BENCH_CPS_REPS pairs of connection-rate runs, the minimal
# filter against the anchor, alternating, at one scale: how much of the
# filtered row's gap any nftables forward hook costs on this machine
# (conntrack state check included), as against Sluice's own checks.
dp_floor() {
	local W=$BENCH_WORK/datapath
	dp_cps_pairs minimal floor "$W/floor" || return 1
	paste -d' ' "$W/floor.minimal" "$W/floor.unfiltered" |
	    awk '$2 > 0 { printf "%.6f\n", $1 / $2 }' >"$W/floor.ratio"
	read -r sm _ smin smax _ < <(stats "$W/floor.minimal")
	read -r am _ amin amax _ < <(stats "$W/floor.unfiltered")
	read -r pr _ prmin prmax _ < <(stats "$W/floor.ratio")
	row datapath "TCP connections/s, 1 sandbox, any nftables filter: a forward hook with 2 rules (ct state established,related accept; iifname accept), no Sluice table" \
	    conn/s "$sm" "$smin" "$smax" "no filtering" "$am" "$amin" "$amax" \
	    "(reported: the floor)" none - "$pr" "$prmin" "$prmax"
	say "datapath: floor: minimal filter $sm ($smin-$smax) unfiltered $am ($amin-$amax) conn/s; pair ratio $pr ($prmin-$prmax)"
}

# dp_learn1 LABEL: the kernel cost of one DNS answer at this set size:
# 200 single-element fw_learn calls (removed again afterwards).
dp_learn1() {
	local label=$1 W=$BENCH_WORK/datapath f
	f=$W/learn1.${label// /_}
	in_ns h "$BIN/bench_fw" learn1 200 sl-bench | awk '/^learn1_us/ { print $2 }' >"$f" ||
	    { note "datapath: learn1 at $label failed"; return 1; }
	read -r sm sp smin smax sn < <(stats "$f")
	row datapath "fw_learn of 1 element (one DNS answer), median, $label (n=$sn)" \
	    µs "$sm" "$smin" "$smax" - - - - "(reported)" none -
	row datapath "fw_learn of 1 element, p99, $label" µs "$sp" - - - - - - \
	    "(reported)" none -
}

sec_datapath() {
	local fw=$BIN/bench_fw W=$BENCH_WORK/datapath n out
	for n in bench_fw bench_connect; do
		[ -x "$BIN/$n" ] || { not_yet "$n not built"; return 1; }
	done
	command -v iperf3 >/dev/null || { not_yet "iperf3 not installed"; return 1; }
	command -v jq >/dev/null || { not_yet "jq not installed"; return 1; }
	mkdir -p "$W"
	dp_world || { note "datapath: building the namespaces failed"; return 1; }

	in_ns h "$fw" init || return 1
	in_ns h "$fw" sender sl-bench 10.231.0.2 $DST 5201 5202 || return 1
	in_ns h nft -f - <<-EOF || return 1
	table ip bnat {
		chain postrouting {
			type nat hook postrouting priority srcnat; policy accept;
			ip saddr 10.231.0.0/16 oifname "up0" masquerade
		}
	}
	EOF
	in_ns h nft -f - <<-EOF || return 1
	table inet bmin {
		flags dormant;
		chain forward {
			type filter hook forward priority filter; policy accept;
			ct state established,related accept
			iifname "sl-bench" accept
		}
	}
	EOF

	bg_ns i "$W/iperf3-server.log" iperf3 -s -B $DST -p 5201
	bg_ns i "$W/server5202.log" "$BIN/bench_connect" serve $DST 5202 \
	    "$W/ready.5202"
	bg_ns i "$W/server5203.log" "$BIN/bench_connect" serve $DST 5203 \
	    "$W/ready.5203"
	wait_file 5 "$W/ready.5202" && wait_file 5 "$W/ready.5203" ||
	    { note "datapath: servers did not start"; return 1; }
	# iperf3 has no ready file, and a probe connection would cost it a
	# test: wait until the socket listens.
	for ((n = 0; n < 50; n++)); do
		[ -n "$(in_ns i ss -Hltn "sport = :5201")" ] && break
		sleep 0.1
	done

	# Nine more learned elements for the sender (j = 1..9): the sandbox
	# rows run with 10 learned elements in all.
	in_ns h "$fw" learn 1 10 1 sl-bench >/dev/null || return 1
	dp_measure "1 sandbox" || return 1
	dp_floor || note "datapath: the floor row failed"
	in_ns h "$fw" idle 1 100 || return 1
	dp_measure "100 sandboxes" || return 1
	in_ns h "$fw" idle 100 1000 || return 1
	dp_measure "1,000 sandboxes (10 learned)" || return 1
	dp_learn1 "10 learned"

	out=$(in_ns h "$fw" learn 10 10000 1000 sl-bench) || return 1
	say "datapath: $out"
	n=$(in_ns h "$fw" count learned4)
	[ "$n" = 10000 ] || note "datapath: expected 10000 learned elements, the kernel has $n"
	dp_measure "1,000 sandboxes, 10,000 learned" || return 1
	dp_learn1 "10,000 learned"

	out=$(in_ns h "$fw" learn 10000 100000 1000 sl-bench) || return 1
	say "datapath: $out"
	n=$(in_ns h "$fw" count learned4)
	[ "$n" = 100000 ] || note "datapath: expected 100000 learned elements, the kernel has $n"
	# "learned 90000 in S s": the insertion rate at this scale.
	local rate
	rate=$(printf '%s' "$out" | awk '/^learned/ { printf "%.0f", $2 / $4 }')
	[ -n "$rate" ] && row datapath "fw_learn rate, 10,000 → 100,000 elements (batches of 1,024)" \
	    elem/s "$rate" - - - - - - - none -
	dp_measure "1,000 sandboxes, 100,000 learned" || return 1
	dp_learn1 "100,000 learned"
	n=$(in_ns h "$fw" count learned4)
	[ "$n" = 100000 ] || note "datapath: after the fw_learn timing the kernel has $n learned elements, not 100000"
	return 0
}

# ========================================================= section: gate

# The name gate (gateway/dns/gate.c, netns/fw_gate.c) in the e2e world: one
# sandbox, one TLS server (tests/e2e/tools/namegate.py) on 192.0.2.10
# ports 8443 (policy: check: tls, the gate reads the ClientHello) and 9443
# (check: none: the SYN is queued once and passed, nothing is read), the
# same name, the same run, alternating rounds. Rows: the added time to
# the first answer byte of a new TLS connection (connect, handshake,
# request), median of the rounds' median differences, and the ratio of
# new connections/s (target >= 0.8).
sec_gate() {
	local W=$BENCH_WORK/gate r n=300 rounds=5 NG=$top/tests/e2e/tools/namegate.py
	command -v python3 >/dev/null || { not_yet "python3 missing"; return 0; }
	command -v openssl >/dev/null || { not_yet "openssl missing"; return 0; }
	mkdir -p "$W"
	export WORLD_TAG=$BENCH_TAG-w SLUICE_BUILD=$top/$BENCH_BUILD
	# shellcheck disable=SC1091
	. "$top/tests/e2e/lib.sh"
	# shellcheck disable=SC1091
	. "$top/tests/e2e/world.sh"
	trap 'world_fast_down; _run_cleanup; sweep' EXIT
	world_up 2>"$W/world.err" || { note "gate: world_up failed: $(head -c 200 "$W/world.err")"; return 1; }
	local POL=$E2E_TMP/pol CFG=$E2E_TMP/sluice.yaml
	world_sluiced_config "$CFG" "$POL" || return 1
	cat >"$POL/gatebench.yaml" <<-'EOF'
	version: 1
	name: gatebench
	egress:
	  allow:
	    - host: pkg.example.com
	      ports: [8443]
	      check: tls
	    - host: pkg.example.com
	      ports: [9443]
	      check: none
	EOF
	world_start_sluiced "$CFG" 2>"$W/start.err" ||
	    { note "gate: sluiced did not start: $(tail -c 200 "$W/start.err")"; return 1; }
	openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=pkg.example.com \
	    -keyout "$W/k.pem" -out "$W/c.pem" >/dev/null 2>&1 || return 1
	: >"$W/server.log"
	bg_ns w-inet "$W/server.out" python3 "$NG" serve "$W/server.log" \
	    "$W/c.pem" "$W/k.pem" "$WORLD_PKG"
	for ((r = 0; r < 100; r++)); do
		grep -q ready "$W/server.log" 2>/dev/null && break
		sleep 0.1
	done
	local ID
	ID=$(world_host "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy gatebench \
	    --id "$BENCH_TAG-gate" 2>"$W/create.err" | jq -r .id)
	[[ $ID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] ||
	    { note "gate: sandbox create failed: $(head -c 200 "$W/create.err")"; return 1; }
	world_sandbox "$ID" dig +short +time=2 +tries=1 @"$WORLD_SERVICE" \
	    pkg.example.com A >/dev/null
	say "gate: $rounds rounds of $n TLS connections each side (check: tls on 8443, check: none on 9443)"
	for ((r = 0; r < rounds; r++)); do
		for side in tls:8443 none:9443; do
			world_sandbox "$ID" python3 "$NG" bench "$WORLD_PKG" \
			    "${side#*:}" pkg.example.com $n >"$W/${side%%:*}.$r" ||
			    { note "gate: bench client failed (${side%%:*})"; return 1; }
			awk '$1 == "us" { print $2 }' "$W/${side%%:*}.$r" >>"$W/${side%%:*}.us"
			awk '$1 == "rate" { print $2 }' "$W/${side%%:*}.$r" >>"$W/${side%%:*}.rate"
		done
		awk -v a="$(awk '$1 == "us" { print $2 }' "$W/tls.$r" | stats /dev/stdin | cut -d' ' -f1)" \
		    -v b="$(awk '$1 == "us" { print $2 }' "$W/none.$r" | stats /dev/stdin | cut -d' ' -f1)" \
		    'BEGIN { printf "%.1f\n", a - b }' >>"$W/added"
		awk -v a="$(awk '$1 == "rate" { print $2 }' "$W/tls.$r")" \
		    -v b="$(awk '$1 == "rate" { print $2 }' "$W/none.$r")" \
		    'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$W/ratio"
	done
	local tm tp tmin tmax tn nm np nmin nmax nn am amin amax rm rmin rmax
	read -r tm tp tmin tmax tn <<<"$(stats "$W/tls.us")"
	read -r nm np nmin nmax nn <<<"$(stats "$W/none.us")"
	read -r am _ amin amax _ <<<"$(stats "$W/added")"
	row gate "New TLS connection, connect to first answer byte, median, check: tls vs check: none (n=$tn/$nn)" µs \
	    "$tm" "$tmin" "$tmax" "check: none" "$nm" "$nmin" "$nmax" "(reported)" none -
	row gate "Added by reading the name, median of $rounds rounds' median differences" µs \
	    "$am" "$amin" "$amax" - - - - "≤ 100 µs" s_le 100
	read -r tm _ tmin tmax _ <<<"$(stats "$W/tls.rate")"
	read -r nm _ nmin nmax _ <<<"$(stats "$W/none.rate")"
	read -r rm _ rmin rmax _ <<<"$(stats "$W/ratio")"
	row gate "New TLS connections/s, one client, check: tls vs check: none" conn/s \
	    "$tm" "$tmin" "$tmax" "check: none" "$nm" "$nmin" "$nmax" "≥ 0.8×" ratio_ge 0.8 \
	    "$rm" "$rmin" "$rmax"
	return 0
}

# ========================================================= section: dns

# dns_rounds TAG LABEL: three rounds of latency (Sluice from the sandbox
# DNS_ID, and the upstream directly from namespace c) and queries/s
# (Sluice, and dnsmasq --nftset from inet), then the rows for LABEL (the
# scale: "1 sandbox", "1,000 sandboxes"). Files under $W/TAG.
dns_rounds() {
	local tag=$1 label=$2 r out rs ra
	local T=$BIN/bench_dns S=wild.example.com D=$W/$1
	mkdir -p "$D"
	say "dns, $label: 3 rounds: latency ($lat sequential queries each side), then q/s ($secs s, $win outstanding; every name new also 64 and 128) Sluice vs dnsmasq --nftset"
	for ((r = 0; r < 3; r++)); do
		world_sandbox "$DNS_ID" "$T" lat "$WORLD_SERVICE" "$tag$r.$S" $names $lat 20 >"$D/s.lat.$r" ||
		    { note "dns: load tool failed (Sluice, $label)"; return 1; }
		in_ns c "$T" lat "$DNS_UP" "$tag$r.$S" $names $lat 20 >"$D/d.lat.$r" ||
		    { note "dns: load tool failed (direct, $label)"; return 1; }
		grep -h '^lost' "$D/s.lat.$r" "$D/d.lat.$r" | sed "s/^/dns: $label: round $r: /" | while read -r l; do note "$l"; done
		awk -v a="$(stats "$D/s.lat.$r" | cut -d' ' -f1)" -v b="$(stats "$D/d.lat.$r" | cut -d' ' -f1)" \
		    'BEGIN { printf "%.1f\n", a - b }' >>"$D/added"
		cat "$D/s.lat.$r" >>"$D/s.lat"
		cat "$D/d.lat.$r" >>"$D/d.lat"
		out=$(world_sandbox "$DNS_ID" "$T" qps "$WORLD_SERVICE" "q$tag$r.$S" $names $win $secs) ||
		    { note "dns: load tool failed (Sluice q/s, $label)"; return 1; }
		say "  Sluice: $out"
		printf '%s\n' "$out" | awk '{ print $2 }' >>"$D/s.qps"
		printf '%s\n' "$out" | awk -v l="$label" '$8 > 0 { print "dns: " l ": Sluice q/s round: " $8 " errors (not NOERROR or lost)" }' | while read -r l; do note "$l"; done
		out=$(world_inet "$T" qps 198.51.100.202 "q$tag$r.$S" $names $win $secs) ||
		    { note "dns: load tool failed (anchor q/s, $label)"; return 1; }
		say "  dnsmasq --nftset: $out"
		printf '%s\n' "$out" | awk '{ print $2 }' >>"$D/a.qps"
		rs=$(tail -n 1 "$D/s.qps"); ra=$(tail -n 1 "$D/a.qps")
		awk -v a="$rs" -v b="$ra" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$D/ratio"
		# Every name new ($uniq > the queries of a round): no cache
		# on either side can answer, so both do the whole path
		# (upstream query, check, insertion) for every answer.
		out=$(world_sandbox "$DNS_ID" "$T" qps "$WORLD_SERVICE" "u$tag$r.$S" $uniq $win $secs) ||
		    { note "dns: load tool failed (Sluice q/s, new names, $label)"; return 1; }
		say "  Sluice, every name new: $out"
		printf '%s\n' "$out" | awk '{ print $2 }' >>"$D/s.qpsu"
		printf '%s\n' "$out" >"$D/sat.s.$r"
		out=$(world_inet "$T" qps 198.51.100.202 "u$tag$r.$S" $uniq $win $secs) ||
		    { note "dns: load tool failed (anchor q/s, new names, $label)"; return 1; }
		say "  dnsmasq --nftset, every name new: $out"
		printf '%s\n' "$out" | awk '{ print $2 }' >>"$D/a.qpsu"
		printf '%s\n' "$out" >"$D/sat.a.$r"
		# The ceiling: the upstream queried directly at the same load.
		out=$(in_ns c "$T" qps "$DNS_UP" "v$tag$r.$S" $uniq $win $secs) ||
		    { note "dns: load tool failed (upstream q/s, $label)"; return 1; }
		say "  upstream directly, every name new: $out"
		printf '%s\n' "$out" | awk '{ print $2 }' >>"$D/u.qpsu"
		rs=$(tail -n 1 "$D/s.qpsu"); ra=$(tail -n 1 "$D/a.qpsu")
		awk -v a="$rs" -v b="$ra" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$D/ratiou"
		# Capacity. At 32 outstanding Sluice answers a window in
		# about half dnsmasq's time and its loop then waits for the
		# next one part of the time, while dnsmasq is already at its
		# limit: each proxy is also driven at 64 and 128 outstanding
		# (dnsmasq forwards up to 150 queries at once), and its best
		# rate of the three windows without a lost or failed answer
		# counts.
		for w in 64 128; do
			out=$(world_sandbox "$DNS_ID" "$T" qps "$WORLD_SERVICE" "w$w$tag$r.$S" $uniq $w $secs) ||
			    { note "dns: load tool failed (Sluice q/s, $w outstanding, $label)"; return 1; }
			say "  Sluice, every name new, $w outstanding: $out"
			printf '%s\n' "$out" >>"$D/sat.s.$r"
			out=$(world_inet "$T" qps 198.51.100.202 "w$w$tag$r.$S" $uniq $w $secs) ||
			    { note "dns: load tool failed (anchor q/s, $w outstanding, $label)"; return 1; }
			say "  dnsmasq --nftset, every name new, $w outstanding: $out"
			printf '%s\n' "$out" >>"$D/sat.a.$r"
		done
		cat "$D/sat.s.$r" "$D/sat.a.$r" | awk -v l="$label" -v r="$r" '$1 == "qps" && $8 > 0 { print "dns: " l ": round " r ": " $0 " (not counted as a best rate)" }' |
		    while read -r line; do note "$line"; done
		rs=$(awk '$1 == "qps" && $8 == 0 && $2 > m { m = $2 } END { print m + 0 }' "$D/sat.s.$r")
		ra=$(awk '$1 == "qps" && $8 == 0 && $2 > m { m = $2 } END { print m + 0 }' "$D/sat.a.$r")
		echo "$rs" >>"$D/s.qpss"
		echo "$ra" >>"$D/a.qpss"
		awk -v a="$rs" -v b="$ra" 'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$D/ratios"
	done
	row memory "sluiced resident memory (VmRSS, all its processes), after the DNS load, $label" MiB \
	    "$(rss_mib "$DNS_SPID")" - - - - - - "(reported)" none -
	local sm smin smax sn am amin amax an xm xmin xmax rm rmin rmax
	read -r sm _ smin smax sn < <(stats "$D/s.lat")
	read -r am _ amin amax an < <(stats "$D/d.lat")
	row dns "Allowed query latency incl. set insertion, median, $label (n=$sn; direct n=$an)" µs \
	    "$sm" "$smin" "$smax" "upstream directly" "$am" "$amin" "$amax" "(reported)" none -
	read -r xm _ xmin xmax _ < <(stats "$D/added")
	row dns "Added latency over the upstream directly, $label (median of 3 rounds' median differences)" µs \
	    "$xm" "$xmin" "$xmax" - - - - "≤ 200 µs" s_le 200
	read -r sm _ smin smax _ < <(stats "$D/s.qps")
	read -r am _ amin amax _ < <(stats "$D/a.qps")
	read -r rm _ rmin rmax _ < <(stats "$D/ratio")
	row dns "Queries/s with insertions, $label, $names names repeating (Sluice answers from its cache and re-learns each answer; dnsmasq --cache-size=0)" q/s \
	    "$sm" "$smin" "$smax" "dnsmasq --nftset" "$am" "$amin" "$amax" "(reported)" none - "$rm" "$rmin" "$rmax"
	read -r sm _ smin smax _ < <(stats "$D/s.qpsu")
	read -r am _ amin amax _ < <(stats "$D/a.qpsu")
	read -r rm _ rmin rmax _ < <(stats "$D/ratiou")
	row dns "Queries/s with insertions, $label, every name new (no cache can answer; $win outstanding)" q/s \
	    "$sm" "$smin" "$smax" "dnsmasq --nftset" "$am" "$amin" "$amax" "(reported)" none - "$rm" "$rmin" "$rmax"
	read -r sm _ smin smax _ < <(stats "$D/s.qpss")
	read -r am _ amin amax _ < <(stats "$D/a.qpss")
	read -r rm _ rmin rmax _ < <(stats "$D/ratios")
	row dns "Queries/s with insertions, $label, every name new, at capacity (each proxy's best of 32, 64 and 128 outstanding, no answer lost)" q/s \
	    "$sm" "$smin" "$smax" "dnsmasq --nftset" "$am" "$amin" "$amax" "≥ 2× dnsmasq" ratio_ge 2 "$rm" "$rmin" "$rmax"
	read -r am _ amin amax _ < <(stats "$D/u.qpsu")
	row dns "Queries/s of the upstream queried directly, $label, every name new (the ceiling of both proxies)" q/s \
	    "$am" "$amin" "$amax" - - - - "(reported)" none -
	kill -0 "$dpid" 2>/dev/null || note "dns: the anchor dnsmasq died during the run ($label)"
	return 0
}

sec_dns() {
	local W=$BENCH_WORK/dns r out names=5000 uniq=1000000 lat=2000 secs=3 win=32
	[ -x "$BIN/bench_dns" ] || { not_yet "bench_dns not built"; return 1; }
	command -v dnsmasq >/dev/null || { not_yet "dnsmasq missing"; return 0; }
	mkdir -p "$W"
	# The e2e world (tests/e2e/world.sh): host namespace with sluiced,
	# inet with the upstream dnsmasq (192.0.2.53, --cache-size=0, which
	# answers every *.wild.example.com). Its names carry this run's tag
	# so sweep() removes them too; its own cleanup runs first.
	local POL CFG
	bench_world dns || return 1
	# The upstream of every DNS line: bench_dns serve on 192.0.2.54 in
	# inet (answers any A question, no log, no cache). The world's
	# dnsmasq logs every query and would cap Sluice and the anchor alike
	# at its own rate, so the comparison would measure it, not them.
	local UP=192.0.2.54 i
	world_inet ip addr add "$UP/32" dev lo || { note "dns: upstream address failed"; return 1; }
	bg_ns w-inet "$W/upstream.log" "$BIN/bench_dns" serve "$UP" "${LIMIT[dns]}"
	local upid=$BG_PID
	for ((i = 0; i < 50; i++)); do
		world_inet dig +time=1 +tries=1 +short @"$UP" n0.wild.example.com 2>/dev/null | grep -q . && break
		sleep 0.1
	done
	sed -i "s/^    - $WORLD_DNS\$/    - $UP/" "$CFG"
	grep -q "^    - $UP\$" "$CFG" || { note "dns: could not point the daemon at the bench upstream"; return 1; }
	cat >"$POL/dnsbench.yaml" <<-'EOF'
	version: 1
	name: dnsbench
	egress:
	  allow:
	    - host: "*.wild.example.com"
	      ports: [80]
	dns:
	  types: [A]
	  min_ttl: 60s
	  max_ttl: 1h
	  rate: {qps: 100000, burst: 100000}
	EOF
	world_start_sluiced "$CFG" 2>"$W/start.err" ||
	    { note "dns: sluiced did not start: $(tail -c 200 "$W/start.err")"; return 1; }
	local ID
	ID=$(world_host "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy dnsbench \
	    --id "$BENCH_TAG-dns" 2>"$W/create.err" | jq -r .id)
	[[ $ID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] ||
	    { note "dns: sandbox create failed: $(head -c 200 "$W/create.err")"; return 1; }
	local SPID=$_WORLD_SLUICED_PID

	# The direct side: a plain namespace c hung off the host namespace
	# like a sandbox (one veth to host, forwarded to inet), so the
	# direct query crosses the same two veths the proxied one does; a
	# sandbox itself cannot query the upstream (stray port 53 is
	# redirected to the proxy).
	local C=$BENCH_TAG-c
	ip netns add "$C" || return 1
	ip -n "$WORLD_HOST_NS" link add bc0 type veth peer name eth0 netns "$C" &&
	ip -n "$WORLD_HOST_NS" addr add 10.232.0.1/30 dev bc0 &&
	ip -n "$WORLD_HOST_NS" link set bc0 up &&
	ip -n "$C" link set lo up && ip -n "$C" addr add 10.232.0.2/30 dev eth0 &&
	ip -n "$C" link set eth0 up && ip -n "$C" route add default via 10.232.0.1 &&
	ip -n "$WORLD_INET_NS" route add 10.232.0.0/30 via "$WORLD_HOST_V4" &&
	world_host sysctl -qw net.ipv4.ip_forward=1 || { note "dns: direct namespace setup failed"; return 1; }

	# The anchor: dnsmasq --nftset in its own namespace d, hung off
	# inet, forwarding to the same upstream, inserting every answer into
	# an equivalent set (ipv4_addr, timeouts) of its own table; the load
	# tool runs in inet (client -> d -> upstream crosses two veths).
	local D=$BENCH_TAG-d
	ip netns add "$D" || return 1
	ip -n "$WORLD_INET_NS" link add bd0 type veth peer name eth0 netns "$D" &&
	ip -n "$WORLD_INET_NS" addr add 198.51.100.201/30 dev bd0 &&
	ip -n "$WORLD_INET_NS" link set bd0 up &&
	ip -n "$D" link set lo up && ip -n "$D" addr add 198.51.100.202/30 dev eth0 &&
	ip -n "$D" link set eth0 up && ip -n "$D" route add default via 198.51.100.201 ||
	    { note "dns: anchor namespace setup failed"; return 1; }
	in_ns d nft -f - <<-EOF || { note "dns: anchor table failed"; return 1; }
	table inet dmt {
		set s { type ipv4_addr; flags timeout; timeout 1h; }
	}
	EOF
	bg_ns d "$W/dnsmasq.log" dnsmasq --keep-in-foreground --no-resolv \
	    --no-hosts --conf-file=/dev/null --user=root --pid-file= \
	    --bind-interfaces --listen-address=198.51.100.202 --port=53 \
	    --cache-size=0 --server="$UP" \
	    --nftset=/wild.example.com/4#inet#dmt#s
	local dpid=$BG_PID i
	for ((i = 0; i < 50; i++)); do
		world_inet dig +time=1 +tries=1 +short @198.51.100.202 n0.wild.example.com 2>/dev/null | grep -q . && break
		sleep 0.1
	done
	in_ns d nft list set inet dmt s 2>/dev/null | grep -q 192.0.2.10 ||
	    { note "dns: the dnsmasq --nftset anchor did not insert: $(tail -c 200 "$W/dnsmasq.log")"; return 1; }
	# The same check for Sluice: an answer through the proxy.
	world_sandbox "$ID" dig +time=2 +tries=1 +short @"$WORLD_SERVICE" n0.wild.example.com 2>/dev/null | grep -q 192.0.2.10 ||
	    { note "dns: the proxy did not answer an allowed name"; return 1; }

	DNS_ID=$ID DNS_SPID=$SPID DNS_UP=$UP
	at_1_and_1000 dns dnsbench dns_rounds "$W/mass" || return 1
	n=$(world_host nft list set inet sluice learned4 2>/dev/null | grep -c 192.0.2.10)
	((n > 0)) || note "dns: no learned element for 192.0.2.10 in inet sluice after the run (set name learned4 assumed)"
	return 0
}

# ====================================================== section: bridge

# sec_bridge: tools/call through sluiced's bridge from a sandbox (the SDK
# client, bench_mcp.mjs, one session, sequential calls of server-everything's
# echo over stdio, each recorded durably before it is forwarded) against the
# same server called directly over stdio and behind supergateway (a Node MCP
# proxy from npm, installed into the run's work directory), four rounds
# side by side, the order of each pair alternating.
# bridge_rounds TAG LABEL: BR_ROUNDS rounds of sequential tools/call
# through Sluice from the sandbox BR_ID, the server directly over stdio, and
# supergateway (when SG is set), then the rows for LABEL (the scale: "1
# sandbox", "1,000 sandboxes"). Files under $W/TAG.
#
# Fairness. Every side is Node (client and server), whose JIT makes the
# first few hundred calls slower: a side that always ran first paid the
# warm-up of the shared server and looked slower by up to a millisecond.
# So each run starts with $warm untimed calls, the shared http server gets
# an untimed pass through both paths before round 0, and the order of each
# Sluice/direct pair alternates from round to round (an even number of
# rounds, so neither side goes first more often).
br_s() {	# br_s R: Sluice over stdio, round R
	world_sandbox "$BR_ID" "$NODE" "$B" --url "$BR_URL" --header \
	    "Authorization: Bearer $BR_TOK" --n $n --warm $warm --secs 30 \
	    >"$D/s.$1" 2>"$D/s.err"
}
br_d() {	# br_d R: the server directly over stdio (its own child)
	world_host "$NODE" "$B" --n $n --warm $warm --secs 30 \
	    --stdio "$NODE" "$EVERYTHING" stdio >"$D/d.$1" 2>"$D/d.err"
}
br_sh() {	# br_sh R: Sluice to the http upstream
	world_sandbox "$BR_ID" "$NODE" "$B" --url "$BR_URL_H" --header \
	    "Authorization: Bearer $BR_TOK" --n $n --warm $warm --secs 30 \
	    >"$D/sh.$1" 2>"$D/sh.err"
}
br_dh() {	# br_dh R: the http upstream directly
	world_host "$NODE" "$B" --url "http://$WORLD_MCP:3102/mcp" \
	    --n $n --warm $warm --secs 30 >"$D/dh.$1" 2>"$D/dh.err"
}
bridge_rounds() {
	local tag=$1 label=$2 r x sm dm pm D=$W/$1
	mkdir -p "$D"
	say "bridge, $label: $BR_ROUNDS rounds of $n sequential tools/call (after $warm untimed) per side, order alternating"
	local ok=0
	if [ -n "$BR_URL_H" ]; then
		br_sh warm >/dev/null 2>&1 || true
		br_dh warm >/dev/null 2>&1 || true
		rm -f "$D/sh.warm" "$D/dh.warm"
	fi
	for ((r = 0; r < BR_ROUNDS; r++)); do
		# A round that fails (bench_mcp.mjs stops at 30 s on a machine
		# too loaded to finish) is left out, with a note; the rows need
		# at least one complete round.
		if ((r % 2 == 0)); then
			br_s $r && br_d $r
		else
			br_d $r && br_s $r
		fi || {
			note "bridge: round $r over stdio failed ($label), round left out: $(head -c 200 "$D/s.err" "$D/d.err" 2>/dev/null)"
			rm -f "$D/s.$r" "$D/d.$r"
			continue
		}
		ok=$((ok + 1))
		if [ -n "$SG" ] && ! world_host "$NODE" "$B" --url "http://$WORLD_MCP:3101/mcp" \
		    --n $n --warm $warm --secs 30 >"$D/p.$r" 2>"$D/p.err"; then
			note "bridge: through supergateway failed ($label): $(head -c 200 "$D/p.err")"
			SG=
		fi
		for x in s d p; do
			[ -f "$D/$x.$r" ] || continue
			grep -v '^rate' "$D/$x.$r" >>"$D/$x.lat"
			awk '/^rate/ { print $2 }' "$D/$x.$r" >>"$D/$x.rate"
		done
		sm=$(grep -v '^rate' "$D/s.$r" >"$D/tmp"; stats "$D/tmp" | cut -d' ' -f1)
		dm=$(grep -v '^rate' "$D/d.$r" >"$D/tmp"; stats "$D/tmp" | cut -d' ' -f1)
		awk -v a="$sm" -v b="$dm" 'BEGIN { printf "%.1f\n", a - b }' >>"$D/s.added"
		pm=
		if [ -f "$D/p.$r" ]; then
			pm=$(grep -v '^rate' "$D/p.$r" >"$D/tmp"; stats "$D/tmp" | cut -d' ' -f1)
			awk -v a="$pm" -v b="$dm" 'BEGIN { printf "%.1f\n", a - b }' >>"$D/p.added"
			awk -v a="$(tail -n 1 "$D/s.rate")" -v b="$(tail -n 1 "$D/p.rate")" \
			    'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$D/ratio"
		fi
		say "  round $r: median µs Sluice $sm, direct $dm, supergateway ${pm:--}"
		# The same server over Streamable HTTP, through Sluice (an
		# http upstream) and directly: the client's HTTP stack is on
		# both sides, so the difference is Sluice's own.
		[ -n "$BR_URL_H" ] || continue
		if { ((r % 2 == 0)) && br_sh $r && br_dh $r; } ||
		    { ((r % 2 == 1)) && br_dh $r && br_sh $r; }; then
			grep -v '^rate' "$D/sh.$r" >"$D/tmp"; sm=$(stats "$D/tmp" | cut -d' ' -f1)
			cat "$D/tmp" >>"$D/sh.lat"
			grep -v '^rate' "$D/dh.$r" >"$D/tmp"; dm=$(stats "$D/tmp" | cut -d' ' -f1)
			cat "$D/tmp" >>"$D/dh.lat"
			awk -v a="$sm" -v b="$dm" 'BEGIN { printf "%.1f\n", a - b }' >>"$D/h.added"
			say "  round $r, http upstream: median µs Sluice $sm, direct $dm"
		else
			note "bridge: round $r over the http upstream failed ($label), left out: $(head -c 200 "$D/sh.err" "$D/dh.err" 2>/dev/null)"
		fi
	done
	((ok > 0)) || { note "bridge: no complete round ($label)"; return 1; }
	((ok < 3)) && note "bridge: $label: $ok of 3 rounds complete"
	row memory "sluiced resident memory (VmRSS, all its processes), after the bridge load, $label" MiB \
	    "$(rss_mib "$BR_SPID")" - - - - - - "(reported)" none -
	local sn an smin smax am amin amax xm xmin xmax ym ymin ymax rm rmin rmax
	read -r sm _ smin smax sn < <(stats "$D/s.lat")
	read -r am _ amin amax an < <(stats "$D/d.lat")
	row bridge "tools/call latency, median, $label (n=$sn; direct n=$an)" µs \
	    "$sm" "$smin" "$smax" "server directly (stdio)" "$am" "$amin" "$amax" "(reported)" none -
	read -r xm _ xmin xmax _ < <(stats "$D/s.added")
	read -r ym _ ymin ymax _ < <(stats "$D/p.added")
	row bridge "tools/call added latency over direct, incl. the durable record, $label (median of $BR_ROUNDS rounds)" µs \
	    "$xm" "$xmin" "$xmax" "supergateway, added over direct" "$ym" "$ymin" "$ymax" "≤ 1,000 µs" s_le 1000
	read -r sm _ smin smax _ < <(stats "$D/s.rate")
	read -r am _ amin amax _ < <(stats "$D/p.rate")
	read -r rm _ rmin rmax _ < <(stats "$D/ratio")
	row bridge "tools/call per second, 1 session, sequential, $label" calls/s \
	    "$sm" "$smin" "$smax" "supergateway" "$am" "$amin" "$amax" "(reported)" none - "$rm" "$rmin" "$rmax"
	read -r am _ amin amax _ < <(stats "$D/d.rate")
	row bridge "tools/call per second vs the server directly, $label" calls/s \
	    "$sm" "$smin" "$smax" "server directly (stdio)" "$am" "$amin" "$amax" "(reported)" none -
	if [ -s "$D/h.added" ]; then
		read -r sm _ smin smax sn < <(stats "$D/sh.lat")
		read -r am _ amin amax an < <(stats "$D/dh.lat")
		row bridge "tools/call latency, median, Streamable HTTP upstream, $label (n=$sn; direct n=$an)" µs \
		    "$sm" "$smin" "$smax" "server directly (Streamable HTTP)" "$am" "$amin" "$amax" "(reported)" none -
		read -r xm _ xmin xmax _ < <(stats "$D/h.added")
		row bridge "tools/call added latency over the same server directly, both over Streamable HTTP, incl. the durable record, $label (median of $BR_ROUNDS rounds)" µs \
		    "$xm" "$xmin" "$xmax" - - - - "≤ 1,000 µs" s_le 1000
	fi
	return 0
}

# mcp_listens PORT: bounded wait (15 s) for an HTTP answer from
# $WORLD_MCP:PORT (any status: a GET without a session is refused).
mcp_listens() {
	local i
	for ((i = 0; i < 150; i++)); do
		world_host curl -s -m 1 -o /dev/null "http://$WORLD_MCP:$1/mcp" && return 0
		sleep 0.1
	done
	return 1
}

# cpu_ticks PID: utime + stime of PID so far, in clock ticks (0 when it
# is gone).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# bridge_conc LABEL: CR rounds of CS sessions calling at once (CN calls
# each after CW untimed) against the fast upstream (fast_mcp.mjs, answers
# from memory over Streamable HTTP): through Sluice from the sandbox,
# directly, and through supergateway (the same server over stdio behind
# it), order alternating; and the CPU the bridge process and the parent
# spent per call while Sluice's side ran (utime + stime from /proc over
# every tools/call of those runs, warm-up included; the sessions' own
# initialize and listing are counted in too, so it is an upper bound).
bridge_conc() {
	local label=$1 r x D=$W/conc BP t0b t0p t1b t1p calls=0 tb=0 tp=0
	local CS=32 CN=60 CW=5 CR=2 tck
	mkdir -p "$D"
	tck=$(getconf CLK_TCK)
	BP=$(pgrep -P "$BR_SPID" -f -- '--room bridge' | head -n 1)
	[ -n "$BP" ] || { note "bridge: no bridge process to measure"; return 1; }
	say "bridge, $label: $CR rounds of $CS sessions x $CN tools/call at once, fast upstream; Sluice, direct, supergateway"
	cs_s() {
		t0b=$(cpu_ticks "$BP"); t0p=$(cpu_ticks "$BR_SPID")
		world_sandbox "$BR_ID" "$NODE" "$B" --url "$BR_URL_F" --header \
		    "Authorization: Bearer $BR_TOK" --n $CN --warm $CW --secs 60 \
		    --sessions $CS >"$D/s.$1" 2>"$D/s.err" || return 1
		t1b=$(cpu_ticks "$BP"); t1p=$(cpu_ticks "$BR_SPID")
		tb=$((tb + t1b - t0b)); tp=$((tp + t1p - t0p))
		calls=$((calls + CS * (CN + CW)))
	}
	cs_d() {
		world_host "$NODE" "$B" --url "http://$WORLD_MCP:3103/mcp" \
		    --n $CN --warm $CW --secs 60 --sessions $CS >"$D/d.$1" 2>"$D/d.err"
	}
	cs_p() {
		[ -n "$SG" ] || return 0
		world_host "$NODE" "$B" --url "http://$WORLD_MCP:3104/mcp" \
		    --n $CN --warm $CW --secs 60 --sessions $CS >"$D/p.$1" 2>"$D/p.err" ||
		    { note "bridge: 32 sessions through supergateway failed: $(head -c 200 "$D/p.err")"; rm -f "$D/p.$1"; }
	}
	cs_d warm >/dev/null 2>&1; cs_s warm >/dev/null 2>&1 || true
	calls=0 tb=0 tp=0
	for ((r = 0; r < CR; r++)); do
		if ((r % 2 == 0)); then
			cs_s $r && cs_d $r && cs_p $r
		else
			cs_p $r && cs_d $r && cs_s $r
		fi || { note "bridge: concurrency round $r failed: $(head -c 200 "$D/s.err" "$D/d.err" 2>/dev/null)"; continue; }
		for x in s d p; do
			[ -f "$D/$x.$r" ] || continue
			awk '/^rate/ { print $2 }' "$D/$x.$r" >>"$D/$x.rate"
			grep -v '^rate' "$D/$x.$r" >>"$D/$x.lat"
		done
		[ -f "$D/p.$r" ] && awk -v a="$(tail -n 1 "$D/s.rate")" -v b="$(tail -n 1 "$D/p.rate")" \
		    'BEGIN { if (b > 0) printf "%.4f\n", a / b }' >>"$D/ratio"
		say "  round $r: calls/s Sluice $(tail -n 1 "$D/s.rate"), direct $(tail -n 1 "$D/d.rate"), supergateway $([ -f "$D/p.$r" ] && tail -n 1 "$D/p.rate" || echo -)"
	done
	[ -s "$D/s.rate" ] || { note "bridge: no complete concurrency round"; return 1; }
	local sm smin smax am amin amax rm rmin rmax sn an
	read -r sm _ smin smax _ < <(stats "$D/s.rate")
	read -r am _ amin amax _ < <(stats "$D/p.rate")
	read -r rm _ rmin rmax _ < <(stats "$D/ratio")
	row bridge "tools/call per second, $CS sessions calling at once, fast Streamable HTTP upstream, $label" calls/s \
	    "$sm" "$smin" "$smax" "supergateway (the same server over stdio)" "$am" "$amin" "$amax" "≥ 3× supergateway" ratio_ge 3 "$rm" "$rmin" "$rmax"
	read -r am _ amin amax _ < <(stats "$D/d.rate")
	row bridge "tools/call per second, $CS sessions at once, vs the fast server directly, $label" calls/s \
	    "$sm" "$smin" "$smax" "server directly (Streamable HTTP)" "$am" "$amin" "$amax" "(reported)" none -
	read -r sm _ _ _ sn < <(stats "$D/s.lat")
	read -r am _ _ _ an < <(stats "$D/d.lat")
	local pm=- pn=0
	[ -s "$D/p.lat" ] && read -r pm _ _ _ pn < <(stats "$D/p.lat")
	row bridge "tools/call latency under $CS sessions, median, fast upstream, $label (n=$sn; direct n=$an)" µs \
	    "$sm" - - "supergateway (n=$pn)" "$pm" - - "(reported)" none -
	if ((calls > 0)); then
		row bridge "bridge process CPU per tools/call ($CS sessions, fast upstream, utime+stime over $calls calls), $label" µs \
		    "$(awk -v t="$tb" -v k="$tck" -v n="$calls" 'BEGIN { printf "%.1f", t / k * 1e6 / n }')" - - - - - - "≤ 150 µs" s_le 150
		row bridge "sluiced parent CPU per tools/call (the same calls: records, acknowledgements), $label" µs \
		    "$(awk -v t="$tp" -v k="$tck" -v n="$calls" 'BEGIN { printf "%.1f", t / k * 1e6 / n }')" - - - - - - "(reported)" none -
	fi
	return 0
}

sec_bridge() {
	local W=$BENCH_WORK/bridge r out n=300 warm=100 BR_ROUNDS=4
	local E2E=$top/tests/e2e EVERYTHING NODE SG='' B
	mkdir -p "$W"
	NODE=$(command -v node) || { not_yet "node missing"; return 0; }
	EVERYTHING=$(readlink -f "$E2E/node_modules/.bin/mcp-server-everything" 2>/dev/null)
	[ -n "$EVERYTHING" ] && [ -e "$EVERYTHING" ] ||
	    { not_yet "server-everything not installed (tests/deps.sh)"; return 0; }
	export E2E_NODE_MODULES=$E2E/node_modules
	# The anchor proxy, into this run's work directory only.
	if command -v npm >/dev/null &&
	    timeout 90 npm install --prefix "$W/npm" --no-audit --no-fund \
	    --silent supergateway@4 >"$W/npm.log" 2>&1 &&
	    [ -x "$W/npm/node_modules/.bin/supergateway" ]; then
		SG=$W/npm/node_modules/.bin/supergateway
		say "bridge: supergateway $(cd "$W/npm" && npm ls supergateway 2>/dev/null | grep -o 'supergateway@[0-9.]*') installed in the work directory"
	else
		note "bridge: supergateway could not be installed from npm ($(tail -c 150 "$W/npm.log" 2>/dev/null)); no proxy anchor"
	fi

	local POL CFG
	bench_world bridge || return 1
	cat >"$POL/mcpbench.yaml" <<-'EOF'
	version: 1
	name: mcpbench
	mcp:
	  tools:
	    - tool: ev/echo
	      decision: allow
	      args:
	        message: {type: string, max_length: 40}
	      required: [message]
	    - tool: evh/echo
	      decision: allow
	      args:
	        message: {type: string, max_length: 40}
	      required: [message]
	    - tool: fast/echo
	      decision: allow
	      args:
	        message: {type: string, max_length: 40}
	      required: [message]
	EOF
	cat >>"$CFG" <<-EOF
	servers:
	  - name: ev
	    transport: stdio
	    command: [$NODE, $EVERYTHING, stdio]
	    env: {PATH: /usr/local/bin:/usr/bin:/bin}
	  - name: evh
	    transport: http
	    url: http://$WORLD_MCP:3102/mcp
	  - name: fast
	    transport: http
	    url: http://$WORLD_MCP:3103/mcp
	EOF
	# The fast upstream of the concurrency rows, and supergateway in
	# front of the same server over stdio.
	local FAST=$top/tests/bench/fast_mcp.mjs i
	bg_ns w-inet "$W/fast.log" "$NODE" "$FAST" --http "$WORLD_MCP:3103"
	if [ -n "$SG" ]; then
		bg_ns w-inet "$W/sgf.log" "$NODE" "$SG" --stdio "$NODE $FAST --stdio" \
		    --outputTransport streamableHttp --port 3104 --stateful \
		    --logLevel none
	fi
	mcp_listens 3103
	# The same server over Streamable HTTP in inet, for the http rows.
	local BR_URL_H=
	if world_mcp_http_start 3102 2>"$W/mcph.err"; then
		BR_URL_H=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/evh
	else
		note "bridge: server-everything over Streamable HTTP did not start: $(head -c 200 "$W/mcph.err"); no http rows"
	fi
	world_start_sluiced "$CFG" 2>"$W/start.err" ||
	    { note "bridge: sluiced did not start: $(tail -c 200 "$W/start.err")"; return 1; }
	local SPID=$_WORLD_SLUICED_PID i
	for ((i = 0; i < 100; i++)); do
		world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'" && break
		sleep 0.1
	done
	local ID=$BENCH_TAG-mcp TOK
	TOK=$(world_host "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy mcpbench \
	    --subject bench --id "$ID" 2>"$W/create.err" | jq -r .token)
	[[ $TOK =~ ^[0-9a-f]{64}$ ]] ||
	    { note "bridge: sandbox create failed: $(head -c 200 "$W/create.err")"; return 1; }
	local URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/ev
	# The proxy in inet, the client in the host namespace: one veth
	# between client and proxy, as between sandbox and sluiced.
	if [ -n "$SG" ]; then
		bg_ns w-inet "$W/sg.log" "$NODE" "$SG" --stdio "$NODE $EVERYTHING stdio" \
		    --outputTransport streamableHttp --port 3101 --stateful \
		    --logLevel none
		mcp_listens 3101
	fi
	B=$top/tests/bench/bench_mcp.mjs
	BR_ID=$ID BR_TOK=$TOK BR_URL=$URL BR_SPID=$SPID
	BR_URL_F=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp/fast
	[ -n "$SG" ] && mcp_listens 3104
	bridge_conc "1 sandbox" || true
	at_1_and_1000 bridge mcpbench bridge_rounds "$W/mass"
}

# ======================================================= section: audit

sec_audit() {
	local W=$BENCH_WORK/audit r d out
	[ -x "$BIN/bench_audit" ] || { not_yet "bench_audit not built (audit/ writer and verify missing?)"; return 1; }
	mkdir -p "$W"
	for ((r = 0; r < BENCH_AUDIT_REPS; r++)); do
		# On the real disk (the work directory is under /var/tmp):
		# durability on tmpfs would measure nothing.
		d=$W/run$r
		mkdir -p "$d"
		say "audit: run $((r + 1))/$BENCH_AUDIT_REPS"
		if ! out=$("$BIN/bench_audit" "$d" 200000 8 200 2>&1); then
			note "audit: bench_audit failed: $(printf '%s\n' "$out" | grep -v lat | tail -n 3)"
			return 1
		fi
		printf '%s\n' "$out" | awk '/^durable_rate/ { print $2 }' >>"$W/rate"
		printf '%s\n' "$out" | awk '/^verify_rate/ { print $2 }' >>"$W/verify"
		printf '%s\n' "$out" | awk '/^naive_rate/ { print $2 }' >>"$W/naive"
		printf '%s\n' "$out" | awk '/^lat / { print $2 }' >>"$W/lat"
		printf '%s\n' "$out" | awk '/^naive_lat / { print $2 }' >>"$W/naive_lat"
		printf '%s\n' "$out" | grep -E '^(durable|verify|naive)_rate' | sed 's/^/  /'
		[ $r -eq 0 ] && printf '%s\n' "$out" | grep -q '^verify_warnings' &&
		    note "audit: aud_verify reported warnings (not tampering): $(printf '%s\n' "$out" | sed -n 's/^verify_warnings //p' | head -c 300)"
		rm -rf "$d"
	done
	read -r sm _ smin smax _ < <(stats "$W/rate")
	read -r am _ amin amax _ < <(stats "$W/naive")
	row audit "Durable records/s (group commit)" rec/s "$sm" "$smin" "$smax" \
	    "SQLite, 1 commit/record" "$am" "$amin" "$amax" "≥ 50,000/s" s_ge 50000
	read -r sm _ smin smax _ < <(stats "$W/verify")
	row audit "Verification, records/s" rec/s "$sm" "$smin" "$smax" \
	    - - - - "≥ 500,000/s" s_ge 500000
	read -r sm sp smin smax sn < <(stats "$W/lat")
	read -r am ap amin amax _ < <(stats "$W/naive_lat")
	row audit "Durable record latency, median (n=$sn)" µs "$sm" "$smin" "$smax" \
	    "SQLite, 1 commit/record" "$am" "$amin" "$amax" "(reported)" none -
	row audit "Durable record latency, p99" µs "$sp" - - \
	    "SQLite, 1 commit/record" "$ap" - - "(reported)" none -
	return 0
}

# ====================================================== section: memory

# rss_mib PID: resident memory in MiB (VmRSS) of sluiced PID and of the
# processes it runs in its rooms (the DNS process: `--room` in their
# command line; stdio MCP servers are not Sluice's), or nothing.
rss_mib() {
	local p all=$1
	for p in $(pgrep -P "$1" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--room ' &&
		    all="$all $p"
	done
	for p in $all; do cat "/proc/$p/status" 2>/dev/null; done |
	    awk '/^VmRSS:/ { kb += $2; n++ } END { if (n) printf "%.1f", kb / 1024 }'
}

# pss_mib PID: the proportional set size in MiB (Pss) of sluiced PID and
# of every process of its rooms (children with `--room`, and theirs: the
# bridge's stdio starter; not the MCP servers). Summed RSS counts each
# shared page (libc, libcrypto, the image the children share) once per
# process; Pss divides it among them, so the sum is the memory the
# processes take together.
pss_mib() {
	local p c all=$1
	for p in $(pgrep -P "$1" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--room ' ||
		    continue
		all="$all $p"
		for c in $(pgrep -P "$p" 2>/dev/null); do
			tr '\0' ' ' <"/proc/$c/cmdline" 2>/dev/null |
			    grep -q -- '--room ' && all="$all $c"
		done
	done
	for p in $all; do cat "/proc/$p/smaps_rollup" 2>/dev/null; done |
	    awk '/^Pss:/ { kb += $2; n++ } END { if (n) printf "%.1f", kb / 1024 }'
}

# sec_memory: sluiced's resident memory idle and with 1,000 idle sandboxes
# (target: <= 40 MiB for all of sluiced's processes; sandboxes made
# within 55 s). sluiced runs in
# this run's own namespace $BENCH_TAG-m with a private state/run directory;
# its sandboxes are named $BENCH_TAG-<n> (pins sluice-$BENCH_TAG-<n>,
# swept at the end).
sec_memory() {
	local W=$BENCH_WORK/memory sluiced=$top/$BENCH_BUILD/sluiced
	local cli=$top/$BENCH_BUILD/sluice pid i n out rss pss sock st
	[ -x "$sluiced" ] && [ -x "$cli" ] ||
	    { not_yet "no $BENCH_BUILD/sluiced or sluice (make all)"; return 0; }
	mkdir -p "$W/state" "$W/run" "$W/pol"
	cp examples/policies/*.yaml "$W/pol/" 2>/dev/null ||
	    printf 'version: 1\nname: locked-down\n' >"$W/pol/locked-down.yaml"
	sock=$W/run/sluice.sock
	cat >"$W/sluice.yaml" <<-EOF
	version: 1
	state_dir: $W/state
	run_dir: $W/run
	socket: $sock
	policy_dir: $W/pol
	network:
	  pool: 10.231.0.0/16
	  service_address: $BENCH_SERVICE
	  ipv6: false
	  treat_as_public:
	    - 192.0.2.0/24
	    - 198.51.100.0/24
	    - 203.0.113.0/24
	dns:
	  upstreams:
	    - 192.0.2.53
	audit:
	  db: $W/state/audit.db
	  origin: bench.sluice.test/$BENCH_TAG
	servers:
	  - name: everything
	    transport: http
	    url: http://192.0.2.30/mcp
	  - name: files
	    transport: stdio
	    command: [/bin/true]
	  - name: warehouse
	    transport: http
	    url: http://192.0.2.31/mcp
	EOF
	ip netns add "$BENCH_TAG-m" || return 1
	in_ns m ip link set lo up
	bg_ns m "$W/sluiced.log" "$sluiced" --config "$W/sluice.yaml" \
	    --foreground
	pid=$BG_PID
	for ((i = 0; i < 100; i++)); do
		"$cli" -s "$sock" status >/dev/null 2>&1 && break
		# A zombie still answers kill -0: look at its state.
		[ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = S ] ||
		    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" = R ] ||
		    break
		sleep 0.1
	done
	if ! "$cli" -s "$sock" status >/dev/null 2>&1; then
		not_yet "sluiced did not start in the benchmark namespace: $(tail -n 2 "$W/sluiced.log" | tr '\n' ' ' | head -c 200)"
		return 0
	fi
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sluiced ] ||
	    { note "memory: pid $pid is not sluiced"; return 1; }
	sleep 1
	rss=$(rss_mib $pid)
	row memory "sluiced resident memory (VmRSS, all its processes), idle" MiB "$rss" - - \
	    - - - - "(reported)" none -
	say "memory: idle RSS $rss MiB"

	if ! out=$("$cli" -s "$sock" sandbox create --policy locked-down \
	    --id "$BENCH_TAG-0" 2>&1); then
		not_yet "RSS with 1,000 sandboxes: \`sluice sandbox create\` failed: $(printf '%s' "$out" | head -n 1 | head -c 200)"
		return 0
	fi
	sleep 1
	rss=$(rss_mib $pid)
	row memory "sluiced resident memory (VmRSS, all its processes), 1 idle sandbox" MiB \
	    "$rss" - - - - - - "(reported)" none -
	say "memory: RSS with 1 sandbox $rss MiB"
	# The other 999 through the control API (mass_create), bounded in
	# time; RSS at whatever count was reached (the row says which, and
	# claims the target only at 1,000).
	st=$SECONDS
	n=$(mass_create "$sock" locked-down "$BENCH_TAG-" 1 999 55 "$W/create")
	say "memory: $n sandboxes after $((SECONDS - st)) s"
	sleep 1
	rss=$(rss_mib $pid)
	pss=$(pss_mib $pid)
	if ((n >= 1000)); then
		row memory "sluiced resident memory (VmRSS summed over its processes, shared pages counted in each), 1,000 idle sandboxes" \
		    MiB "$rss" - - - - - - "(reported)" none -
		row memory "sluiced memory of all its processes together (Pss summed), 1,000 idle sandboxes" \
		    MiB "$pss" - - - - - - "≤ 40 MiB" s_le 40
	else
		row memory "sluiced resident memory (VmRSS, all its processes), $n idle sandboxes (1,000 not reached)" \
		    MiB "$rss" - - - - - - "≤ 40 MiB at 1,000" none -
		note "memory: only $n sandboxes were created within the time limit"
	fi
	say "memory: RSS with $n sandboxes $rss MiB (summed), Pss ${pss:-?} MiB"
	return 0
}

# ======================================================== section: srt

# sec_srt: the same HTTP object (1 MiB, from the e2e world's web server
# web.example.org = 203.0.113.80 in inet) fetched with curl from a Sluice
# sandbox (policy: that name, port 80) and from inside
# @anthropic-ai/sandbox-runtime (srt, npm, pinned SRT_VERSION; bubblewrap
# for the sandbox, its HTTP proxy on the host side allowing the same name).
# Both run in the world's host namespace, so the two paths cross the same
# veth to inet; srt's proxy resolves through the world's resolver
# (/etc/netns/<host ns>/resolv.conf, which `ip netns exec` applies).
# Three rounds of SRT_N fetches per side, alternating; each fetch is
# checked (HTTP 200, the full size). When srt cannot run here the Sluice
# row stands alone and a note says why.
SRT_VERSION=0.0.83
sec_srt() {
	local W=$BENCH_WORK/srt N=20 r SRT='' out i
	mkdir -p "$W/tmp" "$W/cwd"
	# What srt needs on Linux (its README): bubblewrap, socat, ripgrep.
	if ! command -v bwrap >/dev/null || ! command -v socat >/dev/null ||
	    ! command -v rg >/dev/null; then
		# A fresh machine may have no package lists yet: update once
		# when the first try fails.
		{ DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -q \
		    bubblewrap socat ripgrep >"$W/apt.log" 2>&1 ||
		  { timeout 120 apt-get update -q >>"$W/apt.log" 2>&1 &&
		    DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -q \
		    bubblewrap socat ripgrep >>"$W/apt.log" 2>&1; }; } ||
		    note "srt: apt-get install bubblewrap socat ripgrep failed: $(tail -c 150 "$W/apt.log")"
	fi
	if command -v npm >/dev/null && command -v bwrap >/dev/null &&
	    timeout 120 npm install --prefix "$W/npm" --no-audit --no-fund \
	    --silent "@anthropic-ai/sandbox-runtime@$SRT_VERSION" >"$W/npm.log" 2>&1 &&
	    [ -x "$W/npm/node_modules/.bin/srt" ]; then
		SRT=$W/npm/node_modules/.bin/srt
		say "srt: @anthropic-ai/sandbox-runtime@$SRT_VERSION installed in the work directory (node $(node --version))"
	else
		note "srt: @anthropic-ai/sandbox-runtime@$SRT_VERSION (or bubblewrap) could not be installed: $(tail -c 150 "$W/npm.log" 2>/dev/null)"
	fi

	local POL CFG
	bench_world srt || return 1
	trap 'world_fast_down; _run_cleanup; rm -rf "/etc/netns/$WORLD_HOST_NS"; sweep' EXIT
	local OBJ=$WORLD_DIR/www/web/obj.bin size=1048576
	head -c $size /dev/urandom >"$OBJ" || return 1
	cat >"$POL/srtbench.yaml" <<-'EOF'
	version: 1
	name: srtbench
	egress:
	  allow:
	    - host: web.example.org
	      ports: [80]
	EOF
	world_start_sluiced "$CFG" 2>"$W/start.err" ||
	    { note "srt: sluiced did not start: $(tail -c 200 "$W/start.err")"; return 1; }
	local ID=$BENCH_TAG-srt
	world_host "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy srtbench \
	    --id "$ID" >/dev/null 2>"$W/create.err" ||
	    { note "srt: sandbox create failed: $(head -c 200 "$W/create.err")"; return 1; }
	# The fetch loop, the same on both sides: N fetches, one line each
	# ("code size seconds").
	local LOOP="for i in \$(seq $N); do curl -sS -o /dev/null -m 10 -w '%{http_code} %{size_download} %{time_total}\n' http://web.example.org/obj.bin; done"
	# srt's side: its settings allow the same name; it runs in the host
	# namespace with the world's resolver; its temporary files go to the
	# work directory (TMPDIR), its placeholders to its own cwd.
	mkdir -p "/etc/netns/$WORLD_HOST_NS"
	echo "nameserver $WORLD_DNS" >"/etc/netns/$WORLD_HOST_NS/resolv.conf"
	cat >"$W/settings.json" <<-EOF
	{"network": {"allowedDomains": ["web.example.org"], "deniedDomains": []},
	 "filesystem": {"denyRead": [], "allowWrite": ["$W/cwd"], "denyWrite": []}}
	EOF
	srt_run() {
		# bwrap binds the whole mount tree; a mount that another process
		# removes meanwhile makes it fail: a few tries.
		for _ in 1 2 3; do
			(cd "$W/cwd" && TMPDIR=$W/tmp timeout 120 ip netns exec \
			    "$WORLD_HOST_NS" "$SRT" -s "$W/settings.json" -c "$LOOP") \
			    >"$1" 2>"$1.err"
			grep -q "Can't bind mount" "$1.err" || return 0
		done
	}
	say "srt: 3 rounds of $N fetches of a 1 MiB object per side, alternating"
	for ((r = 0; r < 3; r++)); do
		ip netns exec "sluice-$ID" sh -c "$LOOP" >"$W/s.$r" 2>&1
		awk -v n=$size '$1 == 200 && $2 == n { print $3 * 1e6 }' "$W/s.$r" >>"$W/s.us"
		[ -n "$SRT" ] || continue
		srt_run "$W/p.$r"
		awk -v n=$size '$1 == 200 && $2 == n { print $3 * 1e6 }' "$W/p.$r" >>"$W/p.us"
		say "  round $r: complete fetches Sluice $(awk -v n=$size '$1 == 200 && $2 == n' "$W/s.$r" | wc -l)/$N, srt $(awk -v n=$size '$1 == 200 && $2 == n' "$W/p.$r" | wc -l)/$N"
	done
	local sm smin smax sn am amin amax an
	read -r sm _ smin smax sn < <(stats "$W/s.us")
	((sn == 3 * N)) || note "srt: only $sn of $((3 * N)) fetches through Sluice were complete: $(grep -v '^200 ' "$W"/s.* | head -n 1)"
	read -r am _ amin amax an < <(stats "$W/p.us")
	if [ -n "$SRT" ] && ((an == 0)); then
		note "srt: @anthropic-ai/sandbox-runtime@$SRT_VERSION was installed and started here, but no fetch through it completed (first result \"$(head -n 1 "$W/p.0" 2>/dev/null | cut -c1-40)\", stderr \"$(grep -hv '^\[SandboxDebug\]' "$W"/p.*.err 2>/dev/null | sort | uniq -c | sort -rn | head -n 2 | tr -s ' \n' ' ' | cut -c1-200)\"): no srt figures in this run"
		am=- amin=- amax=-
	elif [ -n "$SRT" ] && ((an < 3 * N)); then
		note "srt: only $an of $((3 * N)) fetches through srt were complete"
	fi
	[ -z "$SRT" ] && { am=- amin=- amax=-; }
	row srt "HTTP GET of a 1 MiB object (curl), median time (n=$sn; srt n=${an:-0})" ms \
	    "$(ms "$sm")" "$(ms "$smin")" "$(ms "$smax")" \
	    "@anthropic-ai/sandbox-runtime $SRT_VERSION (its proxy)" \
	    "$(ms "$am")" "$(ms "$amin")" "$(ms "$amax")" "(reported)" none -
	return 0
}

# limits: what ending a sandbox's processes and holding a command to its
# resources cost. `sandbox rm` of a sandbox with 100 idle processes in its
# namespace (the answer comes after the scan, the record and SIGTERM; the
# grace runs on the daemon's timers), and `sluice run -- true` with a
# policy that sets pids, memory and cpu against one that sets none,
# alternating (the difference is the cgroups made, joined and removed).
sec_limits() {
	local W=$BENCH_WORK/limits N=11 r ID t0 t1 ino
	mkdir -p "$W"
	local POL CFG
	bench_world limits || return 1
	printf 'version: 1\nname: free\n' >"$POL/free.yaml"
	printf 'version: 1\nname: held\nresources:\n  pids: 256\n  memory: 256MiB\n  cpu: 1\n' >"$POL/held.yaml"
	world_start_sluiced "$CFG" 2>"$W/start.err" ||
	    { note "limits: sluiced did not start: $(tail -c 200 "$W/start.err")"; return 1; }
	sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
	say "limits: $N removals of a sandbox with 100 idle processes, and of one with none, alternating"
	for ((r = 0; r < N; r++)); do
		ID=$BENCH_TAG-e$r
		if sl sandbox create --policy free --id "$ID" >/dev/null 2>&1; then
			t0=$(date +%s%N)
			sl sandbox rm "$ID" >/dev/null 2>&1 &&
			    { t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )) >>"$W/rm0.us"; }
		fi
		ID=$BENCH_TAG-l$r
		sl sandbox create --policy free --id "$ID" >/dev/null 2>&1 || continue
		ino=$(stat -L -c %i "/run/netns/sluice-$ID")
		setsid nsenter --net="/run/netns/sluice-$ID" -- sh -c \
		    'i=0; while [ $i -lt 99 ]; do sleep 1000 & i=$((i + 1)); done; exec sleep 1000' \
		    </dev/null >/dev/null 2>&1 &
		for _ in $(seq 100); do
			[ "$(find /proc/[0-9]*/ns/net -maxdepth 0 -lname "net:\[$ino\]" 2>/dev/null | wc -l)" -ge 100 ] && break
			sleep 0.1
		done
		t0=$(date +%s%N)
		sl sandbox rm "$ID" >/dev/null 2>&1 || continue
		t1=$(date +%s%N)
		echo $(( (t1 - t0) / 1000 )) >>"$W/rm.us"
		for _ in $(seq 100); do
			[ -z "$(find /proc/[0-9]*/ns/net -maxdepth 0 -lname "net:\[$ino\]" 2>/dev/null)" ] && break
			sleep 0.1
		done
	done
	local m mn mx n am amn amx an
	read -r m _ mn mx n < <(stats "$W/rm.us")
	read -r am _ amn amx an < <(stats "$W/rm0.us")
	row limits "sandbox rm with 100 idle processes inside, median (n=$n)" ms \
	    "$(ms "$m")" "$(ms "$mn")" "$(ms "$mx")" "sandbox rm with none (n=$an)" \
	    "$(ms "$am")" "$(ms "$amn")" "$(ms "$amx")" "≤ 50 ms" s_le 50
	say "limits: $N pairs of sluice run -- true, with limits and without, alternating"
	for ((r = 0; r < N; r++)); do
		t0=$(date +%s%N); sl run --policy held -- true >/dev/null 2>&1 && \
		    { t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )) >>"$W/held.us"; }
		t0=$(date +%s%N); sl run --policy free -- true >/dev/null 2>&1 && \
		    { t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )) >>"$W/free.us"; }
	done
	read -r m _ mn mx n < <(stats "$W/held.us")
	read -r am _ amn amx an < <(stats "$W/free.us")
	row limits "sluice run -- true with pids, memory and cpu limits, median (n=$n)" ms \
	    "$(ms "$m")" "$(ms "$mn")" "$(ms "$mx")" "the same without limits (n=$an)" \
	    "$(ms "$am")" "$(ms "$amn")" "$(ms "$amx")" "(reported)" none -
	return 0
}

# ============================================================ child mode

if [ "${1:-}" = --shell-round ]; then
	shell_round "$2" "$3" "$4"
	exit $?
fi

# The fleet section lives in a file of its own.
# shellcheck source=tests/bench/fleet.sh
. "$top/tests/bench/fleet.sh"

if [ "${1:-}" = --section ]; then
	SECTION=$2
	# The parent's sweep covers everything, but a section cleans up
	# after itself too so that the next one starts from nothing.
	trap 'sweep' EXIT
	trap 'exit 143' TERM INT
	"sec_$SECTION"
	exit $?
fi

# =========================================================== parent mode

build_tools() {
	local cflags libs f mods ok=0
	cflags="-O2 -g -std=c17 -D_GNU_SOURCE -Wall -Wextra -Werror -I$top"
	cflags="$cflags $(pkg-config --cflags libnftnl libmnl jansson libcrypto sqlite3)"
	libs="$(pkg-config --libs libnftnl libmnl ldns jansson yaml-0.1 libpcre2-8 libcrypto sqlite3 libcurl libmicrohttpd libpq) -lpthread -lm"
	mkdir -p "$BIN"
	for f in lifecycle:netns,policy fw:netns,policy connect: dns: audit:audit; do
		local name=${f%%:*} objs=() m
		mods=${f#*:}
		for m in ${mods//,/ }; do
			objs+=("$top/$BENCH_BUILD/obj/$m"/*.o)
			[ -e "${objs[-1]}" ] || { say "build: no $BENCH_BUILD/obj/$m/*.o (run make all)"; ok=1; continue 2; }
		done
		# shellcheck disable=SC2086
		if ! cc $cflags -o "$BIN/bench_$name" "tests/bench/bench_$name.c" \
		    "${objs[@]}" $libs 2>"$BIN/bench_$name.err"; then
			say "build: bench_$name failed:"; sed 's/^/  /' "$BIN/bench_$name.err" | head -n 20
			rm -f "$BIN/bench_$name"
			ok=1
		fi
	done
	# The fleet's reservation loop: two objects of gateway/fleet and libpq.
	if pkg-config --exists libpq && [ -e "$top/$BENCH_BUILD/obj/gateway/fleet/budget.o" ]; then
		# shellcheck disable=SC2086
		if ! cc $cflags $(pkg-config --cflags libpq) -o "$BIN/bench_fleet" \
		    tests/bench/bench_fleet.c "$top/$BENCH_BUILD/obj/gateway/fleet/pg.o" \
		    "$top/$BENCH_BUILD/obj/gateway/fleet/budget.o" \
		    $(pkg-config --libs libpq) -lsqlite3 2>"$BIN/bench_fleet.err"; then
			say "build: bench_fleet failed:"; sed 's/^/  /' "$BIN/bench_fleet.err" | head -n 20
			rm -f "$BIN/bench_fleet"
			ok=1
		fi
	else
		say "build: no libpq or no $BENCH_BUILD/obj/gateway/fleet (run make all): no bench_fleet"
	fi
	return $ok
}

machine() {
	local cpu mem os
	cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
	os=$(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
	say "- CPU: ${cpu:-unknown}, $(nproc) cores (nproc)"
	say "- Memory: $mem"
	say "- Kernel: $(uname -sr)"
	say "- OS: ${os:-unknown}"
	say "- Tools: $(iperf3 --version 2>/dev/null | head -n 1 | cut -d' ' -f1-2), $(nft --version 2>/dev/null), $(ip -V 2>/dev/null | grep -o 'iproute2-[0-9.]*'), SQLite $(pkg-config --modversion sqlite3)"
}

# render: the Markdown table from rows.tsv.
render() {
	awk -F'\t' '
	function f(v) {
		if (v == "-" || v == "") return "-"
		v += 0
		if (v >= 1000) {
			t = sprintf("%.0f", v); g = ""
			while (length(t) > 3) {
				g = "," substr(t, length(t) - 2) g
				t = substr(t, 1, length(t) - 3)
			}
			return t g
		}
		if (v >= 100) return sprintf("%.0f", v)
		if (v >= 10) return sprintf("%.1f", v)
		return sprintf("%.2f", v)
	}
	function cell(m, lo, hi, u) {
		if (m == "-" || m == "") return "-"
		s = f(m) " " u
		if (lo != "-" && lo != "") s = s " (" f(lo) "–" f(hi) ")"
		return s
	}
	BEGIN {
		print "| metric | Sluice, median (min–max) | anchor, median (min–max) | Sluice ÷ anchor | target | met? |"
		print "|---|---|---|---|---|---|"
	}
	{
		metric = $2; u = $3; sm = $4; am = $8; kind = $12; tv = $13
		an = ($7 == "-") ? "" : $7 ": "
		a = (am == "-") ? "-" : an cell(am, $9, $10, u)
		ratio = "-"; rv = ""
		if (NF >= 16 && $14 != "-" && $14 != "") {
			rv = $14 + 0
			ratio = sprintf("%.2f× (pairs %.2f–%.2f)", rv, $15, $16)
		} else if (sm != "-" && am != "-" && am + 0 > 0) {
			rv = (sm + 0) / (am + 0)
			ratio = sprintf("%.2f×", rv)
		}
		met = "-"
		if (kind == "s_le" || kind == "s_ge" || kind == "ratio_ge" || kind == "ratio_le") {
			if (sm == "-" || ((kind ~ /^ratio/) && rv == "")) met = "no data"
			else {
				x = (kind ~ /^ratio/) ? rv : sm + 0
				ok = (kind ~ /_le$/) ? (x <= tv + 0) : (x >= tv + 0)
				met = ok ? "yes" : "**NO — target missed**"
			}
		}
		printf "| %s | %s | %s | %s | %s | %s |\n", metric, cell(sm, $5, $6, u), a, ratio, $11, met
	}' "$BENCH_WORK/rows.tsv"
}

if [ "$(id -u)" -ne 0 ]; then
	say "make bench: needs root (network namespaces, nftables)"
	exit 1
fi
BENCH_WORK=$(mktemp -d /var/tmp/sluice-bench.XXXXXX) || exit 1
export BENCH_WORK
: >"$BENCH_WORK/rows.tsv"
: >"$BENCH_WORK/notes"
SECTION=main
finish() {
	sweep
	if [ "${BENCH_KEEP:-0}" = 1 ]; then
		say "bench: work directory kept: $BENCH_WORK"
	else
		rm -rf "$BENCH_WORK"
	fi
}
# Ctrl-C (or TERM) while a section runs: the section runs in the
# background under timeout (its own process group, so the terminal's
# SIGINT does not reach it), and `wait` returns at once on a trapped
# signal; pass TERM on (timeout relays it to the section's whole group),
# let the section's EXIT trap clean up, then sweep (finish).
SEC_PID=
on_signal() {
	trap '' INT TERM
	say ""
	say "bench: interrupted: stopping the running section and cleaning up"
	if [ -n "$SEC_PID" ]; then
		kill -TERM "$SEC_PID" 2>/dev/null
		wait "$SEC_PID" 2>/dev/null
	fi
	exit 130
}
trap 'finish' EXIT
trap 'on_signal' INT TERM

cmd="make bench"
[ -z "${MAKELEVEL:-}" ] && cmd="tests/bench/run.sh"
envs=$(env | grep -E '^BENCH_(REPS|CPS_REPS|AUDIT_REPS|LC_ITERS|IPERF_SECS|CPS_SECS|SECTIONS|ONLY|BUILD|BUDGET)=' | sort | tr '\n' ' ')
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t_start=$EPOCHREALTIME

say "== bench: building the bench programs"
build_tools || note "build: some bench programs did not build; their sections say so"

t_budget=$SECONDS
for s in $SECTIONS; do
	if ! declare -F "sec_$s" >/dev/null; then
		note "unknown section $s"
		continue
	fi
	lim=${LIMIT[$s]:-60}
	left=$((BUDGET - (SECONDS - t_budget)))
	((lim > left)) && lim=$left
	if ((lim < 5)); then
		note "$s: skipped, the run's time budget (${BUDGET} s) is spent"
		continue
	fi
	say "== bench: $s (limit $lim s)"
	st=$EPOCHREALTIME
	timeout -k 10 "$lim" "$SELF" --section "$s" &
	SEC_PID=$!
	wait "$SEC_PID"
	rc=$?
	SEC_PID=
	if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
		note "$s: stopped at its time limit ($lim s); rows measured before that are kept"
	elif [ $rc -ne 0 ]; then
		note "$s: failed (exit $rc); rows measured before the failure are kept"
	fi
	sweep
	say "== bench: $s done in $(fmt_secs "$st" "$EPOCHREALTIME") s"
done

total=$(fmt_secs "$t_start" "$EPOCHREALTIME")
{
	say "# Sluice benchmark results"
	say ""
	say "Written by \`tests/bench/run.sh\`; do not edit by hand (see README.md"
	say "beside this file for what each line measures and how to read it)."
	say ""
	say "- Command: \`${envs}${cmd}\` (run as root at the top of the repository)"
	say "- Started: $started; the benchmarks took ${total} s"
	say "- Repetitions: data path $BENCH_REPS iperf3 pairs (${BENCH_IPERF_SECS} s each after 1 s"
	say "  warm-up) and $BENCH_CPS_REPS connection-rate pairs (${BENCH_CPS_SECS} s each) per scale,"
	say "  alternating order; lifecycle up to $BENCH_LC_ITERS create+delete per side in"
	say "  4 alternating rounds (bounded in time); audit $BENCH_AUDIT_REPS runs"
	say ""
	say "## Machine"
	say ""
	machine
	say ""
	say "## Results"
	say ""
	say "Sluice ÷ anchor: above 1 means Sluice is higher (good for rates, bad"
	say "for times). Data-path rows give the median of the per-pair ratios"
	say "(each filtered run against the unfiltered run next to it) and their range."
	say ""
	render
	say ""
	if [ -s "$BENCH_WORK/notes" ]; then
		say "## Not measured yet, and notes"
		say ""
		sed 's/^/- /' "$BENCH_WORK/notes"
	fi
} >"$BENCH_WORK/RESULTS.md"
cp "$BENCH_WORK/RESULTS.md" "$RESULTS"
# A full run also remakes the README's performance table from it.
if [ "$RESULTS" = "$top/tests/bench/RESULTS.md" ]; then
	python3 "$top/tests/bench/readme_table.py" "$RESULTS" "$top/README.md" ||
	    say "bench: README.md's table was not remade (readme_table.py failed)"
fi
say ""
cat "$RESULTS"
