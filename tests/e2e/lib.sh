# tests/e2e/lib.sh: assertions and cleanup for the end-to-end scenarios.
#
# A scenario is tests/e2e/t_*.sh, run as root by tests/run.sh with bash. It
# sources this file, registers everything it makes with `cleanup_push` (or
# uses world.sh, which does), and reports each assertion as one TAP-style line:
# "ok - text" or "not ok - text". tests/run.sh counts those lines.
#
# Rules (DEVELOPERS.md, network safety): traffic only inside namespaces the
# scenario made, documentation addresses for fake hosts, every loop bounded,
# and everything removed on exit, also on failure (the EXIT trap below).

set -u
E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOP=$(cd "$E2E_DIR/../.." && pwd)
# The binaries under test: tests/run.sh exports SLUICE_BUILD (ASan build).
SLUICE_BUILD=${SLUICE_BUILD:-$TOP/build/asan}
SLUICED=$SLUICE_BUILD/sluiced
SLUICE=$SLUICE_BUILD/sluice
E2E_FAILS=0
E2E_TMP=$(mktemp -d /tmp/sluice-e2e.XXXXXX)
# Traversable (not listable) by the bridge's user, whose stdio MCP servers
# read and write files the scenarios put here.
chmod 0711 "$E2E_TMP"
_CLEANUP=()

# cleanup_push CMD...: run CMD (as one eval'd string) at exit, last in first out.
cleanup_push() { _CLEANUP+=("$*"); }

_run_cleanup() {
	local i
	for ((i = ${#_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${_CLEANUP[$i]}" >/dev/null 2>&1 || true
	done
	_CLEANUP=()
	rm -rf "$E2E_TMP"
}
trap '_run_cleanup' EXIT
trap 'exit 130' INT TERM

# sluice_cgroups_sweep: the sandbox cgroups named in the sluiced log on
# stdin ("sandbox groups in DIR"), left by a daemon that was killed or
# stopped with sandboxes in place: their members killed, the groups and
# the base removed. Only a directory named as sluiced names them
# (.../sluice-<8 hex>) is touched.
sluice_cgroups_sweep() {
	local base g p
	for base in $(sed -n 's/.*cgroups: v[12], sandbox groups in \(\/sys\/fs\/cgroup\/.*\/sluice-[0-9a-f]\{8\}\)$/\1/p' | sort -u); do
		[ -d "$base" ] || continue
		for g in "$base"/*/; do
			[ -f "$g/cgroup.procs" ] || continue
			for p in $(cat "$g/cgroup.procs" 2>/dev/null); do
				kill -KILL "$p" 2>/dev/null
			done
			wait_for 5 rmdir "$g"
		done
		rmdir "$base" 2>/dev/null
	done
	return 0
}

ok()     { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; E2E_FAILS=$((E2E_FAILS + 1)); }

# check TEXT CMD...: ok if CMD exits 0.
check() {
	local text=$1; shift
	if "$@" >"$E2E_TMP/last.out" 2>&1; then ok "$text"; else
		not_ok "$text"; sed 's/^/#   /' "$E2E_TMP/last.out" | head -n 20
	fi
}

# check_fails TEXT CMD...: ok if CMD exits non-zero.
check_fails() {
	local text=$1; shift
	if "$@" >"$E2E_TMP/last.out" 2>&1; then
		not_ok "$text (unexpectedly succeeded)"; sed 's/^/#   /' "$E2E_TMP/last.out" | head -n 20
	else ok "$text"; fi
}

# check_eq TEXT EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (expected '$2', got '$3')"; fi
}

# check_match TEXT REGEX STRING
check_match() {
	if printf '%s' "$3" | grep -qE -- "$2"; then ok "$1"; else
		not_ok "$1 (no match for /$2/ in: $(printf '%s' "$3" | head -c 300))"; fi
}

# wait_for SECONDS CMD...: poll CMD every 0.1 s until it succeeds; bounded.
# proc_status PID FIELD: FIELD of /proc/PID/status (Uid, CapEff, Seccomp...).
proc_status() { awk -v k="$2:" '$1 == k { $1 = ""; sub(/^ /, ""); print; exit }' "/proc/$1/status"; }

wait_for() {
	local limit=$(( $1 * 10 )) i=0; shift
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -ge $limit ] && return 1
		sleep 0.1
	done
	return 0
}

# wait_until SECS CMD...: like wait_for, for a CMD that itself takes a
# while (reading a long audit log): the bound is SECS of the clock, not a
# count of tries.
wait_until() {
	local end=$(($(date +%s) + $1)); shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$end" ] && return 1
		sleep 0.5
	done
	return 0
}

# skip_unless_root: scenarios need root for namespaces and nftables.
require_root() {
	if [ "$(id -u)" -ne 0 ]; then echo "not ok - needs root"; exit 1; fi
}

# finish: exit status of the scenario.
finish() { [ "$E2E_FAILS" -eq 0 ]; exit $?; }
