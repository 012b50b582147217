#!/bin/bash
# t_dns.sh: the DNS proxy as a sandbox meets it. A sandbox reaches
# the outside only by names its policy allows, and only at the addresses the
# proxy answered and taught the kernel; everything else must fail closed and
# leak nothing (no upstream query for a denied name, no rebinding to
# metadata, loopback or private ranges, no tunnelling through long encoded
# names or TXT). We run the real daemon in the world, create sandboxes
# through it, and use dig and curl inside them against the real dnsmasq
# upstream, checking the resolver's own log and the audit log for what
# happened. Hostile packets (short, looping compression, lying counts,
# oversized) are sent with a small Python sender; the proxy must keep serving.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root
world_up || { not_ok "world_up"; finish; }

POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
SVC=$WORLD_SERVICE
world_sluiced_config "$CFG" "$POL"

# dnstest: names of the world's zone, TTLs clamped to at least 1 s so that
# short-ttl.example.com (TTL 2) really expires; a rate high enough for the
# scenario itself. dnsrate: the same names with a small bucket.
cat >"$POL/dnstest.yaml" <<'EOF'
version: 1
name: dnstest
egress:
  allow:
    - host: pkg.example.com
      ports: [80, 443]
    - host: short-ttl.example.com
      ports: [80]
    - host: rebind.example.com
      ports: [80]
    - host: loop.example.com
      ports: [80]
    - host: private.example.com
      ports: [80]
    - host: https.example.com
      ports: [443]
    - host: txt.example.com
      ports: [80]
    - host: cdn.example.org
      ports: [80]
    - host: "*.wild.example.com"
      ports: [80]
dns:
  types: [A, AAAA, CNAME]
  deny_answer: nxdomain
  min_ttl: 1s
  max_ttl: 1h
  rate: {qps: 200, burst: 400}
EOF
sed -e 's/^name: dnstest/name: dnsrate/' \
    -e 's/rate: .*/rate: {qps: 1, burst: 5}/' "$POL/dnstest.yaml" \
    >"$POL/dnsrate.yaml"

# dnstaint: two allowed names, one of them on the taint keep-list; a
# confidential tool of server-everything (over stdio, through the bridge)
# taints the sandbox. Names resolved before the taint must keep
# working for the keep-list only.
cat >"$POL/dnstaint.yaml" <<'EOF'
version: 1
name: dnstaint
egress:
  allow:
    - host: pkg.example.com
      ports: [80]
    - host: web.example.org
      ports: [80]
mcp:
  taint:
    level: confidential
    keep:
      - host: pkg.example.com
        ports: [80]
  tools:
    - tool: ev/get-tiny-image
      decision: allow
      classification: confidential
dns:
  types: [A]
  min_ttl: 60s
  max_ttl: 1h
EOF
EVERYTHING=$E2E_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
HAVE_MCP=0
if [ -e "$EVERYTHING" ] && command -v node >/dev/null; then
	HAVE_MCP=1
	cat >>"$CFG" <<EOF
servers:
  - name: ev
    transport: stdio
    command: [$(command -v node), $EVERYTHING, stdio]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
fi

world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
ok "sluiced starts with the DNS proxy"

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
# Sandboxes are created through the daemon as a user would.
mk() { sl sandbox create --policy "$1" 2>"$E2E_TMP/create.err" | jq -r .id; }
ID=$(mk dnstest)
if [[ ! $ID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]]; then
	not_ok "sandbox create (got '$ID': $(head -c 300 "$E2E_TMP/create.err"))"
	world_sluiced_log | tail -n 20 | sed 's/^/#   /'
	finish
fi
ok "sandbox $ID created"

# q [dig args...]: dig from inside the sandbox at the service address; one
# try, bounded, answer section only.
q() { world_sandbox "$ID" dig +time=3 +tries=1 @"$SVC" "$@"; }
short() { q +short "$@" 2>/dev/null; }
# rcode NAME [TYPE] [dig args]: the status dig reports, or "none".
rcode() {
	local out
	out=$(q "$@" 2>/dev/null)
	printf '%s\n' "$out" | sed -n 's/.*status: \([A-Z]*\).*/\1/p' | head -n 1 |
	    grep . || echo none
}
curl_in() { world_sandbox "$ID" curl -s -m 3 -o /dev/null -w '%{http_code}' "$@"; }
# ttl_in: the short-ttl name's page (by address, naming its host).
ttl_in() { curl_in -H "Host: short-ttl.example.com" http://192.0.2.10/simple/; }
resolver_saw() { world_resolver_log | grep -q -- "$1"; }

# ------------------------------------------------------------- allowed names

check_eq "allowed name resolves to its address" "192.0.2.10" \
    "$(short pkg.example.com A)"
check_eq "the answer is NOERROR" "NOERROR" "$(rcode pkg.example.com A)"
# curl resolves through the sandbox's resolv.conf, which names the proxy.
out=$(ip netns exec "sluice-$ID" curl -s -m 5 -o /dev/null \
    -w '%{http_code}' http://pkg.example.com/simple/ 2>&1)
check_eq "curl by that name works" "200" "$out"
check_match "the web server saw the request" '"path":"/simple/"' \
    "$(world_log pkg)"

# The answer taught the kernel one address and port, not the subnet.
world_log_clear nodns
check_fails "an unanswered address of the same subnet stays blocked" \
    world_sandbox "$ID" curl -s -m 3 http://192.0.2.11/
check_eq "192.0.2.11 saw nothing" "" "$(world_log nodns)"
check_fails "an answered address on a port no rule allows stays blocked" \
    world_sandbox "$ID" curl -s -m 3 http://192.0.2.10:8080/

check_eq "CNAME chain of an allowed name resolves" "203.0.113.80" \
    "$(short cdn.example.org A | tail -n 1)"
check_eq "sluice.internal answers the service address" "$SVC" \
    "$(short sluice.internal A)"

# Only sandboxes reach the service address: the host itself is none, and
# its query (over lo) is dropped before the proxy sees it (the proxy would
# refuse an address that is no live sandbox anyway).
check_eq "a query from the host itself gets no answer" "" \
    "$(world_host dig +time=2 +tries=1 @"$SVC" pkg.example.com A 2>/dev/null |
    sed -n 's/.*status: \([A-Z]*\).*/\1/p')"

# ------------------------------------------------------------- denials

world_resolver_clear
check_eq "a denied name gets the uniform answer (NXDOMAIN)" "NXDOMAIN" \
    "$(rcode evil.example.net A)"
check_eq "a name that does not exist gets the same answer" "NXDOMAIN" \
    "$(rcode nothing-here.example.net A)"
check_eq "the answers carry no records" "" "$(short evil.example.net A)"
check_fails "the upstream saw no query for the denied name" \
    resolver_saw evil.example.net
check_fails "nor for the unknown name" resolver_saw nothing-here.example.net

for n in rebind.example.com loop.example.com private.example.com; do
	r=$(rcode "$n" A)
	check_match "$n (metadata/loopback/private answer) is refused" \
	    '^(NXDOMAIN|REFUSED)$' "$r"
	check_eq "$n: no address leaks to the sandbox" "" "$(short "$n" A)"
done
world_log_clear metadata
check_fails "the metadata service is still unreachable" \
    world_sandbox "$ID" curl -s -m 3 http://169.254.169.254/latest/meta-data/
check_eq "the metadata service saw nothing" "" "$(world_log metadata)"

check_match "TXT is refused" '^(REFUSED|NXDOMAIN)$' "$(rcode txt.example.com TXT)"
check_eq "TXT: no data" "" "$(short txt.example.com TXT)"
check_match "ANY is refused" '^(REFUSED|NXDOMAIN|NOTIMP)$' \
    "$(rcode pkg.example.com ANY)"
out=$(q https.example.com TYPE65 2>/dev/null)
check_eq "HTTPS of an allowed name gets NODATA (NOERROR)" "NOERROR" \
    "$(printf '%s\n' "$out" | sed -n 's/.*status: \([A-Z]*\).*/\1/p')"
check_match "HTTPS: an empty answer section" 'ANSWER: 0' "$out"

long=$(head -c 96 /dev/urandom | base32 | tr -d '=' | tr 'A-Z' 'a-z' |
    fold -w 60 | head -n 3 | paste -sd.)
world_resolver_clear
r=$(rcode "$long.wild.example.com" A)
check_match "a long encoded-looking name is refused" '^(NXDOMAIN|REFUSED)$' "$r"
check_fails "the upstream never saw the encoded name" \
    resolver_saw "${long%%.*}"

# ------------------------------------------------------------- TTL expiry
# (The requests name the host they were answered for: the name gate opens
# a learned address only for that name.)

check_eq "short-ttl.example.com resolves" "192.0.2.10" \
    "$(short short-ttl.example.com A)"
check_eq "a connection right after the answer works" "200" \
    "$(ttl_in)"
# pkg.example.com taught 192.0.2.10 port 80 too: wait for its element to
# be gone is impossible (TTL 300), so use a fresh sandbox for the expiry.
ID_MAIN=$ID
ID=$(mk dnstest)
check_eq "second sandbox: short-ttl resolves" "192.0.2.10" \
    "$(short short-ttl.example.com A)"
check_eq "second sandbox: connection works within the TTL" "200" \
    "$(ttl_in)"
# The element's timeout is clamp(2 s, 1 s, 1 h): poll (bounded) until the
# kernel forgot it, then check that a new connection fails until the name
# is resolved again.
expired() { [ "$(ttl_in)" != "200" ]; }
check "after the TTL, a new connection fails" wait_for 15 expired
check_fails "and keeps failing without a new answer" \
    world_sandbox "$ID" curl -s -m 2 -H "Host: short-ttl.example.com" \
    http://192.0.2.10/simple/
check_eq "resolving again" "192.0.2.10" "$(short short-ttl.example.com A)"
check_eq "opens it again" "200" "$(ttl_in)"
ID=$ID_MAIN

# ------------------------------------------------------------- transports

check_eq "TCP DNS works (dig +tcp)" "192.0.2.10" \
    "$(short +tcp pkg.example.com A)"
check_eq "stray DNS (@198.51.100.53) is answered by Sluice" "192.0.2.10" \
    "$(world_sandbox "$ID" dig +time=3 +tries=1 +short @198.51.100.53 \
    pkg.example.com A 2>/dev/null)"
world_resolver_clear
check_eq "stray DNS for a denied name gets the uniform answer" "NXDOMAIN" \
    "$(world_sandbox "$ID" dig +time=3 +tries=1 @198.51.100.53 \
    evil.example.net A 2>/dev/null | sed -n 's/.*status: \([A-Z]*\).*/\1/p')"
check_fails "and the resolver it was aimed at never saw it" \
    resolver_saw evil.example.net
check_eq "stray TCP DNS is answered by Sluice" "192.0.2.10" \
    "$(world_sandbox "$ID" dig +tcp +time=3 +tries=1 +short @198.51.100.53 \
    pkg.example.com A 2>/dev/null)"

# ------------------------------------------------------------- hostile input

# One Python sender per case: writes raw bytes to the proxy, prints the
# rcode of the reply or "none" after a bounded wait.
cat >"$E2E_TMP/raw.py" <<'EOF'
import socket, struct, sys
case, host = sys.argv[1], sys.argv[2]
def hdr(qd=1, an=0, ns=0, ar=0, flags=0x0100, qid=0x4242):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)
q = b"\x03pkg\x07example\x03com\x00" + struct.pack(">HH", 1, 1)
if case == "short":
    msg = b"\x42\x42\x01"
elif case == "loop":
    # The question name is a pointer to itself.
    msg = hdr() + b"\xc0\x0c" + struct.pack(">HH", 1, 1)
elif case == "counts":
    # Claims 5 questions and 9 answers, carries one question.
    msg = hdr(qd=5, an=9, ar=3) + q
elif case == "trunc":
    msg = hdr() + q[:7]
elif case == "oversized":
    msg = hdr() + q + b"\x00" * 6000
elif case == "response":
    msg = hdr(flags=0x8180) + q
else:
    sys.exit(2)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
s.sendto(msg, (host, 53))
try:
    r = s.recv(4096)
    print("rc%d" % (r[3] & 0x0f) if len(r) >= 4 else "short")
except socket.timeout:
    print("none")
EOF
PY=$(command -v python3)
for c in short loop counts trunc oversized response; do
	r=$(world_sandbox "$ID" "$PY" "$E2E_TMP/raw.py" "$c" "$SVC" 2>&1)
	check_match "malformed ($c): dropped or FORMERR" '^(none|rc1)$' "$r"
	check_eq "after $c the proxy still answers" "192.0.2.10" \
	    "$(short pkg.example.com A)"
done

# ------------------------------------------------------------- rate limit

ID_MAIN=$ID
ID=$(mk dnsrate)
# 30 queries in one dig process; with a bucket of 5 and 1 per second at
# most 5 + (elapsed seconds + 1) can be answered, however slow the machine.
t0=$(date +%s)
args=()
for ((i = 0; i < 30; i++)); do args+=(pkg.example.com A); done
out=$(world_sandbox "$ID" dig +time=2 +tries=1 +short @"$SVC" "${args[@]}" \
    2>/dev/null)
t1=$(date +%s)
n=$(printf '%s\n' "$out" | grep -c '^192\.0\.2\.10$')
max=$((5 + t1 - t0 + 1))
check "rate limit: answered $n of 30 (at most $max)" test "$n" -le "$max"
check "rate limit: the bucket lets the first ones through" test "$n" -ge 1
ID=$ID_MAIN

# ------------------------------------------------------------- taint keep

# A tainted sandbox keeps only its keep-list, and a keep-listed name it
# resolved before the taint works right after it (its elements carry
# FW_ELEM_KEEP), while an allowed name off the list is cut at once.
if [ "$HAVE_MCP" -eq 1 ]; then
	TID=$(sl sandbox create --policy dnstaint --subject alice \
	    2>"$E2E_TMP/create.err")
	TT=$(printf '%s' "$TID" | jq -r .token 2>/dev/null)
	TID=$(printf '%s' "$TID" | jq -r .id 2>/dev/null)
	if [[ $TID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]]; then
		ok "taint: sandbox $TID created"
		tq() { world_sandbox "$TID" dig +time=3 +tries=1 @"$SVC" "$@" 2>/dev/null; }
		tcurl() { world_sandbox "$TID" curl -s -m 3 -o /dev/null -w '%{http_code}' "$@"; }
		check_eq "taint: keep-listed name resolves" "192.0.2.10" \
		    "$(tq +short pkg.example.com A)"
		check_eq "taint: the other allowed name resolves" "$WORLD_WEB" \
		    "$(tq +short web.example.org A)"
		check_eq "taint: before the taint the keep-listed host answers" \
		    200 "$(tcurl -H "Host: pkg.example.com" http://192.0.2.10/simple/)"
		check_eq "taint: before the taint the other host answers" \
		    200 "$(tcurl -H "Host: web.example.org" "http://$WORLD_WEB/ip")"
		world_mcp_client "sandbox:$TID" \
		    --url "http://$SVC:$WORLD_BRIDGE_PORT/mcp/ev" \
		    --header "Authorization: Bearer $TT" \
		    --call get-tiny-image '{}' >"$E2E_TMP/taint.out" 2>&1
		check_match "taint: the confidential tool call is answered" \
		    '"image"' "$(cat "$E2E_TMP/taint.out")"
		check_eq "taint: the sandbox shows tainted" true \
		    "$(sl sandbox show "$TID" 2>/dev/null | jq -r .tainted 2>/dev/null)"
		# No new DNS query: the elements learned before the taint.
		check_eq "taint: the keep-listed host resolved before the taint still answers (needs fw FW_ELEM_KEEP)" \
		    200 "$(tcurl -H "Host: pkg.example.com" http://192.0.2.10/simple/)"
		check_fails "taint: the allowed host off the keep-list is cut" \
		    world_sandbox "$TID" curl -s -m 3 -o /dev/null "http://$WORLD_WEB/ip"
		world_resolver_clear
		check_eq "taint: the name off the keep-list now gets the uniform deny" \
		    NXDOMAIN "$(tq web.example.org A | sed -n 's/.*status: \([A-Z]*\).*/\1/p')"
		check_fails "taint: and the upstream never saw it" \
		    resolver_saw web.example.org
		check_eq "taint: the keep-listed name still resolves" "192.0.2.10" \
		    "$(tq +short pkg.example.com A)"
		check_eq "taint: and answers when resolved after the taint" 200 \
		    "$(tcurl -H "Host: pkg.example.com" http://192.0.2.10/simple/)"
		check_fails "taint: the cut host stays cut" \
		    world_sandbox "$TID" curl -s -m 3 -o /dev/null "http://$WORLD_WEB/ip"
	else
		not_ok "taint: sandbox create (got '$TID': $(head -c 300 "$E2E_TMP/create.err"))"
	fi
else
	not_ok "taint: server-everything and node installed (tests/deps.sh)"
fi

# ------------------------------------------------------------- records

DB=$WORLD_DIR/state/audit.db
tail_kind() { SLUICE_AUDIT_DB=$DB "$SLUICE" audit tail --kind "$1" 2>/dev/null; }
check "the audit log verifies while the daemon runs" sh -c \
    "SLUICE_AUDIT_DB='$DB' '$SLUICE' audit verify >/dev/null; r=\$?; [ \$r -eq 0 ] || [ \$r -eq 3 ]"
recs=$(tail_kind dns.decision)
check_match "dns.decision: allowed pkg.example.com recorded" \
    '"decision":"allow".*"name":"pkg.example.com"|"name":"pkg.example.com".*"decision":"allow"' \
    "$(printf '%s\n' "$recs" | grep pkg.example.com | head -n 1)"
check_match "dns.decision: the denial of evil.example.net recorded" \
    '"decision":"deny"' "$(printf '%s\n' "$recs" | grep evil.example.net | head -n 1)"
check_match "dns.decision: learned elements carry their timeout" \
    '"timeout_ms":' "$(printf '%s\n' "$recs" | grep short-ttl | head -n 1)"
check_match "dns.decision: rebinding recorded with the removed address" \
    '169\.254\.169\.254' "$(printf '%s\n' "$recs" | grep rebind.example.com | head -n 1)"
findings=$(tail_kind finding)
check_match "a dns_tunnel finding for the encoded name" \
    "\"detail\":\"[a-z_]+: ${long:0:20}" \
    "$(printf '%s\n' "$findings" | grep '"type":"dns_tunnel"' | head -n 1)"
check_match "a dns_rebinding finding for rebind.example.com" \
    '"type":"dns_rebinding"' \
    "$(printf '%s\n' "$findings" | grep rebind.example.com | head -n 1)"
check_match "tail --db reads the same live log" '"kind":"dns.decision"' \
    "$("$SLUICE" audit tail --db "$DB" --kind dns.decision -n 1 2>/dev/null)"

# ------------------------------------------------------------- upstream down

check "sluiced stops cleanly" world_stop_sluiced
# 192.0.2.54 is an address of the world nobody answers on.
sed -i -e "s/^    - $WORLD_DNS\$/    - 192.0.2.54/" \
    -e "s/^  timeout_ms: .*/  timeout_ms: 500/" "$CFG"
world_start_sluiced "$CFG" || { not_ok "sluiced restarts"; finish; }
# dig waits longer than the proxy's upstream timeout, so the answer (not a
# client timeout) is what we see.
check_eq "upstream down: an allowed name gets SERVFAIL" \
    "SERVFAIL" "$(rcode +time=8 pkg.example.com A)"
check_eq "upstream down: a denied name still gets the uniform answer" \
    "NXDOMAIN" "$(rcode evil.example.net A)"
check_eq "upstream down: the proxy keeps serving synthetic names" "$SVC" \
    "$(short sluice.internal A)"
check "sluiced stops cleanly after the restart" world_stop_sluiced
check_fails "no sanitizer report in the daemon's log" \
    grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" \
    "$WORLD_DIR/log/sluiced.log"
finish
