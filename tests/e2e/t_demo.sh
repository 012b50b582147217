#!/bin/bash
# t_demo.sh: `make demo` as a first-time user meets it.
#
# The demo is the project's first impression and its claims must hold: it
# runs start to finish without a person (no TTY, --step ignored), exits 0,
# its summary table is what the audit log says (re-read here from the log
# it leaves with --keep, independently of the demo's own filters), the log
# verifies with its key against an external checkpoint, the tampered copy
# is caught at the exact record that was edited, the six capability-bridge
# acts happened through the real daemon (an allowed call, a forbidden
# argument, an approval given from outside, a budget exhausted, a
# credential redacted, a taint that closes egress but not the keep list),
# and nothing it made is left: no namespace, link, nftables table, process
# or temp dir.
. "$(dirname "$0")/lib.sh"
require_root
for t in jq sqlite3 nft ip; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
DEMO=$TOP/examples/demo/run.sh
[ -x "$DEMO" ] || { not_ok "examples/demo/run.sh exists and is executable"; finish; }

KEEP=$E2E_TMP/keep
OUT=$E2E_TMP/demo.out
tables_before=$(nft list tables 2>/dev/null | sort)
tmps_before=$(ls -d /tmp/sluice-demo.* 2>/dev/null | sort)

# No TTY on stdin or stdout; --step must not wait for Enter then. Bounded:
# the demo is meant to take well under two minutes.
SLUICE_BUILD=$SLUICE_BUILD timeout 300 "$DEMO" --step --keep "$KEEP" \
    </dev/null >"$OUT" 2>&1
rc=$?
check_eq "make demo's script exits 0" 0 "$rc"
[ "$rc" -eq 0 ] || tail -n 40 "$OUT" | sed 's/^/#   /'
for f in audit.db audit.vkey summary.tsv far.tsv verify.json tamper.json \
    external.ckpt tampered.seq sandbox.id world.tag; do
	[ -s "$KEEP/$f" ] || { not_ok "--keep left $f"; finish; }
done
ID=$(cat "$KEEP/sandbox.id")
TAG=$(cat "$KEEP/world.tag")
VK=$(cat "$KEEP/audit.vkey")
S=$KEEP/summary.tsv
check_match "the kept tag and id are this run's" '^sld[0-9]+ demo[0-9]+$' "$TAG $ID"

# ------------------------------------------------------------ the output
check_fails "no colour escapes when stdout is not a TTY" grep -q $'\e\\[' "$OUT"
check_eq "the table has a row for each of the six MCP acts" 6 \
    "$(grep -cE '^  MCP: .* (mcp\.call|finding|dns\.decision|net\.deny) ' "$OUT")"
check_eq "every act is announced, 8 network, 6 MCP and 2 resources" 16 \
    "$(grep -cE '^\[ ?([1-9]|1[0-6])\] ' "$OUT")"

# Every summary row is printed in the table with the log's decision,
# reason and count.
rows=0 missing=0
while IFS=$'\t' read -r act kind dec reason n _; do
	rows=$((rows + 1))
	grep -qE "  $kind +$dec +${reason:0:22} +$n( |\$)" "$OUT" ||
	    { missing=$((missing + 1)); echo "#   not printed: $act $kind $dec $reason $n"; }
done <"$S"
check "the summary has rows" test "$rows" -ge 14
check_eq "every summary row is in the printed table" 0 "$missing"

# ------------------------------------------------------------ from the log
# The kept log, read independently of the demo's filters.
# The sandbox's records: those naming it, and denied packets from its link
# that name no sandbox (an aggregate sluiced wrote after the sandbox was
# removed, when it stopped).
"$SLUICE" audit tail --db "$KEEP/audit.db" --format json >"$E2E_TMP/all.json" 2>/dev/null
IFACE=$(jq -r -s --arg id "$ID" '[.[] | select(.kind == "sandbox.create" and .sandbox.id == $id)] | .[0].iface // empty' "$E2E_TMP/all.json")
check_match "the sandbox.create record names the sandbox's link" '^sl-' "$IFACE"
jq -c --arg id "$ID" --arg link "$IFACE" 'select((.sandbox.id // "") == $id or
    (.kind == "net.deny" and (.sandbox.id // "") == "" and .iface == $link))' \
    "$E2E_TMP/all.json" >"$E2E_TMP/tail.json" 2>/dev/null
check "audit tail reads the kept log" test -s "$E2E_TMP/tail.json"
# row ACT KIND DECISION: the count the summary gives (0 when no row).
row() {
	awk -F'\t' -v a="$1" -v k="$2" -v d="$3" \
	    '$1 == a && $2 == k && $3 == d { n += $5 } END { print n + 0 }' "$S"
}
# logn JQ-FILTER: how many matching records (net.deny: packets) the log has.
logn() {
	jq -s "[.[] | select($1) | (if .kind == \"net.deny\" then .count else 1 end)] | add // 0" \
	    "$E2E_TMP/tail.json"
}
check_eq "install: allowed pkg.example.com queries, as in the log" \
    "$(logn '.kind == "dns.decision" and .q.name == "pkg.example.com" and .decision == "allow"')" \
    "$(row install dns.decision allow)"
check "install: the log has allowed queries for the index" \
    test "$(row install dns.decision allow)" -ge 1
check_eq "exfil by name: denied evil.example.net queries, as in the log" \
    "$(logn '.kind == "dns.decision" and .q.name == "evil.example.net" and .decision == "deny"')" \
    "$(row exfil-name dns.decision deny)"
check "exfil by name: the log has the denial" \
    test "$(row exfil-name dns.decision deny)" -ge 1
check_eq "exfil by name: no allowed evil.example.net in the log" 0 \
    "$(logn '.kind == "dns.decision" and .q.name == "evil.example.net" and .decision == "allow"')"
check_eq "exfil by address: denied tcp packets to the attacker, as in the log" \
    "$(logn '.kind == "net.deny" and .dst.ip == "198.51.100.66" and .proto == "tcp"')" \
    "$(row exfil-addr net.deny deny)"
check "exfil by address: at least one denied packet" \
    test "$(row exfil-addr net.deny deny)" -ge 1
check "exfil over ICMP: denied ICMP in the log" \
    test "$(row exfil-icmp net.deny deny)" -ge 1
check_eq "exfil over ICMP: the count is the log's" \
    "$(logn '.kind == "net.deny" and .dst.ip == "198.51.100.66" and (.proto | test("icmp"))')" \
    "$(row exfil-icmp net.deny deny)"
check_eq "DNS tunnel: denied encoded queries, as in the log" \
    "$(logn '.kind == "dns.decision" and (.q.name | endswith(".t.evil.example.net")) and .decision == "deny"')" \
    "$(row exfil-dns dns.decision deny)"
check "DNS tunnel: at least one denial" test "$(row exfil-dns dns.decision deny)" -ge 1
check_match "DNS tunnel: the row's reason is a tunnelling heuristic" \
    '^(high_entropy|label_too_long|name_too_long|suspect_name)$' \
    "$(awk -F'\t' '$1 == "exfil-dns" && $2 == "dns.decision" { print $4; exit }' "$S")"
check "DNS tunnel: a dns_tunnel finding" \
    grep -qP '^exfil-dns\tfinding\t[^\t]*\tdns_tunnel\t[1-9]' "$S"
check_eq "metadata v4: denied packets, as in the log" \
    "$(logn '.kind == "net.deny" and .dst.ip == "169.254.169.254"')" \
    "$(row meta-v4 net.deny deny)"
check_match "metadata v4: denied as always-denied metadata" \
    '^always_denied' \
    "$(awk -F'\t' '$1 == "meta-v4" { print $4; exit }' "$S")"
check_eq "rebinding: denied rebind.example.com answers, as in the log" \
    "$(logn '.kind == "dns.decision" and .q.name == "rebind.example.com" and .decision == "deny"')" \
    "$(row meta-rebind dns.decision deny)"
check "rebinding: a dns_rebinding finding" \
    grep -qP '^meta-rebind\tfinding\t[^\t]*\tdns_rebinding\t[1-9]' "$S"
# The resources acts run under `sluice run`, each in a sandbox of its own:
# their rows are the daemon's findings from the kernel's counters.
check "fork bomb: a sandbox.pids_limit finding in the table" \
    grep -qP '^limits-bomb\tfinding\t[^\t]*\tsandbox.pids_limit\t[1-9]' "$S"
check_match "fork bomb: the kernel refused forks past pids: 64" \
    'agent: started 6[0-3] processes, [0-9]+ forks refused' "$(cat "$OUT")"
check "memory hog: a sandbox.oom_kill finding in the table" \
    grep -qP '^limits-hog\tfinding\t[^\t]*\tsandbox.oom_kill\t[1-9]' "$S"
check_match "memory hog: killed at the memory limit" \
    'stopped: the kernel killed it at the sandbox.s memory limit' "$(cat "$OUT")"
check_eq "no act's row says 'no record'" "" \
    "$(awk -F'\t' '$3 == "no record" { print $1 }' "$S")"
# IPv6 metadata: no decision exists to record (the host's end of the link
# has no IPv6), so the row cites the sandbox's creation record, and its
# decision column is what that record's "ipv6" field says.
CREC=$(jq -s -c '[.[] | select(.kind == "sandbox.create" and .decision == "allow")] | .[0] // {}' "$E2E_TMP/tail.json")
check_eq "metadata v6: the row cites the sandbox.create record's seq" \
    "$(printf '%s' "$CREC" | jq -r .seq)" \
    "$(awk -F'\t' '$1 == "meta-v6" && $2 == "sandbox.create" { print $6 }' "$S")"
check_eq "metadata v6: the row's decision is the record's ipv6 field's" \
    "$(printf '%s' "$CREC" | jq -r 'if has("ipv6") and (.ipv6 == "disabled" or .ipv6 == false) then "no path" else "unstated" end')" \
    "$(awk -F'\t' '$1 == "meta-v6" && $2 == "sandbox.create" { print $3 }' "$S")"
check_eq "metadata v6: no net.deny row is claimed without a record" \
    "$(logn '.kind == "net.deny" and .dst.ip == "fd00:ec2::254"')" \
    "$(row meta-v6 net.deny deny)"
check_match "metadata v6: the kernel showed no IPv6 in the sandbox before" \
    'kernel, before: in the sandbox: IPv6 addresses: none; routes: none; eth0 disable_ipv6=1' \
    "$(cat "$OUT")"
check_match "metadata v6: the kernel showed no IPv6 on the host's end after" \
    'kernel, after: host side sl[-a-z0-9]*: disable_ipv6=1, IPv6 addresses: none' \
    "$(cat "$OUT")"
check_match "metadata v6: the agent did re-enable IPv6 inside (control)" \
    'kernel, after: in the sandbox: IPv6 addresses: .*eth0 2001:db8:ffff::99/64' \
    "$(cat "$OUT")"
check_match "metadata v6: the table's note says why there is no deny record" \
    'metadata over IPv6: no deny record, because there was no decision' \
    "$(cat "$OUT")"

# ------------------------------------------------------------ the agent's words
# What the agent says must be what happened: curl's "000" (its status when
# no answer came) is not an answer and never shown, and the DNS act's
# verdict repeats what its two queries got, not a third query's.
check_fails "no curl 000 status in the agent's lines" \
    grep -qE 'agent:.*(^|[ (])000([ )]|$)' "$OUT"
own=$(sed -n "s/^ *agent:   via the sandbox's resolver: //p" "$OUT")
direct=$(sed -n 's/^ *agent:   via 198\.51\.100\.53 directly: //p' "$OUT")
check_match "DNS act: each query's outcome is named" \
    '^(NXDOMAIN|REFUSED|SERVFAIL|NOERROR.*|no reply)$' "$own"
check_match "DNS act: the direct query's outcome is named" \
    '^(NXDOMAIN|REFUSED|SERVFAIL|NOERROR.*|no reply)$' "$direct"
check_eq "DNS act: the verdict is what the two queries got" \
    "neither query was answered ($own; $direct)" \
    "$(sed -n 's/^ *agent: stopped: //p' "$OUT" | grep '^neither query')"
check_fails "no act says 'no answer' and then that it was answered" \
    grep -qE 'agent: .*no answer' "$OUT"

# ------------------------------------------------------------ the MCP acts
# mcpn JQ-FILTER: how many mcp.call records of server ev match.
mcpn() {
	jq -s "[.[] | select(.kind == \"mcp.call\" and .server == \"ev\" and ($1))] | length" \
	    "$E2E_TMP/tail.json"
}
ECHO_OK='.tool == "echo" and (.arguments | tostring | test("hello from"))'
ECHO_BAD='.tool == "echo" and (.arguments | tostring | test("shadow"))'
check_eq "allowed call: exactly 1 allowed echo in the log" 1 \
    "$(mcpn "$ECHO_OK and .decision == \"allow\"")"
check_eq "allowed call: the summary's count is the log's" 1 "$(row mcp-allowed mcp.call allow)"
check_match "allowed call: the agent got the echo back" 'agent:   result: Echo: hello from the sandbox' "$(cat "$OUT")"
check_eq "forbidden argument: 1 denial for the argument constraint, none allowed" "1 0" \
    "$(mcpn "$ECHO_BAD and .decision == \"deny\" and .reason == \"argument_constraint\"") $(mcpn "$ECHO_BAD and .decision != \"deny\"")"
check_eq "forbidden argument: the summary's count is the log's" 1 "$(row mcp-forbidden-arg mcp.call deny)"
check_match "forbidden argument: the agent read a reason" 'stopped: echo with a shell payload.*: [A-Z][a-z]' "$(cat "$OUT")"
APPR=$(jq -s -c '[.[] | select(.kind == "mcp.call" and .tool == "get-annotated-message")]' "$E2E_TMP/tail.json")
check_eq "approval: one call, allowed, approved" '1 allow approved' \
    "$(printf '%s' "$APPR" | jq -r '"\(length) \(.[0].decision) \(.[0].approval)"')"
check_match "approval: the record names an approver" '^[a-z_][a-z0-9_-]*$' \
    "$(printf '%s' "$APPR" | jq -r '.[0].approver // empty')"
check_match "approval: the table shows who approved it" \
    "  mcp.call +allow +approved by $(printf '%s' "$APPR" | jq -r '.[0].approver // "?"') +1 " "$(cat "$OUT")"
check_match "approval: sluice approve was run from outside" 'approves it: sluice approve [0-9a-f]+' "$(cat "$OUT")"
check_eq "budget: exactly 3 get-sum allowed and 2 budget_exhausted" "3 2" \
    "$(mcpn '.tool == "get-sum" and .decision == "allow"') $(mcpn '.tool == "get-sum" and .decision == "deny" and .reason == "budget_exhausted"')"
check_eq "budget: no other get-sum outcome" 5 "$(mcpn '.tool == "get-sum"')"
check_eq "budget: the summary's counts are the log's" "3 2" \
    "$(row mcp-budget mcp.call allow) $(row mcp-budget mcp.call deny)"
check "redaction: get-env's record counts redactions > 0" test \
    "$(jq -s '[.[] | select(.kind == "mcp.call" and .tool == "get-env") | .redactions // 0] | add // 0' "$E2E_TMP/tail.json")" -gt 0
check_match "redaction: the agent saw API_TOKEN, redacted" '"API_TOKEN": "\[REDACTED' "$(cat "$OUT")"
# The demo's fake credential is demo-secret-PID-RANDOM: its value must be
# nowhere the agent, the table or the log shows.
check_fails "redaction: the credential is not in the demo's output" grep -q 'demo-secret-' "$OUT"
check_fails "redaction: the credential is not in the audit log" grep -q 'demo-secret-' "$E2E_TMP/all.json"
TAINT=$(jq -s '[.[] | select(.kind == "finding" and .type == "sandbox.taint")] | .[0].seq // -1' "$E2E_TMP/tail.json")
check "taint: a sandbox.taint finding" test "$TAINT" -ge 0
check_eq "taint: an mcp.taint finding names the confidential tool" 1 \
    "$(jq -s '[.[] | select(.kind == "finding" and .type == "mcp.taint" and .tool == "get-tiny-image")] | length' "$E2E_TMP/tail.json")"
check_eq "taint: the tainting call was allowed and classified confidential" "allow confidential" \
    "$(jq -r -s '[.[] | select(.kind == "mcp.call" and .tool == "get-tiny-image")] | .[0] | "\(.decision) \(.classification)"' "$E2E_TMP/tail.json")"
check "taint: after it, the keep-list name was allowed by mcp.taint.keep" test \
    "$(jq -s "[.[] | select(.kind == \"dns.decision\" and .seq > $TAINT and .q.name == \"pkg.example.com\" and .decision == \"allow\" and (.policy.rule // \"\" | startswith(\"mcp.taint.keep\")))] | length" "$E2E_TMP/tail.json")" -ge 1
check_eq "taint: no other name was allowed after it" 0 \
    "$(jq -s "[.[] | select(.kind == \"dns.decision\" and .seq > $TAINT and .decision == \"allow\" and .q.name != \"pkg.example.com\")] | length" "$E2E_TMP/tail.json")"
check_match "taint: the post-taint requests to the web server failed" 'stopped: web\.example\.org \(203\.0\.113\.80\) is closed after the taint' "$(cat "$OUT")"
check_match "taint: the web server answered by name before the taint (control)" 'before: GET http://web\.example\.org/ip.*HTTP 200 from 203\.0\.113\.80' "$(tr '\n' ' ' <"$OUT")"
check "taint: before it, web.example.org was allowed by the proxy" test \
    "$(jq -s "[.[] | select(.kind == \"dns.decision\" and .seq < $TAINT and .q.name == \"web.example.org\" and .decision == \"allow\")] | length" "$E2E_TMP/tail.json")" -ge 1
check "taint: after it, web.example.org was refused as tainted" test \
    "$(jq -s "[.[] | select(.kind == \"dns.decision\" and .seq > $TAINT and .q.name == \"web.example.org\" and .decision == \"deny\" and .reason == \"tainted\")] | length" "$E2E_TMP/tail.json")" -ge 1
check "taint: after it, the address learned before was cut in the kernel" test \
    "$(logn '.kind == "net.deny" and .dst.ip == "203.0.113.80" and .reason == "tainted"')" -ge 1
check_eq "taint: the summary's tainted denials are the log's" \
    "$(logn '(.kind == "net.deny" and .dst.ip == "203.0.113.80") or (.kind == "dns.decision" and .q.name == "web.example.org" and .decision == "deny")')" \
    "$(($(row mcp-taint net.deny deny) + $(row mcp-taint dns.decision deny)))"
check_match "taint: the keep-list host still answered by name after it" 'package index by name \(on the keep list\): HTTP 200' "$(cat "$OUT")"

# The far side's own counters: the control (the index saw the install)
# proves they count; every attempt at the attacker or the metadata service
# must have left nothing there.
far() { awk -F'\t' -v a="$1" '$1 == a { print $2 }' "$KEEP/far.tsv"; }
check "control: the install's packets were counted at the index" \
    test "$(far install)" -gt 0
for a in exfil-name exfil-addr exfil-icmp exfil-dns meta-v4 meta-v6 meta-rebind mcp-taint; do
	check_eq "far side: nothing from $a arrived" 0 "$(far "$a")"
done

# ------------------------------------------------------------ verify, tamper
check_eq "the demo's verify reached assurance external" external \
    "$(jq -r .assurance "$KEEP/verify.json")"
check "the kept log verifies again here (exit 0)" \
    "$SLUICE" audit verify --db "$KEEP/audit.db" --key "$VK" \
    --checkpoint "$KEEP/external.ckpt"
TS=$(cat "$KEEP/tampered.seq")
check_eq "verify on the tampered copy failed at the edited seq" "$TS" \
    "$(jq -r .first_failure.seq "$KEEP/tamper.json")"
check_match "the demo says so" "tampering caught at seq $TS " "$(cat "$OUT")"
check_fails "the demo reported no failure" grep -qE '^ +demo: |no record for .* in the audit log|: the far side saw [1-9]|verify exited|verify on the tampered copy:|could not keep|no pending approval appeared|sluice approve .* failed' "$OUT"

# ------------------------------------------------------------ nothing left
# runprocs TAG: processes whose environment carries the run's mark (the
# demo's MCP server, a child of sluiced, has no tag on its command line).
runprocs() {
	grep -lzx "SLUICE_DEMO_RUN=$1" /proc/[0-9]*/environ 2>/dev/null |
	    grep -v "^/proc/$$/"
}
check_eq "no MCP server process of the run is left" "" "$(runprocs "$TAG")"
check_eq "no namespace of the run is left" "" \
    "$(find /run/netns -mindepth 1 -maxdepth 1 -printf "%f\n" 2>/dev/null | grep -E "^($TAG-|sluice-$ID\$)")"
check_fails "no /etc/netns/sluice-$ID" test -e "/etc/netns/sluice-$ID"
check_eq "no process of the run is left" "" \
    "$(pgrep -af -- "$TAG" | grep -v pgrep)"
check_eq "no sandbox link in this namespace" "" \
    "$(ip -o link show 2>/dev/null | grep -E ": sl[-g].*link-netns sluice-$ID")"
check_eq "no nftables table added to this namespace" "$tables_before" \
    "$(nft list tables 2>/dev/null | sort)"
check_eq "no temp dir left" "$tmps_before" \
    "$(ls -d /tmp/sluice-demo.* 2>/dev/null | sort)"

# ------------------------------------------------------------ Ctrl-C
# A person presses Ctrl-C in the middle (the whole foreground process group
# gets SIGINT, as from a terminal): the demo must still remove everything.
# Sent once the third act has started (an event in its output, not a delay).
OUT2=$E2E_TMP/demo-int.out
# Job control on for this one job: it gets its own process group, and
# SIGINT is not ignored in it as it would be for a plain background job.
set -m
SLUICE_BUILD=$SLUICE_BUILD "$DEMO" </dev/null >"$OUT2" 2>&1 &
DPID=$!
set +m
cleanup_push "kill -KILL -- -$DPID"
if wait_for 120 grep -q '^\[ 3\] ' "$OUT2"; then
	TAG2=$(sed -n 's/^ *world: \(sld[0-9]*\)-host .*/\1/p' "$OUT2" | head -n 1)
	ID2=demo${TAG2#sld}
	check "control: mid-run, the world's namespace exists" \
	    test -e "/run/netns/$TAG2-host"
	check "control: mid-run, the sandbox's namespace exists" \
	    test -e "/run/netns/sluice-$ID2"
	check "control: mid-run, the run's MCP server process is found" \
	    test -n "$(runprocs "$TAG2")"
	kill -INT -- -"$DPID"
	# Bounded: cleanup stops servers with a 5 s grace at most.
	for ((i = 0; i < 600; i++)); do
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.1
	done
	wait "$DPID"; rc=$?
	check_eq "Ctrl-C: the demo exits 130" 130 "$rc"
	check_eq "Ctrl-C: no namespace of the run is left" "" \
	    "$(find /run/netns -mindepth 1 -maxdepth 1 -printf "%f\n" 2>/dev/null | grep -E "^($TAG2-|sluice-$ID2\$)")"
	check_fails "Ctrl-C: no /etc/netns/sluice-$ID2" test -e "/etc/netns/sluice-$ID2"
	check_eq "Ctrl-C: no process of the run is left" "" \
	    "$(pgrep -af -- "$TAG2" | grep -v pgrep)"
	check_eq "Ctrl-C: no MCP server process of the run is left" "" \
	    "$(runprocs "$TAG2")"
	check_eq "Ctrl-C: no nftables table added to this namespace" \
	    "$tables_before" "$(nft list tables 2>/dev/null | sort)"
	check_eq "Ctrl-C: no temp dir left" "$tmps_before" \
	    "$(ls -d /tmp/sluice-demo.* 2>/dev/null | sort)"
else
	not_ok "the interrupted run reached its third act"
	tail -n 20 "$OUT2" | sed 's/^/#   /'
	kill -KILL -- -"$DPID" 2>/dev/null
fi
finish
