#!/bin/bash
# t_bridge_roots.sh: what an HTTP upstream says outside any call, end to
# end. The bridge opens each HTTP upstream's GET stream once its session
# is ready and takes what comes there as it takes the same message from a
# stdio upstream outside a call. server-everything over Streamable HTTP,
# offered roots because a policy may let its roots/list through, asks for
# them once initialized: with nobody listening it is refused and recorded
# no_stream. A client whose policy allows roots sends roots/list_changed:
# the roots/list that answers it comes on the upstream's GET stream and
# reaches that client on the bridge's GET stream, recorded as answered.
# A resources/updated the upstream sends between calls (after subscribe)
# reaches the client listening. server-everything restarted while a
# client whose policy denies roots listens: the bridge makes a new
# session and stream, the upstream's roots/list is refused and recorded
# rule_deny for that sandbox; restarted again while a client that allows
# them listens: the roots/list reaches it. An upstream that answers 405
# to GET is asked once and served as before; one that ends its stream
# after each event is asked again with the Last-Event-ID of the last one.
# Torn down on exit.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

command -v jq >/dev/null && command -v curl >/dev/null && command -v node >/dev/null ||
    { not_ok "jq, curl and node are installed"; finish; }
world_up || { not_ok "world_up"; finish; }
world_mcp_http_start 3001 || { not_ok "server-everything over HTTP"; finish; }
OUT=$E2E_TMP/out POL=$E2E_TMP/policies CFG=$E2E_TMP/sluice.yaml
mkdir -p "$OUT" "$POL"
# get_start PORT MODE: servers/get_server.mjs in inet, its log in OUT/get-PORT.log.
get_start() {
	: >"$OUT/get-$1.log"
	_world_spawn "get-$1" inet node "$WORLD_SERVERS/get_server.mjs" \
	    --listen "$WORLD_MCP:$1" --mode "$2" --log "$OUT/get-$1.log"
	wait_for 15 world_inet curl -s -m 2 -o /dev/null "http://$WORLD_MCP:$1/mcp"
}
get_start 3002 405 || { not_ok "the 405 server starts"; finish; }
get_start 3003 drop || { not_ok "the dropping server starts"; finish; }

cat >"$POL/ra.yaml" <<EOF
version: 1
name: ra
mcp:
  tools:
    - tool: ev/toggle-subscriber-updates
      decision: allow
    - tool: g405/hello
      decision: allow
  resources:
    - server: ev
      uri: "demo://resource/static/document/*"
      decision: allow
  server_requests:
    - server: ev
      roots: allow
EOF
cat >"$POL/rd.yaml" <<EOF
version: 1
name: rd
mcp:
  tools:
    - tool: g405/hello
      decision: allow
  server_requests:
    - server: ev
      roots: deny
EOF
world_sluiced_config "$CFG" "$POL"
cat >>"$CFG" <<EOF
servers:
  - name: ev
    transport: http
    url: http://$WORLD_MCP:3001/mcp
  - name: g405
    transport: http
    url: http://$WORLD_MCP:3002/mcp
  - name: gdrop
    transport: http
    url: http://$WORLD_MCP:3003/mcp
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
world_bridge_listening && ok "the bridge listens" || { not_ok "the bridge listens"; finish; }
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
D=rd$$ B=rb$$
TD=$(sl sandbox create --policy ra --subject dave --id "$D" | jq -r .token)
TB=$(sl sandbox create --policy rd --subject bob --id "$B" | jq -r .token)
[[ $TD =~ ^[0-9a-f]{64}$ && $TB =~ ^[0-9a-f]{64}$ ]] && ok "sandboxes created" ||
    { not_ok "sandboxes created"; finish; }
srq() {	# srq: every mcp.server_request record of server ev, one a line
	"$SLUICE" audit tail --db "$WORLD_DIR/state/audit.db" --kind mcp.server_request \
	    -n 100000 2>/dev/null | jq -c 'select(.server == "ev")'
}
n_srq() { srq | jq -r "select($1) | .seq" | grep -c .; }
has_srq() { [ "$(n_srq "$1")" -gt "${2:-0}" ]; }
# client SBX TOKEN ARGS...: the SDK client in SBX on server ev. It ends
# its session when done: a session left behind keeps listening until its
# stream is found dead, and a request outside any call with several
# sessions listening is nobody's.
client() {
	local s=$1 t=$2; shift 2
	world_mcp_client "sandbox:$s" --url "$URL/ev" --header "Authorization: Bearer $t" \
	    --end-session "$@"
}
# restart_ev: server-everything killed and started again (a new process,
# which knows no session of the old one).
restart_ev() {
	local pid
	pid=$(cat "$WORLD_DIR/pid.mcp-3001" 2>/dev/null)
	[ -n "$pid" ] && kill "$pid" 2>/dev/null
	wait_for 10 sh -c "! kill -0 ${pid:-0} 2>/dev/null" || return 1
	world_mcp_http_start 3001
}

# ---------------------------------------------------------------- no_stream
check "server-everything's roots/list at start, nobody listening: recorded" \
    wait_for 20 has_srq '.reason == "no_stream"'
check_eq "its record: roots/list, denied no_stream, nobody listened" \
    "roots/list deny no_stream refused: outside any call, no session listens" \
    "$(srq | jq -r 'select(.reason == "no_stream") | "\(.method) \(.decision) \(.reason) \(.detail)"' | head -n 1)"

# ---------------------------------------------------------------- allowed
client "$D" "$TD" --serve-requests --roots-changed roots/list >"$OUT/rc" 2>"$OUT/rc.err" ||
    sed 's/^/#   /' "$OUT/rc.err"
check_eq "roots/list_changed relayed; the upstream's roots/list reached the client on its GET stream" \
    '["roots/list"]' "$(jq -c .served "$OUT/rc" 2>/dev/null)"
check "... recorded for the client's sandbox" wait_for 10 has_srq "(.sandbox.id // .sandbox) == \"$D\" and .decision == \"allow\""
check_match "its record: allowed, answered, on its session's stream" \
    '^roots/list allow allowed forwarded as sluice-[0-9a-f]{32}; answered; policy allow; on its session.s stream$' \
    "$(srq | jq -r 'select(.decision == "allow") | "\(.method) \(.decision) \(.reason) \(.detail)"' | head -n 1)"

# ---------------------------------------------------------------- a notification
DOC=demo://resource/static/document/features.md
client "$D" "$TD" --timeout 30000 --subscribe "$DOC" --call toggle-subscriber-updates \
    --listen notifications/resources/updated >"$OUT/up" 2>"$OUT/up.err" ||
    sed 's/^/#   /' "$OUT/up.err"
check_eq "resources/updated the upstream sent between calls reached the listening client" \
    notifications/resources/updated "$(jq -r 'select(.seen) | .seen' "$OUT/up" 2>/dev/null)"

# ---------------------------------------------------------------- denied, after a restart
nd0=$(n_srq '.reason == "rule_deny"')
client "$B" "$TB" --timeout 90000 --serve-requests --ready "$OUT/b.ready" \
    --await-file "$OUT/b.stop" --served >"$OUT/b" 2>"$OUT/b.err" &
pb=$!
cleanup_push "kill $pb 2>/dev/null"
check "a client whose policy denies roots listens" wait_for 20 test -e "$OUT/b.ready"
check "server-everything restarted" restart_ev
check "the bridge's new session's roots/list, with that client listening: refused, recorded" \
    wait_for 60 has_srq '.reason == "rule_deny"' "$nd0"
check_eq "its record: that sandbox's, denied by its policy, on its session's stream" \
    "$B roots/list deny rule_deny refused; policy deny; on its session's stream" \
    "$(srq | jq -r 'select(.reason == "rule_deny") | "\(.sandbox.id // .sandbox) \(.method) \(.decision) \(.reason) \(.detail)"' | tail -n 1)"
touch "$OUT/b.stop"
wait "$pb" || sed 's/^/#   /' "$OUT/b.err"
check_eq "the client never saw it" '[]' "$(jq -c 'select(.served) | .served' "$OUT/b" 2>/dev/null)"

# ---------------------------------------------------------------- allowed, after a restart
client "$D" "$TD" --timeout 90000 --serve-requests --ready "$OUT/d.ready" \
    --await-served roots/list >"$OUT/d" 2>"$OUT/d.err" &
pd=$!
cleanup_push "kill $pd 2>/dev/null"
check "a client whose policy allows roots listens" wait_for 20 test -e "$OUT/d.ready"
check "server-everything restarted again" restart_ev
wait "$pd" || sed 's/^/#   /' "$OUT/d.err"
check_eq "the GET stream was made again: the new session's roots/list reached the client" \
    '["roots/list"]' "$(jq -c .served "$OUT/d" 2>/dev/null)"
check "... recorded as answered" wait_for 10 has_srq '.decision == "allow"' 1

# ---------------------------------------------------------------- 405, drop
world_mcp_client "sandbox:$D" --url "$URL/g405" --header "Authorization: Bearer $TD" \
    --call hello >"$OUT/h" 2>"$OUT/h.err" || sed 's/^/#   /' "$OUT/h.err"
check_eq "an upstream that answers 405 to GET is served as before" "hello from 405" \
    "$(jq -r '.content[0].text' "$OUT/h" 2>/dev/null)"
# (A GET without a session is get_start's probe.)
check_eq "... it was asked for its GET stream once, with its session" 1 \
    "$(jq -r 'select(.method == "GET") | .session' "$OUT/get-3002.log" | grep -c '^get-session-')"
check_fails "... and that is no failure of the upstream" grep -q 'upstream g405 failed' "$WORLD_DIR/log/sluiced.log"
gets() { jq -r 'select(.method == "GET" and .session != null) | "\(.last_event_id) \(.sent)"' "$OUT/get-3003.log"; }
resumed() { [ "$(gets | wc -l)" -ge 2 ]; }
check "a stream that ends is asked again" wait_for 30 resumed
g1=$(gets | sed -n 1p) g2=$(gets | sed -n 2p)
check_eq "... the first GET had no Last-Event-ID, the next the id of the event before" \
    "null ${g1#* }" "${g1% *} ${g2% *}"

if [ "$E2E_FAILS" -gt 0 ]; then
	echo "# server requests of ev:"; srq | tail -n 8 | sed 's/^/#   /'
	echo "# the bridge on its upstreams:"
	grep -E 'GET stream|upstream (ev|g405|gdrop)|roots/list' "$WORLD_DIR/log/sluiced.log" |
	    tail -n 40 | sed 's/^/#   /'
fi
check "sluiced stops cleanly" world_stop_sluiced
world_sluiced_clean
finish
