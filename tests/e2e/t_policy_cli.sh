#!/bin/bash
# t_policy_cli: `sluice policy check` and `sluice policy explain` as a user
# runs them — the example policies pass, every hostile file fails with
# exactly its expected message, explain prints the decision and the rule.
# No daemon, no network: this scenario only reads files.
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1

if [ ! -x "$SLUICE" ]; then
	not_ok "sluice binary missing: $SLUICE"
	exit 1
fi

# run_cli OUT ERR ARGS...: run sluice, stdout to OUT, stderr to ERR; echo rc.
run_cli() {
	local out=$1 err=$2; shift 2
	"$SLUICE" "$@" >"$out" 2>"$err"
	echo $?
}

o=$E2E_TMP/out e=$E2E_TMP/err

# in_etc DIR CMD...: run CMD where /etc/sluice is DIR's contents (absent if
# DIR is "-"): a private mount namespace with an overlay over /etc whose
# upper layer is a temp dir, so `policy check`'s default config can be
# tested without touching the machine's /etc/sluice.
in_etc() {
	local d=$1 u
	shift
	u=$(mktemp -d "$E2E_TMP/etc.XXXXXX") || return 1
	mkdir -p "$u/up" "$u/work"
	unshare --mount --propagation private -- sh -c '
	    mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/up,workdir=$1/work" /etc &&
	    rm -rf /etc/sluice &&
	    if [ "$2" != - ]; then cp -r "$2" /etc/sluice; fi &&
	    shift 2 && exec "$@"' sh "$u" "$d" "$@"
}
# cli_in_etc DIR OUT ERR ARGS...: run_cli inside in_etc DIR.
cli_in_etc() {
	local d=$1 out=$2 err=$3; shift 3
	in_etc "$d" "$SLUICE" "$@" >"$out" 2>"$err"
	echo $?
}
NOCFG="no daemon config found; server names not checked (give --config FILE)"

rc=$(cli_in_etc - "$o" "$e" policy check examples/policies/*.yaml)
check_eq "policy check examples exits 0" 0 "$rc"
want=$(echo "$NOCFG"; for f in examples/policies/*.yaml; do echo "$f: ok"; done)
check_eq "policy check examples, no /etc/sluice: says server names are not checked, FILE: ok for each" \
    "$want" "$(cat "$o")"
check_eq "policy check examples prints no errors" "" "$(cat "$e")"

# With the example config installed where the README puts it, check uses it.
ex=$E2E_TMP/etc-example
mkdir -p "$ex" && cp examples/sluice.yaml "$ex/sluice.yaml"
rc=$(cli_in_etc "$ex" "$o" "$e" policy check examples/policies/*.yaml)
check_eq "policy check examples against the installed example config exits 0" 0 "$rc"
want=$(echo "server names checked against /etc/sluice/sluice.yaml"
    for f in examples/policies/*.yaml; do echo "$f: ok"; done)
check_eq "policy check names the installed config it used" "$want" "$(cat "$o")"
# A config that does not declare a server a policy names: an error, found
# without --config.
sed '/^servers:/,$d' examples/sluice.yaml >"$ex/sluice.yaml"
rc=$(cli_in_etc "$ex" "$o" "$e" policy check examples/policies/data-analyst.yaml)
check_eq "installed config without warehouse: data-analyst fails" 1 "$rc"
check_match "the error names the unknown server" \
    '^examples/policies/data-analyst.yaml:[0-9]+:[0-9]+: unknown MCP server "warehouse"' "$(cat "$e")"
# --config wins over the installed one.
rc=$(cli_in_etc "$ex" "$o" "$e" policy check --config examples/sluice.yaml \
    examples/policies/data-analyst.yaml)
check_eq "--config wins over /etc/sluice/sluice.yaml" 0 "$rc"
check_eq "--config: first line names it" \
    "server names checked against examples/sluice.yaml" "$(head -n 1 "$o")"
# An installed config that does not load is an error, as with --config.
echo "version: 2" >"$ex/sluice.yaml"
rc=$(cli_in_etc "$ex" "$o" "$e" policy check examples/policies/locked-down.yaml)
check_eq "a broken /etc/sluice/sluice.yaml fails the check" 1 "$rc"
check_match "its error names the file" '^/etc/sluice/sluice.yaml:' "$(cat "$e")"
check_eq "the machine's /etc was not touched" "" \
    "$(find /etc/sluice -newer "$E2E_TMP" 2>/dev/null)"

n=0
for f in tests/policy/hostile/*.yaml; do
	n=$((n + 1))
	rc=$(run_cli "$o" "$e" policy check --config tests/policy/config.yaml "$f")
	check_eq "hostile $(basename "$f") exits 1" 1 "$rc"
	check_eq "hostile $(basename "$f") message" \
	    "$(cat "${f%.yaml}.expect")" "$(cat "$e")"
done
if [ "$n" -ge 20 ]; then ok "hostile corpus has $n files"; else
	not_ok "hostile corpus has only $n files"; fi

# A good and a bad file together: exit 1, the good one still reported ok.
rc=$(cli_in_etc - "$o" "$e" policy check examples/policies/locked-down.yaml \
    tests/policy/hostile/dupkey.yaml)
check_eq "mixed check exits 1" 1 "$rc"
check_eq "mixed check reports the good file" \
    "examples/policies/locked-down.yaml: ok" "$(grep -v "^$NOCFG$" "$o")"

# Too big to commit: generated here.
big=$E2E_TMP/big.yaml
{ echo "version: 1"; head -c 1100000 /dev/zero | tr '\0' '#'; echo; } >"$big"
rc=$(run_cli "$o" "$e" policy check "$big")
check_eq "1 MiB+ file exits 1" 1 "$rc"
check_eq "1 MiB+ file message" "$big:0:0: file is larger than 1 MiB" "$(cat "$e")"

# explain: FILE ARGS -> expected "decision rule reason" and exit status.
P=examples/policies/coding-agent.yaml
explain() {
	local want=$1 wantrc=$2; shift 2
	local rc got
	rc=$(run_cli "$o" "$e" policy explain "$@")
	got=$(sed -n 's/^decision: //p; s/^rule: //p; s/^reason: //p' "$o" | paste -sd' ')
	check_eq "explain $* -> $want" "$want" "$got"
	check_eq "explain $* exit status" "$wantrc" "$rc"
}
explain "allow egress.allow[0] allowed" 0 $P --egress pypi.org:443
explain "allow egress.allow[1] allowed" 0 $P --egress files.pythonhosted.org:443/tcp
explain "deny default no_matching_rule" 1 $P --egress pythonhosted.org:443
explain "deny default no_matching_rule" 1 $P --egress pypi.org:80
explain "deny egress.deny[0] explicit_deny" 1 $P --egress x.evil.example:443
explain "deny class:metadata always_denied_class" 1 $P --egress 169.254.169.254:80
explain "deny class:metadata always_denied_class" 1 $P --egress '[::ffff:169.254.169.254]:80'
explain "deny class:private private_range" 1 $P --egress 10.0.0.1:443
explain "allow egress.allow[5] allowed" 0 $P --egress 198.51.100.9:8080
explain "deny egress.deny[1] explicit_deny" 1 $P --egress 203.0.113.66:443
explain "allow mcp.taint.keep[0] allowed" 0 $P --egress pypi.org:443 --tainted
explain "deny mcp.taint tainted" 1 $P --egress github.com:443 --tainted
explain "allow mcp.tools[0] allowed" 0 $P --tool everything/echo --args '{"message":"hello"}'
explain "deny mcp.tools[0] argument_constraint" 1 $P --tool everything/echo --args '{"message":"\u0007"}'
explain "deny mcp.tools[0] missing_argument" 1 $P --tool everything/echo --args '{}'
explain "deny mcp.tools[1] argument_constraint" 1 $P --tool files/read_file --args '{"path":"/workspace/../etc/passwd"}'
explain "allow mcp.tools[1] allowed" 0 $P --tool files/read_file --args '{"path":"/workspace/src/main.c"}'
explain "ask mcp.tools[2] approval_required" 0 $P --tool files/write_file --args '{"path":"/workspace/a","content":"x"}' --subject team-red
explain "deny default no_matching_rule" 1 $P --tool files/write_file --args '{"path":"/workspace/a","content":"x"}' --subject mallory
explain "deny mcp.tools[3] rule_deny" 1 $P --tool everything/printEnv --args '{}'
explain "deny mcp.tools[0] bad_arguments" 1 $P --tool everything/echo --args 'not json'

rc=$(run_cli "$o" "$e" policy explain $P --tool everything/echo --args '{"message":"tab\there"}')
check_match "explain prints the agent's message on denial" \
    '^message: Argument "message" does not match the allowed pattern\.$' "$(cat "$o")"

# explain for a host name also answers for the DNS proxy: would it resolve
# the name (A/AAAA), by which rule, and what would its answers open. A name
# the proxy refuses cannot be reached, whatever the egress rules say.
explain_dns() {
	local want=$1 wantrc=$2; shift 2
	local rc got
	rc=$(run_cli "$o" "$e" policy explain "$@")
	got=$(sed -n 's/^dns: //p; s/^dns_rule: //p; s/^dns_reason: //p;
	    s/^dns_types: //p; s/^dns_opens: //p' "$o" | paste -sd'|')
	check_eq "explain dns $* -> $want" "$want" "$got"
	check_eq "explain dns $* exit status" "$wantrc" "$rc"
}
explain_dns "allow|egress.allow[0]|allowed|A AAAA|tcp/443" 0 $P --egress pypi.org:443
explain_dns "allow|egress.allow[0]|allowed|A AAAA|tcp/443" 1 $P --egress pypi.org:80
explain_dns "allow|egress.allow[0]|allowed|A AAAA|tcp/443" 0 $P --egress PyPI.org.:443
explain_dns "allow|egress.allow[3]|allowed|A AAAA|tcp/443 tcp/22" 0 $P --egress github.com:22
explain_dns "allow|egress.allow[3]|allowed|A AAAA|tcp/443 tcp/22" 1 $P --egress github.com/icmp
explain_dns "allow|egress.allow[1]|allowed|A AAAA|tcp/443" 1 $P --egress files.pythonhosted.org:443/udp
explain_dns "deny|egress.deny[0]|explicit_deny" 1 $P --egress x.evil.example:443
explain_dns "deny|default|no_matching_rule" 1 $P --egress pythonhosted.org:443
explain_dns "deny|mcp.taint|tainted" 1 $P --egress github.com:443 --tainted
explain_dns "allow|mcp.taint.keep[0]|allowed|A AAAA|tcp/443" 0 $P --egress pypi.org:443 --tainted
explain_dns "synthetic|synthetic|synthetic" 1 $P --egress bridge.sluice.internal:8080
explain_dns "deny|input|bad_name" 1 $P --egress 'a..b:443'
# Address literals involve no DNS: no dns lines.
explain_dns "" 1 $P --egress 10.0.0.1:443
explain_dns "" 0 $P --egress 198.51.100.9:8080
explain_dns "" 1 $P --egress '[2001:db8::1]:443'
# Egress allows this name, but the proxy refuses it as a suspected tunnel.
tun=abcdefghijklmnopqrstuvwxyz0123.pythonhosted.org:443
explain "allow egress.allow[1] allowed" 1 $P --egress $tun
explain_dns "deny|dns.limits|high_entropy" 1 $P --egress $tun
explain_dns "deny|dns.limits|label_too_long" 1 examples/policies/data-analyst.yaml \
    --egress "$(printf 'a%.0s' $(seq 51)).data.example.org:443"
# Types: only the listed ones are answered.
ta=$E2E_TMP/types-a.yaml ttxt=$E2E_TMP/types-txt.yaml
printf 'version: 1\negress:\n  allow:\n    - {host: "*.example.com", ports: [443, "8000-8100"]}\n    - {host: a.example.com, protocol: udp, ports: [53]}\ndns:\n  types: [A]\n' >"$ta"
printf 'version: 1\negress:\n  allow:\n    - {host: a.example.com, ports: [443]}\ndns:\n  types: [TXT]\n' >"$ttxt"
explain_dns "allow|egress.allow[0]|allowed|A|tcp/443 tcp/8000-8100 udp/53" 0 "$ta" --egress a.example.com:443
explain_dns "deny|default|no_matching_rule" 1 "$ta" --egress example.com:443
explain_dns "deny|dns.types|type_not_allowed" 1 "$ttxt" --egress a.example.com:443
# The name gate's check on each TCP port a name opens.
tc=$E2E_TMP/checks.yaml
printf 'version: 1\negress:\n  allow:\n    - {host: pypi.org, ports: [443, 80, 22, "8000-8100"]}\n    - {host: git.example.org, ports: [443], check: none}\n    - {host: "*.example.org", ports: ["1-1000"], check: http}\n' >"$tc"
checks() { run_cli "$o" "$e" policy explain "$tc" --egress "$1" >/dev/null; sed -n 's/^dns_checks: //p' "$o"; }
check_eq "explain: checks by port (443 tls, 80 http, others none)" \
    "tcp/443=tls tcp/80=http tcp/22=none tcp/8000-8100=none" "$(checks pypi.org:443)"
check_eq "explain: an explicit check, and the first rule's inside a range" \
    "tcp/443=none tcp/1-1000=http,443=none" "$(checks git.example.org:443)"
# The byte budget an allowed flow is counted against.
tb=$E2E_TMP/budgets.yaml
printf 'version: 1\negress:\n  allow:\n    - {host: up.example.org, ports: [443], budget: 100MiB, window: 1h}\n    - {cidr: 192.0.2.0/24, ports: [80], budget: 64KiB}\n    - {host: pypi.org, ports: [443]}\nmcp:\n  taint: {budget: 1MiB, keep: [{host: up.example.org, ports: [443]}]}\n' >"$tb"
budget_of() { run_cli "$o" "$e" policy explain "$tb" "$@" >/dev/null; sed -n 's/^\(egress\|taint\)_budget: //p' "$o" | paste -sd'|'; }
check_eq "explain: a rule's budget and window" "104857600 bytes per 3600s window" \
    "$(budget_of --egress up.example.org:443)"
check_eq "explain: a CIDR rule's budget for the sandbox's life" \
    "65536 bytes for the sandbox's life" "$(budget_of --egress 192.0.2.7:80)"
check_eq "explain: a rule without a budget" none "$(budget_of --egress pypi.org:443)"
check_eq "explain: the taint budget once tainted" "1048576 bytes from the taint on" \
    "$(budget_of --egress up.example.org:443 --tainted)"

# Usage errors exit 2.
for args in "policy" "policy frob" "policy check" "policy explain $P" \
    "policy explain $P --egress pypi.org" "policy explain $P --egress pypi.org:99999" \
    "policy explain $P --tool everything/echo" "policy explain $P --tool everything --args {}" \
    "policy explain $P --egress pypi.org:443 --tool everything/echo --args {}"; do
	# shellcheck disable=SC2086
	rc=$(run_cli "$o" "$e" $args)
	check_eq "usage error: sluice $args" 2 "$rc"
done

exit $((E2E_FAILS > 0))
