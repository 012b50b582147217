#!/bin/bash
# t_daemon.sh: the daemon and CLI skeleton as a user meets them. sluiced runs
# unprivileged-style from a temporary config (state, run and policy dirs
# under the scenario's temp dir; no namespaces, no network beyond the Unix
# socket), and we check: start-up refusals with FILE:LINE:COL, status and
# reload through `sluice`, a broken policy that reload and SIGHUP both refuse
# while the old set stays in force, the control API's JSON errors for hostile
# requests, /metrics, a second daemon refused, clean SIGTERM shutdown, and
# daemon mode with its pid file.
. "$(dirname "$0")/isolate.sh"
. "$(dirname "$0")/lib.sh"

T=$E2E_TMP
POL=$T/policies
SOCK=$T/run/ctl/sluice.sock
LOG=$T/sluiced.log
mkdir -p "$POL"

# The examples are the real policies users start from; if they are not in
# the tree yet, a minimal valid policy stands in.
if ls "$TOP"/examples/policies/*.yaml >/dev/null 2>&1; then
	cp "$TOP"/examples/policies/*.yaml "$POL"/
else
	printf 'version: 1\nname: minimal\n' >"$POL/minimal.yaml"
fi
NPOL=$(ls "$POL"/*.yaml | wc -l)

cat >"$T/sluice.yaml" <<EOF
version: 1
state_dir: $T/state
run_dir: $T/run
socket: $SOCK
policy_dir: $POL
dns:
  upstreams:
    - 192.0.2.53
servers:
  - name: everything
    transport: http
    url: http://192.0.2.10/mcp
  - name: files
    transport: stdio
    command: [/bin/true]
  - name: warehouse
    transport: http
    url: http://192.0.2.11/mcp
EOF

sl() { "$SLUICE" -s "$SOCK" "$@"; }
status_field() { sl status --json | jq -r "$1"; }
# api METHOD PATH [curl args...]: prints "CODE BODY".
api() {
	local m=$1 p=$2; shift 2
	curl -s --max-time 30 --unix-socket "$SOCK" -X "$m" \
	    -w '\n%{http_code}' "$@" "http://localhost$p" |
	    awk '{ a[NR] = $0 } END { printf "%s", a[NR]; for (i = 1; i < NR; i++) printf " %s", a[i]; print "" }'
}
alive() { sl status >/dev/null 2>&1; }
failures_are() { test "$(status_field .reload_failures 2>/dev/null)" = "$1"; }

# ---------------------------------------------------------------- CLI usage
out=$("$SLUICE" 2>&1); rc=$?
check_eq "sluice with no command exits 2" 2 "$rc"
check_match "sluice with no command prints usage" 'usage: sluice \[-s SOCKET\] COMMAND' "$out"
check_match "usage lists the whole CLI" 'sandbox create --policy NAME' "$out"
out=$("$SLUICE" frobnicate 2>&1); rc=$?
check_eq "unknown command exits 2" 2 "$rc"
check_match "unknown command is named" "unknown command 'frobnicate'" "$out"
"$SLUICE" -s 2>/dev/null; check_eq "-s without SOCKET exits 2" 2 "$?"
"$SLUICE" -x status 2>/dev/null; check_eq "unknown global option exits 2" 2 "$?"
"$SLUICE" status extra 2>/dev/null; check_eq "status with extra argument exits 2" 2 "$?"
"$SLUICE" status --bogus 2>/dev/null; check_eq "status with unknown option exits 2" 2 "$?"
"$SLUICE" reload now 2>/dev/null; check_eq "reload with an argument exits 2" 2 "$?"
"$SLUICE" help >/dev/null; check_eq "sluice help exits 0" 0 "$?"
out=$(SLUICE_SOCKET=$T/nothing.sock "$SLUICE" sandbox ls 2>&1); rc=$?
check_eq "sandbox ls without a daemon exits 1" 1 "$rc"
check_match "and says why" "cannot connect to sluiced" "$out"
out=$("$SLUICE" policy 2>&1); rc=$?
check_eq "policy group is dispatched (its usage, exit 2)" 2 "$rc"
check_match "policy usage comes from the policy group" "usage: sluice policy" "$out"
out=$("$SLUICE" audit 2>&1); rc=$?
check_eq "audit group is dispatched (its usage, exit 2)" 2 "$rc"
check_match "audit usage comes from the audit group" "usage: sluice audit" "$out"

out=$(SLUICE_SOCKET=$T/nothing.sock "$SLUICE" status 2>&1); rc=$?
check_eq "status without a daemon exits 1" 1 "$rc"
check_match "status without a daemon says so (SLUICE_SOCKET used)" "cannot connect to sluiced at $T/nothing.sock" "$out"
out=$(SLUICE_SOCKET=$T/nothing.sock "$SLUICE" -s "$T/other.sock" reload 2>&1); rc=$?
check_eq "reload without a daemon exits 1" 1 "$rc"
check_match "-s wins over SLUICE_SOCKET" "$T/other.sock" "$out"

# ---------------------------------------------------------- start refusals
"$SLUICED" >/dev/null 2>&1; check_eq "sluiced without --config exits 2" 2 "$?"
"$SLUICED" --config "$T/sluice.yaml" --bogus >/dev/null 2>&1
check_eq "sluiced with an unknown option exits 2" 2 "$?"

printf 'version: 1\nstate_dir: %s/state\nbogus_key: 1\ndns:\n  upstreams: [192.0.2.53]\n' "$T" >"$T/bad.yaml"
out=$("$SLUICED" --config "$T/bad.yaml" --foreground 2>&1); rc=$?
check_eq "broken config: sluiced exits 2" 2 "$rc"
check_match "broken config: error as FILE:LINE:COL" "^$T/bad.yaml:3:1: " "$out"

"$SLUICED" --config "$T/missing.yaml" --foreground >/dev/null 2>&1
check_eq "missing config: sluiced exits 2" 2 "$?"

mkdir -p "$T/badpol"
cp "$POL"/*.yaml "$T/badpol/"
printf 'version: 1\nname: broken\negress:\n  allow:\n    - host: [unterminated\n' >"$T/badpol/broken.yaml"
sed "s|^policy_dir: .*|policy_dir: $T/badpol|" "$T/sluice.yaml" >"$T/badpol.yaml"
out=$("$SLUICED" --config "$T/badpol.yaml" --foreground 2>&1); rc=$?
check_eq "broken policy at start: sluiced exits 2" 2 "$rc"
check_match "broken policy at start: FILE:LINE:COL" "^$T/badpol/broken.yaml:[0-9]+:[0-9]+: " "$out"
check_fails "broken start left no socket" test -e "$SOCK"

# -------------------------------------------------------------- the daemon
"$SLUICED" --config "$T/sluice.yaml" --foreground -v 2>"$LOG" &
DPID=$!
cleanup_push "kill -KILL $DPID"
if wait_for 30 test -S "$SOCK" && wait_for 30 alive; then
	ok "sluiced starts and answers on its socket"
else
	not_ok "sluiced starts and answers on its socket"
	sed 's/^/#   /' "$LOG" | head -n 20
	finish
fi
check_eq "socket mode is 0660" 660 "$(stat -c %a "$SOCK")"
check_eq "socket directory mode is 0750" 750 "$(stat -c %a "$(dirname "$SOCK")")"
check_eq "pid file names the daemon" "$DPID" "$(cat "$T/run/sluiced.pid" 2>/dev/null)"

out=$(sl status); rc=$?
check_eq "sluice status exits 0" 0 "$rc"
check_match "status shows version and pid" "sluiced [0-9.]+, pid $DPID" "$out"
check_match "status lists the policies" "policies: $NPOL from $POL" "$out"
first=$(basename "$(ls "$POL"/*.yaml | head -n 1)" .yaml)
first_digest() { status_field ".policies[] | select(.name == \"$first\") | .digest"; }
check_match "status --json names the policies" "^[0-9a-f:sha]{64,71}\$" "$(first_digest)"
check_eq "status --json: policies loaded" "$NPOL" "$(status_field '.policies | length')"
check_match "status --json: policies have names and sha256 digests" '^[0-9a-f]{64}$|^sha256:[0-9a-f]{64}$' "$(status_field '.policies[0].digest')"
check_eq "status --json: pid" "$DPID" "$(status_field .pid)"
check_eq "status --json: no sandboxes yet" 0 "$(status_field .sandboxes)"
check_eq "status --json: no reload failures" 0 "$(status_field .reload_failures)"

out=$(sl reload); rc=$?
check_eq "sluice reload exits 0" 0 "$rc"
check_match "reload prints the new policy list" "reloaded: $NPOL policies" "$out"
check_eq "reload counted" 1 "$(status_field .reloads_ok)"
code=$(api POST /v1/reload | cut -d' ' -f1)
check_eq "POST /v1/reload without a body is 200" 200 "$code"

# --------------------------------------------------- a broken policy file
digests_before=$(status_field '[.policies[].digest] | join(",")')
first_digest=$(first_digest)
# All or nothing: a valid edit to one file must not be adopted while
# another file is broken.
echo "# edited" >>"$POL/$first.yaml"
printf 'version: 1\nname: zz-broken\nbogus: true\n' >"$POL/zz-broken.yaml"
out=$(sl reload 2>&1); rc=$?
check_eq "reload with a broken file exits 1" 1 "$rc"
check_match "reload prints FILE:LINE:COL" "$POL/zz-broken.yaml:3:1: " "$out"
check_eq "old policies stay after a failed reload" "$digests_before" "$(status_field '[.policies[].digest] | join(",")')"
check_eq "reload_failures counted" 1 "$(status_field .reload_failures)"
check_match "status shows the last reload error" "zz-broken.yaml:3:1" "$(status_field '.last_reload_error[0]')"
r=$(api POST /v1/reload)
check_match "POST /v1/reload with a broken file is 422 with errors" '^422 .*"error":"reload_failed".*"errors":\[".*zz-broken.yaml:3:1' "$r"
check_match "the 422 lists the policies kept" "\"policies\":\\[\\{\"name\":\"$first\"" "$r"

kill -HUP "$DPID"
if wait_for 30 failures_are 3; then
	ok "SIGHUP with a broken file fails and is counted"
else
	not_ok "SIGHUP with a broken file fails and is counted (reload_failures $(status_field .reload_failures))"
fi
check_eq "old policies stay after SIGHUP" "$digests_before" "$(status_field '[.policies[].digest] | join(",")')"
check_match "SIGHUP failure logged with FILE:LINE:COL" "reload: $POL/zz-broken.yaml:3:1: " "$(cat "$LOG")"
check "daemon alive after SIGHUP" kill -0 "$DPID"

# ------------------------------------------------ hostile control requests
r=$(api POST /v1/reload -H 'Content-Type: application/json' --data '{"a":')
check_match "malformed JSON is 400 bad_json" '^400 \{"error":"bad_json","message":' "$r"
r=$(api POST /v1/reload -H 'Content-Type: application/json' --data '{"a":1,"a":2}')
check_match "duplicate keys are 400 bad_json" '^400 \{"error":"bad_json"' "$r"
r=$(curl -s -i --max-time 30 --unix-socket "$SOCK" -X DELETE http://localhost/v1/status)
check_match "wrong method is 405" '^HTTP/1.1 405' "$r"
check_match "405 carries Allow" 'Allow: GET' "$r"
check_match "405 body is JSON" '"error":"method_not_allowed"' "$r"
r=$(api GET /v1/nope)
check_match "unknown path is 404 not_found" '^404 \{"error":"not_found"' "$r"
r=$(api GET '/v1/status/../../etc/passwd')
check_match "traversal-looking path is 404" '^404 ' "$r"
head -c 70000 /dev/zero | tr '\0' 'x' >"$T/big.json"
r=$(api POST /v1/reload -H 'Content-Type: application/json' --data-binary @"$T/big.json")
check_match "oversized body is 413 body_too_large" '^413 \{"error":"body_too_large"' "$r"
r=$(api POST /v1/reload -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary @"$T/big.json")
check_match "oversized chunked body is 413" '^413 \{"error":"body_too_large"' "$r"
r=$(api POST /v1/reload -H 'Content-Type: text/plain' --data '{}')
check_match "wrong content type is 415" '^415 \{"error":"unsupported_media_type"' "$r"
r=$(api POST /v1/reload --data 'a=b')
check_match "form content type is 415" '^415 ' "$r"
# A client that sends half a request and hangs up.
printf 'POST /v1/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{' |
    timeout 10 python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); s.close()' "$SOCK"
printf 'GARBAGE\r\n\r\n' |
    timeout 10 python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); s.recv(100); s.close()' "$SOCK"
check "daemon keeps running after hostile requests" alive
check "daemon process still there" kill -0 "$DPID"

m=$(curl -s --max-time 30 --unix-socket "$SOCK" http://localhost/metrics)
check_match "metrics: sluice_up" '^sluice_up 1$' "$(printf '%s\n' "$m" | grep '^sluice_up')"
check_match "metrics: policies loaded" "^sluice_policies_loaded $NPOL\$" "$(printf '%s\n' "$m" | grep '^sluice_policies_loaded')"
check_match "metrics: reload errors" '^sluice_reloads_total\{result="error"\} 3$' "$(printf '%s\n' "$m" | grep 'result="error"')"
check_match "metrics: reload ok" '^sluice_reloads_total\{result="ok"\} 2$' "$(printf '%s\n' "$m" | grep 'result="ok"')"
check_match "metrics: requests by code" '^sluice_control_requests_total\{code="413"\} 2$' "$(printf '%s\n' "$m" | grep 'code="413"')"
check_match "metrics: build info" '^sluice_build_info\{version="[0-9.]+"\} 1$' "$(printf '%s\n' "$m" | grep build_info)"

rm -f "$POL/zz-broken.yaml"
check "reload after the fix succeeds" sl reload
check_eq "last reload error cleared" null "$(status_field .last_reload_error)"
check_eq "the valid edit is in force after the fix" "$(sha256sum "$POL/$first.yaml" | cut -c1-64)" "$(first_digest | sed 's/^sha256://')"
check_fails "and the old digest is gone" test "$(first_digest)" = "$first_digest"

# A second daemon on the same socket is refused; the first keeps it.
out=$("$SLUICED" --config "$T/sluice.yaml" --foreground 2>&1); rc=$?
check_eq "second daemon on a live socket exits 1" 1 "$rc"
check_match "second daemon says why" "another daemon is listening" "$out"
check "first daemon still answers" alive

# ------------------------------------------------------------- shutdown
kill -TERM "$DPID"
wait "$DPID"; rc=$?
check_eq "SIGTERM: exit status 0 (no leaks under LeakSanitizer)" 0 "$rc"
check_fails "SIGTERM: socket removed" test -e "$SOCK"
check_fails "SIGTERM: pid file removed" test -e "$T/run/sluiced.pid"
check_fails "no sanitizer report in the log" grep -q -E 'AddressSanitizer|LeakSanitizer|runtime error' "$LOG"

# A stale socket file (as after a crash) is replaced on start.
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$SOCK"
check "stale socket file in place" test -S "$SOCK"

# ------------------------------------------------------------ daemon mode
"$SLUICED" --config "$T/sluice.yaml" 2>"$T/daemon.err"; rc=$?
check_eq "daemon mode: the starting process exits 0" 0 "$rc"
if wait_for 30 test -s "$T/run/sluiced.pid" && wait_for 30 alive; then
	BGPID=$(cat "$T/run/sluiced.pid")
	cleanup_push "kill -KILL $BGPID"
	ok "daemon mode: pid file written and socket answers"
	check_eq "daemon mode: status pid is the pid file's" "$BGPID" "$(status_field .pid)"
	check_eq "daemon mode: stale socket replaced, mode 0660" 660 "$(stat -c %a "$SOCK")"
	kill -TERM "$BGPID"
	if wait_for 30 test ! -e "$SOCK" && wait_for 30 test ! -e "/proc/$BGPID"; then
		ok "daemon mode: SIGTERM stops it and removes the socket"
	else
		not_ok "daemon mode: SIGTERM stops it and removes the socket"
	fi
else
	not_ok "daemon mode: pid file written and socket answers"
	sed 's/^/#   /' "$T/daemon.err" | head -n 20
fi

# ------------------------------------------------------ privilege refused
# sluiced owns namespaces and the nftables table: without the privilege for
# that it must refuse to start, say why, and leave nothing listening.
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
	U=$T/unpriv
	mkdir -p "$U/pol"
	cp "$POL"/*.yaml "$U/pol/"
	sed -e "s|^state_dir: .*|state_dir: $U/state|" -e "s|^run_dir: .*|run_dir: $U/run|" \
	    -e "s|^socket: .*|socket: $U/run/sluice.sock|" -e "s|^policy_dir: .*|policy_dir: $U/pol|" \
	    "$T/sluice.yaml" >"$U/sluice.yaml"
	chown -R nobody "$U"
	chmod 755 "$T"
	setpriv --reuid=nobody --regid=nogroup --clear-groups \
	    timeout 60 "$SLUICED" --config "$U/sluice.yaml" --foreground 2>"$U/log"
	rc=$?
	check_eq "sluiced without privilege exits 1" 1 "$rc"
	check_match "and says which step was refused" "not permitted" "$(cat "$U/log")"
	check_fails "and nothing answers on its socket" "$SLUICE" -s "$U/run/sluice.sock" status
fi

finish
