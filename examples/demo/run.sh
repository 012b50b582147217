#!/bin/bash
# examples/demo/run.sh: `make demo`, the first hour of a security engineer.
#
# One command that shows the whole job on this machine, with nothing faked:
# a self-contained world in network namespaces (a fake internet with a
# package index, an attacker's server, a cloud metadata service holding fake
# credentials and an upstream resolver: tests/e2e/world.sh), the real
# daemon (build/sluiced) started with a config derived from
# examples/sluice.yaml and the demo policy, an MCP server holding a fake
# credential (the reference server-everything over stdio, a child of
# sluiced), and a scripted agent (agent.sh) that works and misbehaves
# inside a sandbox, on the network and through the capability bridge. What
# was allowed and denied is then read back FROM THE AUDIT LOG, the log is
# verified, a copy is tampered with and verify catches it, and everything
# made is removed (also on Ctrl-C or failure).
#
#   examples/demo/run.sh [--step] [--keep DIR]
#     --step      pause between acts (Enter to go on; ignored without a TTY)
#     --keep DIR  copy the audit log, its key, the summary (summary.tsv, far.tsv) and
#                 the verify reports to DIR before cleaning up (tests use it)
#
# Needs root (namespaces, nftables), `make deps all` (make demo does it).
# Traffic stays inside the namespaces made here; fake hosts use
# documentation addresses only. Exit status 0 when every act ran and the
# log verified and the tampering was caught; 1 otherwise.
set -u

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEMO_DIR=$TOP/examples/demo
STEP=0
KEEP=
usage() {
	echo "usage: examples/demo/run.sh [--step] [--keep DIR]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--step) STEP=1 ;;
	--keep) [ $# -ge 2 ] || usage; KEEP=$2; shift ;;
	-h|--help) sed -n '2,/^set -u/p' "$0" | sed -e '/^set -u/d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) usage ;;
	esac
	shift
done
# Pauses only make sense with a person at a terminal.
[ -t 0 ] && [ -t 1 ] || STEP=0

# The optimised build (make all), not the test build. Copied below, so a
# rebuild while the demo runs cannot pull the binaries from under it.
SLUICE_BUILD=${SLUICE_BUILD:-$TOP/build}

# ------------------------------------------------------------ output

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
	C_B=$'\e[1m' C_D=$'\e[2m' C_R=$'\e[31m' C_G=$'\e[32m' C_Y=$'\e[33m'
	C_C=$'\e[36m' C_0=$'\e[0m'
else
	C_B='' C_D='' C_R='' C_G='' C_Y='' C_C='' C_0=''
fi
ACTN=0
T0=$(date +%s)
# act TITLE WHY: the header of one act and a one-line reason it matters.
act() {
	ACTN=$((ACTN + 1))
	printf '\n%s[%2d] %s%s %st+%ds%s\n' "$C_B" "$ACTN" "$1" "$C_0" "$C_D" \
	    $(($(date +%s) - T0)) "$C_0"
	wrap "$2" "$C_D"
}
info() { printf '     %s\n' "$*"; }
# wrap TEXT [COLOUR]: TEXT folded to 72 columns, indented like info.
wrap() {
	printf '%s\n' "$1" | fold -s -w 72 |
	    sed "s/ *\$//; s/^/     ${2:-}/; s/\$/${2:+$C_0}/"
}
good() { printf '     %s%s%s\n' "$C_G" "$*" "$C_0"; }
bad() { printf '     %s%s%s\n' "$C_R" "$*" "$C_0"; }
pause() {
	[ "$STEP" -eq 1 ] || return 0
	printf '%s     -- Enter for the next act --%s' "$C_D" "$C_0"
	read -r _ || true
}
# die MSG: stop; the daemon's last words first, since cleanup removes them.
die() {
	bad "demo: $*"
	if [ -s "${WORLD_DIR:-/nonexistent}/log/sluiced.log" ]; then
		info "sluiced's log, last lines:"
		tail -n 15 "$WORLD_DIR/log/sluiced.log" | sed 's/^/       /'
	fi
	exit 1
}

# ------------------------------------------------------------ the world

# world.sh is the end-to-end tests' world; it needs these few helpers from
# tests/e2e/lib.sh, whose assertion helpers the demo does not use.
E2E_DIR=$TOP/tests/e2e
[ -f "$E2E_DIR/world.sh" ] || die "no $E2E_DIR/world.sh"
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, nftables)"
E2E_TMP=$(mktemp -d /tmp/sluice-demo.XXXXXX) || die "mktemp"
_CLEANUP=()
cleanup_push() { _CLEANUP+=("$*"); }
wait_for() {
	local limit=$(($1 * 10)) i=0; shift
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1)); [ $i -ge $limit ] && return 1
		sleep 0.1
	done
}
require_root() { [ "$(id -u)" -eq 0 ]; }
_demo_cleanup() {
	local i
	trap '' INT TERM
	for ((i = ${#_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${_CLEANUP[$i]}" >/dev/null 2>&1 || true
	done
	_CLEANUP=()
	rm -rf "$E2E_TMP"
}
trap '_demo_cleanup' EXIT
trap 'printf "\n%sinterrupted: cleaning up%s\n" "$C_Y" "$C_0"; exit 130' INT TERM

# Unique names: this run's namespaces are sld<pid>-host and sld<pid>-inet,
# its sandbox sluice-demo<pid>.
WORLD_TAG=sld$$
# shellcheck source=tests/e2e/world.sh
. "$E2E_DIR/world.sh"

for t in jq sqlite3 curl dig node dnsmasq nsenter ip nft python3; do
	command -v "$t" >/dev/null || die "$t not found (make deps installs it)"
done
# The MCP server of the demo and the agent's client: npm packages the
# end-to-end tests install (make deps).
EVERYTHING=$E2E_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
[ -e "$EVERYTHING" ] && [ -d "$E2E_DIR/node_modules/@modelcontextprotocol/sdk" ] ||
    die "no MCP server-everything/SDK in $E2E_DIR/node_modules (make deps)"
mkdir -p "$E2E_TMP/bin"
for b in sluiced sluice; do
	[ -x "$SLUICE_BUILD/$b" ] || die "no $SLUICE_BUILD/$b (make all builds it)"
	cp "$SLUICE_BUILD/$b" "$E2E_TMP/bin/$b" || die "copy $b"
done
SLUICED=$E2E_TMP/bin/sluiced
SLUICE=$E2E_TMP/bin/sluice

printf '%sSluice demo%s: an agent in a sandbox, its network and its audit log.\n' \
    "$C_B" "$C_0"
info "world: $WORLD_HOST_NS (sluiced) and $WORLD_INET_NS (the fake internet)"

world_up || die "the demo world did not come up"

# The daemon's config: examples/sluice.yaml with this run's directories,
# network, resolver and audit key. Top-level sections are copied as they
# are, except those replaced here; audit sinks are left out (no SOC in the
# demo) and the MCP servers are the demo's one: "ev", server-everything
# over stdio, whose credential (a fake API token, in a file only root can
# read) sluiced hands to the child's environment, never to the sandbox.
STATE=$WORLD_DIR/state
SECRETS=$E2E_TMP/secrets
mkdir -p "$SECRETS" && chmod 0700 "$SECRETS" || die "secrets dir"
CRED="demo-secret-$$-$RANDOM$RANDOM"
printf '%s' "$CRED" >"$SECRETS/ev.cred" || die "credential file"
NODE=$(command -v node)
POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
KEY=$STATE/audit.key
ORIGIN=demo.sluice.example/$WORLD_TAG
mkdir -p "$POL" "$STATE" "$WORLD_DIR/run"
cp "$DEMO_DIR/policies/demo.yaml" "$DEMO_DIR/policies/demo-limits.yaml" \
    "$POL/" || die "demo policies"
VKEY=$("$SLUICE" audit keygen --origin "$ORIGIN" --out "$KEY") ||
    die "sluice audit keygen"
echo "$VKEY" >"$E2E_TMP/audit.vkey"
awk -v state="$STATE" -v run="$WORLD_DIR/run" -v sock="$WORLD_SOCK" \
    -v pol="$POL" -v pool="$WORLD_POOL" -v svc="$WORLD_SERVICE" \
    -v port="$WORLD_BRIDGE_PORT" -v up="$WORLD_UPLINK" -v dns="$WORLD_DNS" \
    -v key="$KEY" -v origin="$ORIGIN" -v node="$NODE" -v ev="$EVERYTHING" \
    -v cred="$SECRETS/ev.cred" -v tag="$WORLD_TAG" '
	function block(k) {
		if (k == "state_dir") print "state_dir: " state
		else if (k == "run_dir") print "run_dir: " run
		else if (k == "socket") print "socket: " sock
		else if (k == "policy_dir") print "policy_dir: " pol
		else if (k == "network") {
			print "network:"
			print "  pool: " pool
			print "  service_address: " svc
			print "  bridge_port: " port
			print "  uplink: " up
			print "  ipv6: false"
			print "  treat_as_public:"
			print "    - 192.0.2.0/24"
			print "    - 198.51.100.0/24"
			print "    - 203.0.113.0/24"
			print "    - 2001:db8::/32"
		} else if (k == "dns") {
			print "dns:"
			print "  upstreams:"
			print "    - " dns
			print "  timeout_ms: 2000"
		} else if (k == "audit") {
			print "audit:"
			print "  db: " state "/audit.db"
			print "  key: " key
			print "  origin: " origin
		} else if (k == "servers") {
			print "servers:"
			print "  - name: ev"
			print "    transport: stdio"
			print "    command: [" node ", " ev ", stdio]"
			# SLUICE_DEMO_RUN marks the server process of this run,
			# so that a test can tell it is gone afterwards.
			print "    env: {PATH: /usr/local/bin:/usr/bin:/bin, SLUICE_DEMO_RUN: " tag "}"
			print "    credential: {file: " cred ", child_env: API_TOKEN}"
		} else if (k == "audit_sinks") ;
		else return 0
		return 1
	}
	/^[a-z_]+:/ {
		k = $1; sub(/:.*/, "", k)
		skip = block(k)
		if (skip) next
	}
	/^[ #]/ && skip { next }
	/^$/ { skip = 0 }
	{ print }
    ' "$TOP/examples/sluice.yaml" >"$CFG" || die "config"
world_start_sluiced "$CFG" || die "sluiced did not start"
info "sluiced: config derived from examples/sluice.yaml, audit key $VKEY"

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
au() { "$SLUICE" audit "$@"; }
DB=$STATE/audit.db
ID=demo$$
sl sandbox create --policy demo --id "$ID" --subject demo-agent \
    --label demo=make-demo >"$E2E_TMP/sandbox.json" ||
    die "sluice sandbox create"
IFACE=$(jq -r '.interface // empty' "$E2E_TMP/sandbox.json")
[ -n "$IFACE" ] || die "sluice sandbox create named no interface"
info "sandbox: $ID (policy demo, address $(jq -r .address "$E2E_TMP/sandbox.json"), host link ${IFACE:-?})"
pause

# agent ACT: run the scripted agent inside the sandbox; its own report of
# what it saw is shown indented. The outcome that counts is the log's.
# `sluice exec --net-raw` gives it raw sockets (ping) and nothing else; the
# IPv6 act plays a workload a provider runs as full root in the namespace
# (`ip netns exec`), which is what the kernel rules must hold against.
agent() {
	if [ "${1#limits-}" != "$1" ]; then
		# A sandbox of its own, made and removed by `sluice run`.
		sl run --policy demo-limits --subject demo-agent -- \
		    "$DEMO_DIR/agent.sh" "$1" 2>&1 | head -n 20
	elif [ "$1" = meta-v6 ]; then
		ip netns exec "sluice-$ID" "$DEMO_DIR/agent.sh" "$1" 2>&1 |
		    head -n 20
	else
		sl exec --net-raw "$ID" -- "$DEMO_DIR/agent.sh" "$1" 2>&1 |
		    head -n 20
	fi
	return "${PIPESTATUS[0]}"
}

# ------------------------------------------------------------ acts
#
# Each act: an id, a title, a one-line why, and a jq filter that selects
# the audit records the act caused (by what they are about: name,
# destination, protocol; never by what the demo expects the outcome to be).
# The summary table is built from those records.

ACT_IDS=()
declare -A ACT_TITLE ACT_SEL ACT_FAR ACT_NUM FAR
# def_act ID TITLE FILTER FAR: FAR names the far side that shows whether
# the attempt arrived: pkg, attacker, metadata (packets counted where they
# would arrive) or resolver (the upstream resolver's query log).
def_act() {
	ACT_IDS+=("$1"); ACT_TITLE[$1]=$2; ACT_SEL[$1]=$3; ACT_FAR[$1]=$4
}

# The sandbox's records: those naming it, and denied packets from its link
# that name no sandbox. sluiced aggregates denied packets for up to a
# second before it writes them, and an aggregate written after the sandbox
# was removed (at the latest when sluiced stops) carries only the link.
SB="((.sandbox.id // \"\") == \"$ID\" or (.kind == \"net.deny\" and (.sandbox.id // \"\") == \"\" and .iface == \"$IFACE\"))"
def_act install "install demo-pkg from the index" \
    "$SB and .kind == \"dns.decision\" and .q.name == \"pkg.example.com\"" pkg
def_act exfil-name "exfiltrate by name (evil.example.net)" \
    "$SB and .kind == \"dns.decision\" and .q.name == \"evil.example.net\"" attacker
def_act exfil-addr "exfiltrate by address (198.51.100.66)" \
    "$SB and .kind == \"net.deny\" and .dst.ip == \"$WORLD_ATTACKER\" and .proto == \"tcp\"" attacker
def_act exfil-icmp "exfiltrate over ICMP" \
    "$SB and .kind == \"net.deny\" and .dst.ip == \"$WORLD_ATTACKER\" and (.proto | test(\"icmp\"))" attacker
def_act exfil-dns "exfiltrate over DNS tunnelling" \
    "$SB and ((.kind == \"dns.decision\" and (.q.name | endswith(\".t.evil.example.net\"))) or (.kind == \"finding\" and (.detail // \"\" | test(\"[.]t[.]evil[.]example[.]net\"))))" resolver
def_act meta-v4 "metadata over IPv4 (169.254.169.254)" \
    "$SB and .kind == \"net.deny\" and .dst.ip == \"$WORLD_META\"" metadata
# IPv6 is off on both ends of every sandbox link, so a packet to the IPv6
# metadata address dies in the host's kernel before any nftables rule sees
# it: there is no decision to record. What the log holds about it is the
# sandbox's creation record, which states the sandbox's IPv6 (its "ipv6"
# field); the act shows the kernel state beside it, and any denied packet
# to the address would be selected too.
def_act meta-v6 "metadata over IPv6 (fd00:ec2::254)" \
    "$SB and ((.kind == \"net.deny\" and .dst.ip == \"$WORLD_META6\") or (.kind == \"sandbox.create\" and .decision == \"allow\"))" metadata
def_act meta-rebind "metadata through a rebinding name" \
    "$SB and ((.kind == \"dns.decision\" and .q.name == \"rebind.example.com\") or (.kind == \"finding\" and (.detail // \"\" | test(\"rebind[.]example[.]com\"))))" metadata
# The MCP acts: mcp.call records of the tool each act calls (the two echo
# acts told apart by their argument), and for the taint act its taint
# findings, what the DNS proxy decided about the web server's name (before
# and after the taint) and any denied packet to its address. Their far
# side is none (the calls go to Sluice's bridge), except the taint act's:
# the web server, counted from the moment the sandbox was tainted.
MCALL="$SB and .kind == \"mcp.call\" and .server == \"ev\""
def_act mcp-allowed "MCP: an allowed tool call" \
    "$MCALL and .tool == \"echo\" and (.arguments | tostring | test(\"hello from\"))" none
def_act mcp-forbidden-arg "MCP: a forbidden argument" \
    "$MCALL and .tool == \"echo\" and (.arguments | tostring | test(\"shadow\"))" none
def_act mcp-approval "MCP: a call that needs approval" \
    "$MCALL and .tool == \"get-annotated-message\"" none
def_act mcp-budget "MCP: a budget exhausted" \
    "$MCALL and .tool == \"get-sum\"" none
def_act mcp-redaction "MCP: credential redacted in a result" \
    "$MCALL and .tool == \"get-env\"" none
def_act mcp-taint "MCP: a tainting result narrows egress" \
    "($MCALL and .tool == \"get-tiny-image\") or ($SB and .kind == \"finding\" and (.type // \"\" | test(\"taint\"))) or ($SB and .kind == \"dns.decision\" and .q.name == \"web.example.org\") or ($SB and .kind == \"net.deny\" and .dst.ip == \"$WORLD_WEB\")" web
# The resources acts: each under `sluice run` in a sandbox of its own
# (policy demo-limits: pids 64, memory 64MiB), selected by the finding
# the daemon writes from the kernel's counters of that sandbox's cgroup.
def_act limits-bomb "resources: a fork bomb (64 pids)" \
    ".kind == \"finding\" and .type == \"sandbox.pids_limit\"" none
def_act limits-hog "resources: a memory hog (64MiB)" \
    ".kind == \"finding\" and .type == \"sandbox.oom_kill\"" none
# An act whose agent call waits for a person: run.sh approves it from
# outside the sandbox (sluice approve) while the call is held.
declare -A ACT_APPROVE ACT_PRE
ACT_APPROVE[mcp-approval]=1
# An act with a first step before its far side is counted: the taint act
# receives the confidential result first, then tries the web server.
ACT_PRE[mcp-taint]=mcp-taint-call
# An act with kernel evidence shown around the agent's attempt (from
# outside the sandbox): ACT_PROOF names the function.
declare -A ACT_PROOF
ACT_PROOF[meta-v6]=v6_proof
ACT_PROOF[limits-bomb]=load_proof
ACT_PROOF[limits-hog]=load_proof

# load_proof WHEN: the host's load and free memory, from outside: the host
# stays responsive while a sandbox's processes run into their limits.
load_proof() {
	info "${C_C}host, $1: load $(cut -d' ' -f1-3 /proc/loadavg), $(awk '/^MemAvailable/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo) available, $(ls -d /proc/[0-9]* | wc -l) processes${C_0}"
}

# v6_proof WHEN: the IPv6 state of the sandbox's link, read from the kernel
# on both ends (ip and sysctl, from outside the sandbox).
v6_proof() {
	local ns=sluice-$ID a r d h ha
	a=$(ip -n "$ns" -6 -o addr show 2>/dev/null | awk '{ print $2 " " $4 }' |
	    paste -sd, - | sed 's/,/, /g')
	# Destinations only: "default" is the one that matters.
	r=$(ip -n "$ns" -6 route show 2>/dev/null | awk '{ print $1 }' |
	    paste -sd, - | sed 's/,/, /g')
	d=$(world_sandbox "$ID" sysctl -n net.ipv6.conf.eth0.disable_ipv6 2>/dev/null)
	info "${C_C}kernel, $1: in the sandbox: IPv6 addresses: ${a:-none}; routes: ${r:-none}; eth0 disable_ipv6=${d:-?}${C_0}"
	if [ -n "${IFACE:-}" ]; then
		h=$(world_host sysctl -n "net.ipv6.conf.$IFACE.disable_ipv6" 2>/dev/null)
		ha=$(world_host ip -6 -o addr show dev "$IFACE" 2>/dev/null |
		    awk '{ print $4 }' | paste -sd, -)
		info "${C_C}kernel, $1: host side $IFACE: disable_ipv6=${h:-?}, IPv6 addresses: ${ha:-none}${C_0}"
	fi
}

# Packet counters at the far end, in the world's internet namespace (a
# throwaway namespace of this run, never the machine's own ruleset): what
# arrives over its uplink before any socket sees it, so that a lone SYN or
# an ICMP echo that got out would be counted even though no server logs it.
world_inet nft -f - <<EOF || die "counters in $WORLD_INET_NS"
table inet sldemo {
	counter c_pkg {}
	counter c_attacker {}
	counter c_metadata {}
	counter c_web {}
	chain pre {
		type filter hook prerouting priority -300; policy accept;
		iifname "inet0" ip daddr $WORLD_PKG counter name c_pkg
		iifname "inet0" ip daddr $WORLD_ATTACKER counter name c_attacker
		iifname "inet0" ip daddr $WORLD_WEB counter name c_web
		iifname "inet0" ip daddr 169.254.0.0/16 counter name c_metadata
		iifname "inet0" ip6 daddr $WORLD_META6 counter name c_metadata
	}
}
EOF
cnt() {
	world_inet nft -j list counter inet sldemo "c_$1" 2>/dev/null |
	    jq '.nftables[] | select(.counter) | .counter.packets'
}
# far_clear ACT / far_count ACT: what reached the act's far side in
# between: packets (pkg, attacker, metadata) or queries the upstream
# resolver logged (resolver).
declare -A FAR0
far_clear() {
	case ${ACT_FAR[$1]} in
	none) ;;
	resolver) world_resolver_clear ;;
	*) FAR0[$1]=$(cnt "${ACT_FAR[$1]}") ;;
	esac
}
far_count() {
	case ${ACT_FAR[$1]} in
	none) echo - ;;
	resolver) world_resolver_log | grep -c 't\.evil\.example\.net' ;;
	*) echo $(($(cnt "${ACT_FAR[$1]}") - ${FAR0[$1]:-0})) ;;
	esac
}

# approve_pending: outside the sandbox, a person (here: this script) waits
# for the held call to show up in `sluice approvals`, looks at it and
# approves it with `sluice approve`. Bounded: 30 s for the call to appear.
approve_pending() {
	local aid
	if ! wait_for 30 sh -c "'$SLUICE' -s '$WORLD_SOCK' approvals --json | jq -e 'length == 1'"; then
		bad "no pending approval appeared"
		return 1
	fi
	info "${C_C}outside the sandbox, a person runs: sluice approvals${C_0}"
	sl approvals 2>&1 | head -n 5 | sed 's/^/       /'
	aid=$(sl approvals --json | jq -r '.[0].id // empty')
	info "${C_C}and approves it: sluice approve $aid --reason \"demo: looks fine\"${C_0}"
	sl approve "$aid" --reason "demo: looks fine" >/dev/null ||
	    bad "sluice approve $aid failed"
}

run_act() {
	local a=$1 why=$2 rc
	act "${ACT_TITLE[$a]}" "$why"
	ACT_NUM[$a]=$ACTN
	if [ -n "${ACT_PRE[$a]:-}" ]; then
		agent "${ACT_PRE[$a]}"
		case $? in
		0) info "${C_C}agent's view: it got through${C_0}" ;;
		*) info "${C_Y}agent's first step did not get through${C_0}" ;;
		esac
	fi
	[ -n "${ACT_PROOF[$a]:-}" ] && "${ACT_PROOF[$a]}" before
	far_clear "$a"
	if [ -n "${ACT_APPROVE[$a]:-}" ]; then
		agent "$a" &
		local apid=$!
		approve_pending
		wait "$apid"; rc=$?
	else
		agent "$a"; rc=$?
	fi
	case $rc in
	0) info "${C_C}agent's view: it got through${C_0}" ;;
	1) info "${C_C}agent's view: it was stopped${C_0}" ;;
	*) info "${C_Y}agent exited $rc${C_0}" ;;
	esac
	FAR[$a]=$(far_count "$a")
	[ -n "${ACT_PROOF[$a]:-}" ] && "${ACT_PROOF[$a]}" after
	if [ "${ACT_FAR[$a]}" = none ]; then
		:
	elif [ "${ACT_FAR[$a]}" = resolver ]; then
		info "${C_C}far side: the upstream resolver logged ${FAR[$a]} of these queries${C_0}"
	else
		info "${C_C}far side: ${FAR[$a]} packet(s) from this act reached the ${ACT_FAR[$a]} address${C_0}"
	fi
	pause
}

run_act install \
    "Honest work first: a package by name from the allowed index, checksum verified. Allowed names are learned into the kernel before the answer."
run_act exfil-name \
    "A prompt-injected agent sends a secret to the attacker's domain. Denied names get NXDOMAIN and never reach the upstream."
run_act exfil-addr \
    "No DNS needed: the attacker's address, hard-coded. Only addresses the proxy answered for allowed names are open."
run_act exfil-icmp \
    "Data hidden in ping payloads. ICMP is off unless the policy turns it on."
run_act exfil-dns \
    "The classic covert channel: data encoded in long labels of DNS queries, also aimed at a resolver of its own choosing."
run_act meta-v4 \
    "Cloud metadata hands out instance credentials. Always denied, whatever a policy says."
run_act meta-v6 \
    "The same service over IPv6, after root in the sandbox re-enables IPv6. No IPv6 path bypasses the rules: the host's end of the link has no IPv6 at all."
run_act meta-rebind \
    "A name the policy allows answers with the metadata address (DNS rebinding). Answers are classified, not trusted."

# The capability bridge acts: the agent calls tools of "ev" through Sluice
# with the official MCP SDK client and its sandbox token.
run_act mcp-allowed \
    "The agent calls everything/echo through Sluice, which holds the upstream credential."
run_act mcp-forbidden-arg \
    "A call whose argument breaks the policy's constraint is refused before it reaches the server."
run_act mcp-approval \
    "The call is held until a person runs \`sluice approve\` from outside the sandbox."
run_act mcp-budget \
    "Cumulative budgets (calls, cost, result bytes) stop a runaway loop: get-sum has a budget of 3 calls."
run_act mcp-redaction \
    "The MCP server holds a credential (API_TOKEN) in its environment; get-env returns that environment. Secrets in a tool result never reach the sandbox."
run_act mcp-taint \
    "After confidential data arrives, the sandbox's outbound access shrinks at once (nftables) to the policy's keep list: the web server it used by name closes, by name and by address; the package index, kept by name, stays."

# Resources: what `sluice run` starts is held to the policy's limits by the
# kernel (the sandbox's cgroup), and the daemon records when they are hit.
run_act limits-bomb \
    "A runaway agent starts a fork bomb (bounded here: 500 attempts). The sandbox's cgroup holds it to 64 processes; the host never notices."
run_act limits-hog \
    "It then asks for 512 MiB. At the policy's 64 MiB the kernel's OOM killer ends it, in the sandbox's cgroup only."
pause

# ------------------------------------------------------------ the log

act "What the audit log says" \
    "Every decision above is a record; the table below is read from them (sluice audit tail --format json | jq), not from this script."
# Records are written asynchronously and denied packets are aggregated per
# second: wait (bounded) until every act has at least one record, so the
# table is complete; a missing record shows as such, it is not filled in.
have_all() {
	local a sel=
	au tail --db "$DB" --format json >"$E2E_TMP/tail.json" 2>/dev/null || return 1
	for a in "${ACT_IDS[@]}"; do
		sel="$sel and any(.[]; $(printf '%s' "${ACT_SEL[$a]}"))"
	done
	jq -e -s "true $sel" "$E2E_TMP/tail.json" >/dev/null
}
# Bounded in time, not in tries: one try reads the whole log.
deadline=$((SECONDS + 15))
until have_all; do
	if [ "$SECONDS" -ge "$deadline" ]; then
		info "${C_Y}(some acts left no record within 15 s)${C_0}"
		break
	fi
	sleep 0.2
done
# Remove the sandbox through the daemon (a sandbox.delete record) and stop
# it (log.close): the log is complete and sealed before it is read.
sl sandbox rm "$ID" >/dev/null || bad "sluice sandbox rm $ID failed"
world_stop_sluiced || bad "sluiced did not stop cleanly"
au tail --db "$DB" --format json >"$E2E_TMP/tail.json" || die "sluice audit tail"
NREC=$(grep -c . "$E2E_TMP/tail.json")
info "$NREC records, seq 0..$((NREC - 1)), in $DB"

# summary.tsv: act, kind, decision, reason, count, first seq; one row per
# (act, kind, decision, reason) found in the records. count is the number
# of records, or for net.deny the packets they aggregate.
: >"$E2E_TMP/summary.tsv"
: >"$E2E_TMP/far.tsv"
for a in "${ACT_IDS[@]}"; do
	printf '%s\t%s\n' "$a" "${FAR[$a]:-}" >>"$E2E_TMP/far.tsv"
	jq -r -s --arg act "$a" "
	    [.[] | select(${ACT_SEL[$a]}) |
	     {kind, decision: (if .kind == \"sandbox.create\"
	        then (if has(\"ipv6\") and (.ipv6 == \"disabled\" or .ipv6 == false)
	          then \"no path\" else \"unstated\" end)
	        else (.decision // (if .kind == \"finding\" then \"finding\" else \"-\" end)) end),
	      reason: (if .kind == \"sandbox.create\"
	        then (if has(\"ipv6\") then \"ipv6=\\(.ipv6), seq \\(.seq)\"
	          else \"no ipv6 field, seq \\(.seq)\" end)
	        elif .kind == \"mcp.call\" and (.approver // \"\") != \"\"
	        then \"\\(.approval // \"?\") by \\(.approver)\"
	        elif .kind == \"mcp.call\" and (.redactions // 0) > 0
	        then \"redacted x\\(.redactions)\"
	        else (.reason // .type // \"-\") end),
	      n: (if .kind == \"net.deny\" then (.count // 1) else 1 end), seq}] |
	    if length == 0 then [[\$act, \"-\", \"no record\", \"-\", 0, -1]]
	    else group_by([.kind, .decision, .reason]) |
	      map([\$act, .[0].kind, .[0].decision, .[0].reason,
	           (map(.n) | add), (map(.seq) | min)]) | sort_by(.[5])
	    end | .[] | @tsv" "$E2E_TMP/tail.json" >>"$E2E_TMP/summary.tsv"
done
# FAR: what reached the destination's side (packets, or queries at the
# upstream resolver), once per act: a second witness, not from the log.
printf '\n  %s%-38s %-14s %-9s %-22s %5s %4s%s\n' "$C_B" ACT KIND DECISION \
    REASON COUNT FAR "$C_0"
prev=
while IFS=$'\t' read -r a kind dec reason n _; do
	t=${ACT_TITLE[$a]} far=${FAR[$a]:--}
	if [ "$a" = "$prev" ]; then t='' far=''; fi
	prev=$a
	case $dec in
	allow) col=$C_G ;; deny) col=$C_R ;; *) col=$C_Y ;;
	esac
	printf '  %-38s %-14s %s%-9s%s %-22s %5s %4s\n' "${t:0:38}" "$kind" \
	    "$col" "$dec" "$C_0" "${reason:0:22}" "$n" "$far"
done <"$E2E_TMP/summary.tsv"
FAIL=0
for a in "${ACT_IDS[@]}"; do
	grep -q "^$a"$'\t-\tno record\t' "$E2E_TMP/summary.tsv" || continue
	bad "no record for \"${ACT_TITLE[$a]}\" in the audit log"
	FAIL=1
done
# The IPv6 act's row is the sandbox's creation record: say what it does
# and does not prove. Its decision column is derived from the record's
# "ipv6" field, never assumed.
v6=$(awk -F'\t' '$1 == "meta-v6" && $2 == "sandbox.create" { print $3; exit }' \
    "$E2E_TMP/summary.tsv")
case $v6 in
"no path")
	wrap "metadata over IPv6: no deny record, because there was no decision: the sandbox.create record says its IPv6 is disabled, the host's kernel dropped the packets before any nftables rule (the kernel state is shown in act ${ACT_NUM[meta-v6]:-?}), and nothing arrived at the metadata side (FAR)." "$C_D"
	;;
unstated)
	wrap "metadata over IPv6: no deny record, because there was no decision; the sandbox.create record does not state the sandbox's IPv6 (no \"ipv6\" field), so the log alone does not show why. The kernel state shown in act ${ACT_NUM[meta-v6]:-?} and the metadata side's packet counter (FAR) are the evidence." "$C_Y"
	;;
esac
# Anything that reached a server it must not reach fails the demo, whatever
# the log says.
for a in "${ACT_IDS[@]}"; do
	[ "$a" = install ] && continue
	case ${FAR[$a]:-} in 0|-) ;; *) bad "${ACT_TITLE[$a]}: the far side saw ${FAR[$a]} packet(s) or queries"; FAIL=1 ;; esac
done
# Everything the log holds, by kind: lifecycle, heartbeats, the rest.
info "all records by kind: $(jq -r -s 'group_by(.kind) | map("\(.[0].kind)=\(length)") | join(" ")' "$E2E_TMP/tail.json")"
pause

# ------------------------------------------------------------ verify

act "sluice audit verify" \
    "A reviewer checks the chain, the Merkle tree and the signed checkpoints with the public key, against a checkpoint kept elsewhere."
au checkpoint --db "$DB" --out "$E2E_TMP/external.ckpt" >/dev/null ||
    bad "sluice audit checkpoint failed"
au verify --db "$DB" --key "$VKEY" --checkpoint "$E2E_TMP/external.ckpt" \
    >"$E2E_TMP/verify.txt" 2>&1
VRC=$?
sed 's/^/       /' "$E2E_TMP/verify.txt" | head -n 20
au verify --db "$DB" --key "$VKEY" --checkpoint "$E2E_TMP/external.ckpt" \
    --json >"$E2E_TMP/verify.json" 2>/dev/null
if [ "$VRC" -eq 0 ]; then
	good "verified (exit 0), assurance: $(jq -r .assurance "$E2E_TMP/verify.json")"
else
	bad "verify exited $VRC"
	FAIL=1
fi
pause

# ------------------------------------------------------------ tamper

act "Tampering with a copy of the log" \
    "An insider edits one byte of one record (the metadata denial) with sqlite3, after dropping the append-only triggers. verify must name the record."
sqlite3 "$DB" ".backup '$E2E_TMP/tampered.db'" || die "sqlite3 .backup"
TSEQ=$(jq -r -s "[.[] | select(${ACT_SEL[meta-v4]})] | .[0].seq // empty" \
    "$E2E_TMP/tail.json")
# Without a metadata record, any record past log.open will do.
[ -n "$TSEQ" ] || TSEQ=$((NREC / 2))
trig=$(sqlite3 "$E2E_TMP/tampered.db" \
    "SELECT group_concat('DROP TRIGGER ' || name, '; ') FROM sqlite_master WHERE type = 'trigger'")
# One byte: "deny" becomes "deNy" (or, in a record without it, the first
# "a" becomes "A").
sqlite3 "$E2E_TMP/tampered.db" "${trig:+$trig;}
    UPDATE records SET canon = CAST(CASE
	WHEN instr(CAST(canon AS TEXT), '\"deny\"') > 0
	THEN replace(CAST(canon AS TEXT), '\"deny\"', '\"deNy\"')
	ELSE substr(CAST(canon AS TEXT), 1, instr(CAST(canon AS TEXT), 'a') - 1)
	    || 'A' || substr(CAST(canon AS TEXT), instr(CAST(canon AS TEXT), 'a') + 1)
	END AS BLOB) WHERE seq = $TSEQ" || die "tamper"
info "triggers dropped: $(printf '%s' "$trig" | grep -o 'DROP TRIGGER' | wc -l); record seq $TSEQ edited in $(basename "$E2E_TMP/tampered.db")"
info "before: $(sqlite3 "$DB" "SELECT substr(CAST(canon AS TEXT), 1, 90) FROM records WHERE seq = $TSEQ")..."
info "after:  $(sqlite3 "$E2E_TMP/tampered.db" "SELECT substr(CAST(canon AS TEXT), 1, 90) FROM records WHERE seq = $TSEQ")..."
au verify --db "$E2E_TMP/tampered.db" --key "$VKEY" \
    --checkpoint "$E2E_TMP/external.ckpt" --json >"$E2E_TMP/tamper.json" 2>/dev/null
TRC=$?
au verify --db "$E2E_TMP/tampered.db" --key "$VKEY" \
    --checkpoint "$E2E_TMP/external.ckpt" 2>&1 | sed 's/^/       /' | head -n 12
TFS=$(jq -r '.first_failure.seq // empty' "$E2E_TMP/tamper.json" 2>/dev/null)
if [ "$TRC" -eq 1 ] && [ "$TFS" = "$TSEQ" ]; then
	good "tampering caught at seq $TFS (verify exit 1), the record that was edited"
else
	bad "verify on the tampered copy: exit $TRC, first failure at '${TFS:-none}' (edited $TSEQ)"
	FAIL=1
fi

# ------------------------------------------------------------ keep, clean

if [ -n "$KEEP" ]; then
	mkdir -p "$KEEP" &&
	sqlite3 "$DB" ".backup '$KEEP/audit.db'" &&
	cp "$E2E_TMP/audit.vkey" "$E2E_TMP/summary.tsv" "$E2E_TMP/far.tsv" \
	    "$E2E_TMP/verify.json" \
	    "$E2E_TMP/tamper.json" "$E2E_TMP/external.ckpt" "$KEEP/" &&
	echo "$TSEQ" >"$KEEP/tampered.seq" &&
	echo "$ID" >"$KEEP/sandbox.id" &&
	echo "$WORLD_TAG" >"$KEEP/world.tag" ||
	    bad "could not keep the results in $KEEP"
fi

act "Cleaning up" "Everything the demo made goes: sandbox, daemon, world, nftables table, temp files."
world_down
_demo_cleanup
trap - EXIT
info "done in $(( $(date +%s) - T0 )) s"
exit "$FAIL"
