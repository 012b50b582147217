#!/bin/bash
# Runs the unit suites (check) and the end-to-end scenarios, and ends with one
# line "N passed, N failed" that CI reads. Exit status is non-zero on any
# failure, including a suite that crashed or printed no result.
#
#   tests/run.sh unit|e2e|all BUILD_DIR
#
# Unit suites are the binaries BUILD_DIR/tests/check_*; Check's summary line
# ("NN%: Checks: C, Failures: F, Errors: E") gives the counts.
# End-to-end scenarios are tests/e2e/t_*.sh; each prints TAP-style lines
# "ok - ..." / "not ok - ..." (see tests/e2e/lib.sh) and exits non-zero on
# failure.
set -u
what=${1:-all}
B=${2:-build/asan}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

pass=0
fail=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export SLUICE_BUILD="$top/$B"
# The same daemon built without sanitizers, when it is there (make test
# builds it): some scenarios also run what operators run.
[ -x "$top/build/sluiced" ] && [ "$top/build" != "$SLUICE_BUILD" ] &&
    export SLUICE_PLAIN_BUILD="$top/build"

run_unit() {
	local t out rc line c f e
	for t in "$B"/tests/check_* "$B"/fuzz/fuzz_*; do
		[ -x "$t" ] || continue
		echo "== unit: $(basename "$t")"
		out=$(CK_FORK=yes timeout 600 "$t" 2>&1); rc=$?
		printf '%s\n' "$out" | grep -v '^Running suite' | grep -vE ':P:' || true
		line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: [0-9]+' | tail -n 1)
		if [ -z "$line" ]; then
			echo "FAIL $(basename "$t"): no result (exit $rc)"
			fail=$((fail + 1))
			continue
		fi
		c=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
		f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
		e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
		pass=$((pass + c - f - e))
		fail=$((fail + f + e))
		if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then
			echo "FAIL $(basename "$t"): exit $rc"
			fail=$((fail + 1))
		fi
	done
}

run_e2e() {
	local t out rc ok nok
	for t in tests/e2e/t_*.sh; do
		[ -f "$t" ] || continue
		echo "== e2e: $(basename "$t")"
		out=$(timeout 900 bash "$t" 2>&1); rc=$?
		printf '%s\n' "$out"
		ok=$(printf '%s\n' "$out" | grep -cE '^ok( |$)')
		nok=$(printf '%s\n' "$out" | grep -cE '^not ok( |$)')
		pass=$((pass + ok))
		fail=$((fail + nok))
		if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
			echo "not ok - $(basename "$t") exited $rc"
			fail=$((fail + 1))
		fi
	done
}

case "$what" in
unit) run_unit ;;
e2e) run_e2e ;;
all) run_unit; run_e2e ;;
*) echo "usage: tests/run.sh unit|e2e|all [BUILD_DIR]" >&2; exit 2 ;;
esac

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
