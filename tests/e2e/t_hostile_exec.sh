#!/bin/bash
# t_hostile_exec.sh: what a hostile command started by `sluice exec` or
# `sluice run` can still reach on the host, and three smaller guarantees a
# hostile sandbox leans on. The CLI runs as root with every capability (it
# must, to enter the sandbox's namespaces); the command must not: no way
# back into the daemon's network namespace (setns, CAP_NET_ADMIN on other
# namespaces), an empty bounding set, no_new_privs, no ptrace, /proc or
# signal access to processes outside its own Landlock domain (sluiced,
# another sandbox's command and its token), --user for an unprivileged uid
# and --net-raw for the few capabilities that act only on its own
# namespace; the exit status still passes through. Then: an argument
# pattern means the whole value ("^[ -~]*$" refuses "hi\n" through the
# bridge), every file in the state directory is 0600, and sluiced refuses
# an audit signing key that others can read or another uid owns.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root

for t in jq node python3 cc; do
	command -v "$t" >/dev/null || { not_ok "$t is installed"; finish; }
done
EVERYTHING=$E2E_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
[ -e "$EVERYTHING" ] || { not_ok "server-everything installed (tests/deps.sh)"; finish; }
world_up || { not_ok "world_up"; finish; }

NODE=$(command -v node)
POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
KEY=$E2E_TMP/audit.key
OUT=$E2E_TMP/out
mkdir -p "$POL" "$OUT"
cat >"$POL/hx.yaml" <<'EOF'
version: 1
name: hx
egress:
  allow:
    - cidr: 192.0.2.10/32
      ports: [80]
mcp:
  tools:
    - tool: ev/echo
      decision: allow
      args:
        message: {type: string, max_length: 40, pattern: "^[ -~]*$"}
      required: [message]
    - tool: ev/*
      decision: deny
EOF
"$SLUICE" audit keygen --origin "sluice.test/$WORLD_TAG" --out "$KEY" >/dev/null ||
	{ not_ok "audit keygen"; finish; }
world_sluiced_config "$CFG" "$POL"
# The audit section ends the generated config: the key goes there.
cat >>"$CFG" <<EOF
  key: $KEY
servers:
  - name: ev
    transport: stdio
    command: [$NODE, $EVERYTHING, stdio]
    env: {PATH: /usr/local/bin:/usr/bin:/bin}
EOF
world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
SPID=$_WORLD_SLUICED_PID
[ -r "/proc/$SPID/ns/net" ] || { not_ok "sluiced's pid is known"; finish; }

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
X=hx$$-x
Y=hx$$-y
for s in "$X" "$Y"; do
	sl sandbox create --policy hx --subject alice --id "$s" >"$OUT/$s.json" ||
		{ not_ok "sandbox $s created"; finish; }
done
ok "two sandboxes created"
TX=$(jq -r .token "$OUT/$X.json")
TY=$(jq -r .token "$OUT/$Y.json")

# caps ARGS...: the Cap*/NoNewPrivs lines of the command's own status, as
# "CapInh=... CapPrm=... ... NoNewPrivs=..." on one line.
caps() {
	sl "$@" grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status |
	    tr -d ' \t' | tr ':' '=' | tr '\n' ' '
}
Z=0000000000000000
NOCAPS="CapInh=$Z CapPrm=$Z CapEff=$Z CapBnd=$Z CapAmb=$Z NoNewPrivs=1 "

# ------------------------------------------------------------ item: exec
check_eq "exec: no capability in any set, no_new_privs" "$NOCAPS" \
    "$(caps exec "$X" --)"
check_fails "exec: nsenter into sluiced's network namespace fails" \
    sl exec "$X" -- nsenter --net="/proc/$SPID/ns/net" true
check_fails "exec: nsenter through the host namespace's pin fails" \
    sl exec "$X" -- nsenter --net="/run/netns/$WORLD_HOST_NS" true
check_eq "exec: still root by default" "0" "$(sl exec "$X" -- id -u)"
sl exec "$X" -- sh -c 'exit 7'
check_eq "exec: the command's exit status passes through" 7 "$?"
sl exec "$X" -- sh -c 'kill -TERM $$'
check_eq "exec: death by signal is 128+N" 143 "$?"
check_eq "exec: SLUICE_SANDBOX_ID is set" "$X" \
    "$(sl exec "$X" -- sh -c 'echo $SLUICE_SANDBOX_ID')"
check_fails "exec: the command cannot signal sluiced" \
    sl exec "$X" -- kill -0 "$SPID"
check_fails "exec: the command cannot read sluiced's environment" \
    sl exec "$X" -- cat "/proc/$SPID/environ"

# Another sandbox's command, root without capabilities like ours: its
# token must not be readable, nor the process traceable, from X.
sl exec "$Y" -- sleep "60.$$" &
YJOB=$!
cleanup_push "kill $YJOB 2>/dev/null"
wait_for 5 pgrep -f "^sleep 60\\.$$\$" >/dev/null
YPID=$(pgrep -f "^sleep 60\\.$$\$" | head -n 1)
cleanup_push "kill -KILL $YPID 2>/dev/null"
if [ -n "$YPID" ] && tr '\0' '\n' <"/proc/$YPID/environ" | grep -q "^SLUICE_TOKEN=$TY\$"; then
	ok "sandbox $Y's command runs with its token"
	check_fails "exec: X cannot read Y's command's environment (its token)" \
	    sl exec "$X" -- cat "/proc/$YPID/environ"
	check_fails "exec: X cannot ptrace Y's command" \
	    sl exec "$X" -- python3 -c "
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(0 if libc.ptrace(16, $YPID, None, None) == 0 else 1)"
	check_fails "exec: X cannot signal Y's command" \
	    sl exec "$X" -- kill -0 "$YPID"
else
	not_ok "sandbox $Y's command runs with its token"
fi
kill -KILL "$YPID" 2>/dev/null	# stopped if a ptrace attach succeeded
wait "$YJOB" 2>/dev/null

# ------------------------------------------------------------ --user
check_eq "exec --user 65534: uid and gid" "65534 65534" \
    "$(sl exec --user 65534 "$X" -- sh -c 'echo $(id -u) $(id -g)')"
check_eq "exec --user nobody:nogroup: by name, groups only nogroup" \
    "65534 65534 65534" \
    "$(sl exec --user nobody:nogroup "$X" -- sh -c 'echo $(id -u) $(id -g) $(id -G)')"
check_eq "exec --user 65534: no capabilities" "$NOCAPS" \
    "$(caps exec --user 65534 "$X" --)"
check_fails "exec --user: an unknown name is refused" \
    sl exec --user "no-such-user-$$" "$X" -- true

# ------------------------------------------------------------ --net-raw
# CAP_NET_RAW (bit 13) and CAP_NET_BIND_SERVICE (bit 10) only: they act on
# sockets of the caller's own namespace. CAP_NET_ADMIN is not offered: it
# would make links in, or move links to, any namespace it can name by pid.
R=0000000000002400
check_eq "exec --net-raw: NET_RAW and NET_BIND_SERVICE only" \
    "CapInh=$R CapPrm=$R CapEff=$R CapBnd=$R CapAmb=$R NoNewPrivs=1 " \
    "$(caps exec --net-raw "$X" --)"
rawsock="import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)"
check "exec --net-raw: a raw socket can be opened" \
    sl exec --net-raw "$X" -- python3 -c "$rawsock"
check_fails "exec: without --net-raw it cannot" \
    sl exec "$X" -- python3 -c "$rawsock"
# ping sets KEEP_CAPS and gives up when it cannot: that bit stays free.
check_match "exec --net-raw: ping sends its echo request" "1 packets transmitted" \
    "$(sl exec --net-raw "$X" -- ping -n -c 1 -W 1 "$WORLD_ATTACKER" 2>&1)"
check_fails "exec --net-raw: nsenter into sluiced's namespace still fails" \
    sl exec --net-raw "$X" -- nsenter --net="/proc/$SPID/ns/net" true
# no_veth OPTS...: a veth whose peer lands in sluiced's namespace (a link
# that bypasses the table) cannot be made.
no_veth() {
	local vh=hxv$$
	if sl exec "$@" "$X" -- ip link add "${vh}a" type veth peer name \
	    "${vh}b" netns "$SPID" 2>/dev/null; then
		not_ok "exec${*:+ $*}: no veth into sluiced's namespace"
		world_host ip link del "${vh}b" 2>/dev/null
	else
		ok "exec${*:+ $*}: no veth into sluiced's namespace"
	fi
}
no_veth
no_veth --net-raw
check_eq "exec --net-raw --user 65534: the same two capabilities" \
    "CapInh=$R CapPrm=$R CapEff=$R CapBnd=$R CapAmb=$R NoNewPrivs=1 " \
    "$(caps exec --net-raw --user 65534 "$X" --)"

# ------------------------------------------------------------ run
check_eq "run: no capability in any set" "$NOCAPS" \
    "$(caps run --policy hx --)"
check_fails "run: nsenter into sluiced's network namespace fails" \
    sl run --policy hx -- nsenter --net="/proc/$SPID/ns/net" true
check_eq "run --user 65534" "65534" "$(sl run --policy hx --user 65534 -- id -u)"
sl run --policy hx -- sh -c 'exit 5'
check_eq "run: the command's exit status passes through" 5 "$?"
check_fails "sandbox create takes no --user" \
    sl sandbox create --policy hx --user 65534

# ------------------------------------------------------------ patterns
URL=http://$WORLD_SERVICE:$WORLD_BRIDGE_PORT/mcp
call() {
	world_mcp_client "sandbox:$X" --url "$URL/ev" \
	    --header "Authorization: Bearer $TX" --call echo "$1"
}
call '{"message":"hi"}' >"$OUT/hi" 2>&1
check_match "bridge: \"hi\" passes ^[ -~]*\$" "Echo: hi" "$(cat "$OUT/hi")"
# Refused: an isError result, or (NUL) the request itself refused; never
# the upstream's echo.
for v in 'hi\n' 'hi\r\n' 'hi\u2028' 'hi\u2029' 'hi\u0085' 'hi\u0000'; do
	call "{\"message\":\"$v\"}" >"$OUT/bad" 2>&1
	rc=$?
	if { [ "$(jq -r .isError "$OUT/bad" 2>/dev/null)" = true ] ||
	    [ "$rc" -ne 0 ]; } && ! grep -q 'Echo: hi' "$OUT/bad"; then
		ok "bridge: \"$v\" is refused by ^[ -~]*\$"
	else
		not_ok "bridge: \"$v\" is refused by ^[ -~]*\$"
		sed 's/^/#   /' "$OUT/bad"
	fi
done

# ------------------------------------------------------------ modes
st=$WORLD_DIR/state
[ -e "$st/bridge.db" ] && ok "bridge.db exists" || not_ok "bridge.db exists"
wide=$(find "$st" -type f ! -perm 0600 -printf '%m %P\n' | sort)
check_eq "every file in the state directory is 0600" "" "$wide"
echo "# state files: $(find "$st" -type f -printf '%P ' | sort)"

# ------------------------------------------------------------ the key
world_stop_sluiced
# refused HOW MESSAGE: sluiced must exit non-zero at once, saying MESSAGE.
refused() {
	local rc
	timeout 10 nsenter --net="/run/netns/$WORLD_HOST_NS" -- \
	    "$SLUICED" --config "$CFG" --foreground >"$OUT/key.log" 2>&1 </dev/null
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q -- "$2" "$OUT/key.log"; then
		ok "sluiced refuses a signing key $1"
	else
		not_ok "sluiced refuses a signing key $1 (exit $rc)"
		tail -n 5 "$OUT/key.log" | sed 's/^/#   /'
	fi
}
chmod 0644 "$KEY"
refused "readable by all (0644)" "mode 0600, not 0644"
chmod 0640 "$KEY"
refused "readable by its group (0640)" "mode 0600, not 0640"
chmod 0600 "$KEY"
chown 65534 "$KEY"
refused "owned by another uid" "must be owned by uid 0"
chown 0 "$KEY"
if world_start_sluiced "$CFG"; then
	ok "sluiced starts again with the key 0600 and its own"
else
	not_ok "sluiced starts again with the key 0600 and its own"
fi
finish
