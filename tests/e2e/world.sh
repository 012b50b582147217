# tests/e2e/world.sh: a simulated internet in network namespaces.
#
# Every end-to-end scenario needs the same surroundings: a machine where
# sluiced runs, an internet with web servers, an attacker, a cloud metadata
# service and a DNS resolver, and a guarantee that no packet leaves the
# machine. This file builds that from two network namespaces and tears it
# down again, also when a scenario fails half-way (everything is registered
# with lib.sh's cleanup_push). Layout and recipes: tests/e2e/README.md.
#
# Source it after lib.sh:
#   . "$(dirname "$0")/lib.sh"; . "$E2E_DIR/world.sh"; world_up || exit 1
#
# Names carry a per-run tag (WORLD_TAG, default slw<pid>) so that parallel
# runs never collide: namespaces $WORLD_TAG-host and $WORLD_TAG-inet.

WORLD_TAG=${WORLD_TAG:-slw$$}
WORLD_HOST_NS=$WORLD_TAG-host
WORLD_INET_NS=$WORLD_TAG-inet
WORLD_DIR=$E2E_TMP/world
WORLD_SERVERS=$E2E_DIR/servers

# Addresses (documentation ranges only; see README.md for the picture).
WORLD_UPLINK=up0			# host side of the host<->inet veth
WORLD_HOST_V4=203.0.113.1
WORLD_HOST_V6=2001:db8:ffff::1
WORLD_GW_V4=203.0.113.254
WORLD_GW_V6=2001:db8:ffff::fe
WORLD_PKG=192.0.2.10			# allowed package index
WORLD_NODNS=192.0.2.11			# web server no DNS name points to
WORLD_MCP=192.0.2.30			# MCP upstreams (world_mcp_http_start)
WORLD_DNS=192.0.2.53			# upstream resolver
WORLD_DNS2=198.51.100.53		# second resolver (same dnsmasq)
WORLD_ATTACKER=198.51.100.66
WORLD_WEB=203.0.113.80
WORLD_WEB6=2001:db8:1::10
WORLD_META=169.254.169.254
WORLD_META6=fd00:ec2::254
# Attacker sinks besides HTTP on 80 and 8080: raw TCP and UDP ports.
WORLD_ATTACKER_TCP="443 853 22"
WORLD_ATTACKER_UDP="53 443 853 9999"

# What sluiced gets from world_sluiced_config.
WORLD_POOL=10.231.0.0/16
WORLD_SERVICE=10.231.255.254
WORLD_BRIDGE_PORT=8080
WORLD_SOCK=$WORLD_DIR/run/sluice.sock

_WORLD_CLEANUP=()
_WORLD_UP=0
_WORLD_SLUICED_PID=
_WORLD_PIDS=()

_world_push() { _WORLD_CLEANUP+=("$*"); }

# world_host CMD...: run CMD in the host namespace (where sluiced runs).
# nsenter changes only the network namespace, so bind mounts sluiced makes
# under /run/netns stay visible to the rest of the machine.
world_host() { nsenter --net="/run/netns/$WORLD_HOST_NS" -- "$@"; }

# world_inet CMD...: run CMD in the fake internet.
world_inet() { nsenter --net="/run/netns/$WORLD_INET_NS" -- "$@"; }

# world_sandbox ID CMD...: run CMD in sluiced's sandbox namespace sluice-ID
# (network namespace only; /etc/netns/sluice-ID/resolv.conf is NOT applied,
# use `ip netns exec sluice-ID CMD` when the command must resolve names
# through the sandbox's resolv.conf).
world_sandbox() {
	local id=$1; shift
	# The id becomes a path: only sluiced's id syntax is accepted.
	[[ $id =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]] ||
	    { _world_fail "bad sandbox id '$id'"; return 2; }
	nsenter --net="/run/netns/sluice-$id" -- "$@"
}

_world_fail() { echo "# world: $*" >&2; return 1; }

# _world_ns_inode NS: the inode of a pinned namespace (for /proc scans).
_world_ns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }

# _world_kill_ns_procs INODE: kill every process whose network namespace is
# INODE. Only namespaces this run made are ever passed, so these are
# processes the world, sluiced or the scenario started there.
_world_kill_ns_procs() {
	local ino=$1 i l
	[ -n "$ino" ] || return 0
	for i in 1 2 3 4 5; do
		# One find over /proc rather than a readlink per process.
		l=$(find /proc/[0-9]*/ns/net -maxdepth 0 -lname "net:\[$ino\]" \
		    2>/dev/null | cut -d/ -f3)
		[ -z "$l" ] && return 0
		# shellcheck disable=SC2086
		kill -KILL $l 2>/dev/null
		sleep 0.1
	done
}

# _world_stop_pids PID...: TERM all, KILL what still runs after 5 s in
# total, and reap them (bounded).
_world_stop_pids() {
	local p i alive
	[ $# -gt 0 ] || return 0
	kill -TERM "$@" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive -eq 0 ] && break
		# Reap those that exited so kill -0 does not see zombies.
		for p in "$@"; do
			kill -0 "$p" 2>/dev/null || wait "$p" 2>/dev/null
		done
		sleep 0.1
	done
	kill -KILL "$@" 2>/dev/null
	for p in "$@"; do wait "$p" 2>/dev/null; done
	return 0
}

# _world_stop_pid PID: TERM, then KILL after 5 s; waits (bounded) for exit.
_world_stop_pid() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# _world_spawn NAME NS CMD...: start CMD in namespace NS (host|inet) in the
# background (a child of this shell: never call it inside $(...)), output to
# $WORLD_DIR/log/NAME.out, pid in $WORLD_DIR/pid.NAME; stopped at teardown.
_world_spawn() {
	local name=$1 ns=$2 pid; shift 2
	if [ "$ns" = host ]; then ns=$WORLD_HOST_NS; else ns=$WORLD_INET_NS; fi
	nsenter --net="/run/netns/$ns" -- "$@" \
	    >"$WORLD_DIR/log/$name.out" 2>&1 </dev/null &
	pid=$!
	_WORLD_PIDS+=("$pid")
	_world_push "_world_stop_pid $pid"
	echo "$pid" >"$WORLD_DIR/pid.$name"
}

# _world_wait_file SECONDS FILE: bounded wait for FILE to exist.
_world_wait_file() { wait_for "$1" test -s "$2"; }

_world_web() {
	# _world_web NAME ROLE ARGS...: one httpd.mjs instance.
	local name=$1 role=$2; shift 2
	: >"$WORLD_DIR/log/$name.log"
	_world_spawn "$name" inet node "$WORLD_SERVERS/httpd.mjs" \
	    --tag "$WORLD_TAG" --name "$name" --role "$role" \
	    --log "$WORLD_DIR/log/$name.log" --ready "$WORLD_DIR/ready.$name" \
	    "$@"
}

# _world_tree: the package index's files.
_world_tree() {
	local r=$WORLD_DIR/www/pkg sum
	mkdir -p "$r/simple/demo-pkg" "$r/packages/demo-pkg-1.0"
	echo "demo-pkg 1.0: a package served by the world's index" \
	    >"$r/packages/demo-pkg-1.0/README"
	tar -C "$r/packages" -czf "$r/packages/demo-pkg-1.0.tar.gz" demo-pkg-1.0
	rm -rf "$r/packages/demo-pkg-1.0"
	sum=$(sha256sum "$r/packages/demo-pkg-1.0.tar.gz" | cut -d' ' -f1)
	echo "$sum" >"$WORLD_DIR/demo-pkg.sha256"
	cat >"$r/simple/index.html" <<-EOF
	<!DOCTYPE html>
	<html><body><a href="/simple/demo-pkg/">demo-pkg</a></body></html>
	EOF
	cat >"$r/simple/demo-pkg/index.html" <<-EOF
	<!DOCTYPE html>
	<html><body>
	<a href="/packages/demo-pkg-1.0.tar.gz#sha256=$sum">demo-pkg-1.0.tar.gz</a>
	</body></html>
	EOF
	echo "package index" >"$r/index.html"
	mkdir -p "$WORLD_DIR/www/web"
	echo "web.example.org" >"$WORLD_DIR/www/web/index.html"
	mkdir -p "$WORLD_DIR/www/web6"
	echo "v6.example.org" >"$WORLD_DIR/www/web6/index.html"
}

# ech.example.com publishes an ECH config in its HTTPS record (the name
# gate refuses a ClientHello that uses it): priority 1, target ".",
# alpn=h2, ipv4hint=192.0.2.10, and ech= an ECHConfigList of one config
# (version 0xfe0d, config id 0x2a, KEM X25519 with a key of 32 bytes
# 0x11, cipher suite HKDF-SHA256 / AES-128-GCM, public_name
# public.example.com, no extensions).
WORLD_ECH_ID=42
WORLD_ECH_RDATA=0001000001000302683200040004c000020a0005004700
WORLD_ECH_RDATA+=45fe0d00412a00200020
WORLD_ECH_RDATA+=1111111111111111111111111111111111111111111111111111111111111111
WORLD_ECH_RDATA+=00040001000100127075626c69632e6578616d706c652e636f6d0000

# _world_dns: dnsmasq on 192.0.2.53 and 198.51.100.53 with the test zone.
_world_dns() {
	: >"$WORLD_DIR/log/resolver.log"
	# HTTPS (type 65) and SVCB (64) RDATA: priority 1, target ".", alpn=h2,
	# ipv4hint=192.0.2.10; dnsmasq 2.90 has no svcb option but serves any
	# type as raw RDATA with --dns-rr.
	_world_spawn dnsmasq inet dnsmasq --keep-in-foreground \
	    --no-resolv --no-hosts --conf-file=/dev/null --user=root \
	    --pid-file= --bind-interfaces \
	    --listen-address="$WORLD_DNS" --listen-address="$WORLD_DNS2" \
	    --except-interface=lo --port=53 --cache-size=0 \
	    --log-queries=extra --log-facility="$WORLD_DIR/log/resolver.log" \
	    --local-ttl=300 \
	    --local=/example.com/ --local=/example.org/ --local=/example.net/ \
	    --local=/world.test/ \
	    --host-record=pkg.example.com,"$WORLD_PKG" \
	    --host-record=web.example.org,"$WORLD_WEB" \
	    --host-record=v6.example.org,"$WORLD_WEB6" \
	    --host-record=evil.example.net,"$WORLD_ATTACKER" \
	    --host-record=rebind.example.com,"$WORLD_META" \
	    --host-record=rebind6.example.com,"$WORLD_META6" \
	    --host-record=mapped.example.com,::ffff:169.254.169.254 \
	    --host-record=loop.example.com,127.0.0.1 \
	    --host-record=private.example.com,10.1.2.3 \
	    --host-record=mcp.example.com,"$WORLD_MCP" \
	    --host-record=short-ttl.example.com,"$WORLD_PKG",2 \
	    --cname=cdn.example.org,web.example.org \
	    --txt-record=txt.example.com,"v=spf1 -all" \
	    --dns-rr=https.example.com,65,0001000001000302683200040004c000020a \
	    --dns-rr=svcb.example.com,64,0001000001000302683200040004c000020a \
	    --host-record=ech.example.com,"$WORLD_PKG" \
	    --dns-rr=ech.example.com,65,"$WORLD_ECH_RDATA" \
	    --address=/wild.example.com/"$WORLD_PKG" \
	    --address=/sync.world.test/192.0.2.1
}

# world_up: build the world. 0, or 1 with a message on stderr (whatever was
# made is still torn down at exit).
world_up() {
	local ns i a name
	[ "$_WORLD_UP" -eq 1 ] && return 0
	require_root
	for i in node dnsmasq dig curl nsenter ip; do
		command -v "$i" >/dev/null ||
		    { _world_fail "$i not found (tests/deps.sh installs it)"; return 1; }
	done
	# A second world_up after world_down starts from nothing (no stale
	# ready files, logs or offsets).
	rm -rf "$WORLD_DIR"
	mkdir -p "$WORLD_DIR/log" "$WORLD_DIR/run" "$WORLD_DIR/state" \
	    "$WORLD_DIR/www" || return 1
	_WORLD_UP=1
	cleanup_push world_down

	for ns in "$WORLD_HOST_NS" "$WORLD_INET_NS"; do
		ip netns add "$ns" || { _world_fail "netns add $ns"; return 1; }
		_world_push "ip netns del $ns"
		# Teardown kills what still runs there before the namespace goes.
		_world_push "_world_kill_ns_procs $(_world_ns_inode "$ns")"
		nsenter --net="/run/netns/$ns" -- sh -c '
		    sysctl -qw net.ipv6.conf.all.accept_dad=0 &&
		    sysctl -qw net.ipv6.conf.default.accept_dad=0 &&
		    ip link set lo up' || { _world_fail "setup $ns"; return 1; }
	done

	# host <-> inet: made inside the namespaces, never in the caller's.
	ip -n "$WORLD_HOST_NS" link add "$WORLD_UPLINK" type veth peer name inet0 \
	    netns "$WORLD_INET_NS" || { _world_fail "veth"; return 1; }
	ip -n "$WORLD_HOST_NS" addr add "$WORLD_HOST_V4/24" dev "$WORLD_UPLINK" &&
	ip -n "$WORLD_HOST_NS" addr add "$WORLD_HOST_V6/64" dev "$WORLD_UPLINK" nodad &&
	ip -n "$WORLD_HOST_NS" link set "$WORLD_UPLINK" up &&
	ip -n "$WORLD_INET_NS" addr add "$WORLD_GW_V4/24" dev inet0 &&
	ip -n "$WORLD_INET_NS" addr add "$WORLD_GW_V6/64" dev inet0 nodad &&
	ip -n "$WORLD_INET_NS" link set inet0 up &&
	ip -n "$WORLD_HOST_NS" route add default via "$WORLD_GW_V4" &&
	ip -n "$WORLD_HOST_NS" -6 route add default via "$WORLD_GW_V6" ||
	    { _world_fail "uplink addresses/routes"; return 1; }

	# Every server address lives on inet's lo (the dummy link type is not
	# available on every kernel this runs on; lo always is).
	for a in "$WORLD_PKG" "$WORLD_NODNS" "$WORLD_MCP" "$WORLD_DNS" \
	    "$WORLD_DNS2" "$WORLD_ATTACKER" "$WORLD_WEB" "$WORLD_META"; do
		ip -n "$WORLD_INET_NS" addr add "$a/32" dev lo ||
		    { _world_fail "addr $a"; return 1; }
	done
	for a in "$WORLD_WEB6" "$WORLD_META6"; do
		ip -n "$WORLD_INET_NS" addr add "$a/128" dev lo nodad ||
		    { _world_fail "addr $a"; return 1; }
	done
	# Sandboxes are masqueraded by sluiced; the route back to the pool is
	# there so that a missing masquerade shows as the pool address in the
	# servers' logs rather than as a silent timeout.
	ip -n "$WORLD_INET_NS" route add "$WORLD_POOL" via "$WORLD_HOST_V4" ||
	    { _world_fail "route back"; return 1; }

	_world_tree || { _world_fail "file tree"; return 1; }
	_world_web pkg static --root "$WORLD_DIR/www/pkg" \
	    --listen "$WORLD_PKG:80" --listen "$WORLD_PKG:443"
	_world_web nodns static --listen "$WORLD_NODNS:80"
	_world_web web static --root "$WORLD_DIR/www/web" \
	    --listen "$WORLD_WEB:80" --listen "$WORLD_WEB:443"
	_world_web web6 static --root "$WORLD_DIR/www/web6" \
	    --listen "[$WORLD_WEB6]:80" --listen "[$WORLD_WEB6]:443"
	_world_web metadata metadata \
	    --listen "$WORLD_META:80" --listen "[$WORLD_META6]:80"
	# shellcheck disable=SC2046
	_world_web attacker attacker \
	    --listen "$WORLD_ATTACKER:80" --listen "$WORLD_ATTACKER:8080" \
	    $(for i in $WORLD_ATTACKER_TCP; do echo --tcp "$WORLD_ATTACKER:$i"; done) \
	    $(for i in $WORLD_ATTACKER_UDP; do echo --udp "$WORLD_ATTACKER:$i"; done)
	_world_dns

	for name in pkg nodns web web6 metadata attacker; do
		_world_wait_file 10 "$WORLD_DIR/ready.$name" || {
			_world_fail "server $name did not start:"
			sed 's/^/#   /' "$WORLD_DIR/log/$name.out" >&2
			return 1
		}
	done
	wait_for 10 world_inet dig +time=1 +tries=1 +short @"$WORLD_DNS" \
	    pkg.example.com || {
		_world_fail "dnsmasq did not start:"
		sed 's/^/#   /' "$WORLD_DIR/log/dnsmasq.out" >&2
		return 1
	}
	world_resolver_clear
	world_log_clear attacker
	return 0
}

# world_down: tear everything down now (also runs at exit). Idempotent.
world_down() {
	local i
	[ "$_WORLD_UP" -eq 1 ] || return 0
	_world_sluice_sweep
	# All servers at once, so teardown costs one grace period, not one each.
	_world_stop_pids "${_WORLD_PIDS[@]}"
	for ((i = ${#_WORLD_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${_WORLD_CLEANUP[$i]}" >/dev/null 2>&1 || true
	done
	_WORLD_CLEANUP=()
	_WORLD_PIDS=()
	_WORLD_UP=0
	return 0
}

# ------------------------------------------------------------ logs

# world_log NAME: what server NAME (pkg, nodns, web, web6, metadata,
# attacker) received since its last world_log_clear, one JSON object a
# line (fields: proto http|tcp-open|tcp|udp, src, sport, dst, dport, and
# method/path/headers/body for HTTP, data for TCP/UDP).
world_log() {
	local f=$WORLD_DIR/log/$1.log off
	off=$(cat "$WORLD_DIR/off.$1" 2>/dev/null || echo 0)
	[ -f "$f" ] || return 1
	tail -c +$((off + 1)) "$f"
}
world_log_clear() {
	local f=$WORLD_DIR/log/$1.log
	stat -c %s "$f" >"$WORLD_DIR/off.$1" 2>/dev/null || echo 0 >"$WORLD_DIR/off.$1"
}

# world_attacker_log / world_attacker_clear: the attacker's log.
world_attacker_log() {
	world_log attacker | grep -v "world-sync-$WORLD_TAG-"
	return 0
}
world_attacker_clear() { world_log_clear attacker; }

# world_attacker_sync: make sure every UDP datagram and TCP connection that
# reached the attacker before this call is in its log: a marker is sent
# from inside inet to each sink and we wait (bounded) until all are logged.
# Use it before asserting that the attacker saw nothing.
_WORLD_SYNC=0
world_attacker_sync() {
	local p m f=$WORLD_DIR/log/attacker.log
	_WORLD_SYNC=$((_WORLD_SYNC + 1))
	m="world-sync-$WORLD_TAG-$_WORLD_SYNC"
	for p in $WORLD_ATTACKER_UDP; do
		world_inet bash -c "printf '%s' '$m-u$p' >/dev/udp/$WORLD_ATTACKER/$p" ||
		    return 1
		wait_for 5 grep -q "$m-u$p" "$f" || return 1
	done
	world_inet curl -s -m 5 -o /dev/null "http://$WORLD_ATTACKER/$m" || return 1
	grep -q "$m" "$f"
}

# world_resolver_log: the resolver's query log since world_resolver_clear
# (dnsmasq --log-queries=extra lines: "query[A] NAME from ADDR", "config
# NAME is ADDR", ...), without the world's own sync queries. It first makes
# dnsmasq log a marker query and waits for it, so every query it received
# before the call is in the output: "upstream saw no query for X" can be
# asserted with `! world_resolver_log | grep -q X`.
world_resolver_log() {
	local f=$WORLD_DIR/log/resolver.log m off
	_WORLD_SYNC=$((_WORLD_SYNC + 1))
	m="s$_WORLD_SYNC-$WORLD_TAG.sync.world.test"
	world_inet dig +time=2 +tries=2 +short @"$WORLD_DNS" "$m" >/dev/null
	wait_for 5 grep -q "$m" "$f" || { _world_fail "resolver log sync"; return 1; }
	off=$(cat "$WORLD_DIR/off.resolver" 2>/dev/null || echo 0)
	tail -c +$((off + 1)) "$f" | grep -v '\.sync\.world\.test'
	return 0
}
# world_resolver_clear: forget the queries logged so far.
world_resolver_clear() {
	local f=$WORLD_DIR/log/resolver.log m
	_WORLD_SYNC=$((_WORLD_SYNC + 1))
	m="s$_WORLD_SYNC-$WORLD_TAG.sync.world.test"
	world_inet dig +time=2 +tries=2 +short @"$WORLD_DNS" "$m" >/dev/null
	wait_for 5 grep -q "$m" "$f" || return 1
	stat -c %s "$f" >"$WORLD_DIR/off.resolver"
}

# ---------------------------------------------------------- sluiced

# world_sluiced_config FILE [POLICY_DIR]: a daemon config for this world.
# POLICY_DIR defaults to $WORLD_DIR/policies (created empty). Top-level
# sections `servers:` and `audit_sinks:` are left out so a scenario can
# append its own.
world_sluiced_config() {
	local f=$1 pdir=${2:-$WORLD_DIR/policies}
	mkdir -p "$pdir" "$WORLD_DIR/state" "$WORLD_DIR/run" || return 1
	cat >"$f" <<-EOF
	# Generated by tests/e2e/world.sh for run $WORLD_TAG.
	version: 1
	state_dir: $WORLD_DIR/state
	run_dir: $WORLD_DIR/run
	socket: $WORLD_SOCK
	policy_dir: $pdir
	network:
	  pool: $WORLD_POOL
	  service_address: $WORLD_SERVICE
	  bridge_port: $WORLD_BRIDGE_PORT
	  uplink: $WORLD_UPLINK
	  ipv6: false
	  treat_as_public:
	    - 192.0.2.0/24
	    - 198.51.100.0/24
	    - 203.0.113.0/24
	    - 2001:db8::/32
	dns:
	  upstreams:
	    - $WORLD_DNS
	  timeout_ms: 2000
	audit:
	  db: $WORLD_DIR/state/audit.db
	  origin: sluice.test/$WORLD_TAG
	EOF
}

# world_start_sluiced CONFIG: run $SLUICED --config CONFIG --foreground in
# the host namespace, output to $WORLD_DIR/log/sluiced.log; waits (10 s) for
# the control socket $WORLD_SOCK. 0, or 1 (with the log's tail on stderr).
world_start_sluiced() {
	local cfg=$1
	[ -x "$SLUICED" ] || { _world_fail "no $SLUICED"; return 1; }
	[ -n "$_WORLD_SLUICED_PID" ] && { _world_fail "sluiced already running"; return 1; }
	rm -f "$WORLD_SOCK"
	# nsenter itself, not the world_host function: a backgrounded function
	# is a subshell, and $! must be the daemon (nsenter execs it).
	nsenter --net="/run/netns/$WORLD_HOST_NS" -- \
	    "$SLUICED" --config "$cfg" --foreground \
	    >>"$WORLD_DIR/log/sluiced.log" 2>&1 </dev/null &
	_WORLD_SLUICED_PID=$!
	_world_push "world_stop_sluiced"
	if ! wait_for 10 test -S "$WORLD_SOCK"; then
		_world_fail "sluiced: no control socket after 10 s:"
		tail -n 30 "$WORLD_DIR/log/sluiced.log" | sed 's/^/#   /' >&2
		return 1
	fi
	# The socket is bound before the daemon adopts its sandboxes and
	# opens the DNS proxy and the bridge (so a second daemon fails
	# early); it answers only once its loop runs, after all of them.
	if ! wait_for 10 "$SLUICE" -s "$WORLD_SOCK" status >/dev/null 2>&1; then
		_world_fail "sluiced: the control API did not answer within 10 s:"
		tail -n 30 "$WORLD_DIR/log/sluiced.log" | sed 's/^/#   /' >&2
		return 1
	fi
	return 0
}

# world_stop_sluiced: SIGTERM, SIGKILL after 5 s. Leaves the namespaces,
# links and table sluiced made in place (a restart must adopt them);
# world_down removes them. 0, or the daemon's exit status if it was not 0
# and not 143 (SIGTERM).
world_stop_sluiced() {
	local pid=$_WORLD_SLUICED_PID rc=0 i
	[ -n "$pid" ] || return 0
	_WORLD_SLUICED_PID=
	kill -TERM "$pid" 2>/dev/null
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null; rc=$?
	case $rc in 0|143) return 0 ;; *) return "$rc" ;; esac
}

# world_bridge_listening: waits (10 s) for the bridge's port on the
# service address. 0, or 1.
world_bridge_listening() {
	wait_for 10 world_host sh -c "ss -ltn | grep -q '$WORLD_SERVICE:$WORLD_BRIDGE_PORT'"
}

# world_sandbox_token POLICY SUBJECT ID: creates sandbox ID under POLICY
# for SUBJECT and prints its bearer token (nothing when it failed).
world_sandbox_token() {
	world_host "$SLUICE" -s "$WORLD_SOCK" sandbox create --policy "$1" \
	    --subject "$2" --id "$3" | jq -r '.token // empty'
}

# world_sluiced_log: the daemon's output so far.
world_sluiced_log() { cat "$WORLD_DIR/log/sluiced.log" 2>/dev/null; }

# world_sluiced_clean: once sluiced stopped, one ok / not ok line for
# "no sanitizer report in its log" (the report printed when there is one)
# and one for "its audit log's chain verifies".
world_sluiced_clean() {
	local san='runtime error|ERROR: (Address|Leak)Sanitizer'
	if grep -qE "$san" "$WORLD_DIR/log/sluiced.log"; then
		not_ok "sanitizers: no report in sluiced's log"
		grep -E -A30 "$san" "$WORLD_DIR/log/sluiced.log" | head -n 60 |
		    sed 's/^/#   /'
	else
		ok "sanitizers: no report in sluiced's log"
	fi
	check_match "the audit log's chain verifies" '^result: +verified' \
	    "$("$SLUICE" audit verify --db "$WORLD_DIR/state/audit.db" 2>&1)"
}

# world_sandbox_namespaces: the sluice-* namespaces whose veth peer is in
# this world's host namespace (so another run's sandboxes are never
# touched).
world_sandbox_namespaces() {
	{
		ip -n "$WORLD_HOST_NS" -o -d link show 2>/dev/null |
		    grep -o 'link-netns sluice-[a-z0-9-]*' | cut -d' ' -f2
		ip -n "$WORLD_HOST_NS" netns list-id 2>/dev/null |
		    grep -o 'name: sluice-[a-z0-9-]*' | cut -d' ' -f2
	} | sort -u
}

# _world_sluice_cgroups: the sandbox cgroups a sluiced of this world left
# (one it killed, a test that stopped it): sluice_cgroups_sweep (lib.sh)
# over its log.
_world_sluice_cgroups() {
	world_sluiced_log | sluice_cgroups_sweep
}

# _world_sluice_sweep: what sluiced may have left: its process, sandbox
# namespaces (and processes in them, and /etc/netns/<ns>), sl-* links, its
# sandbox cgroups and the `inet sluice` table in the host namespace.
_world_sluice_sweep() {
	local ns l
	[ -e "/run/netns/$WORLD_HOST_NS" ] || return 0
	world_stop_sluiced >/dev/null 2>&1
	_world_sluice_cgroups
	for ns in $(world_sandbox_namespaces); do
		_world_kill_ns_procs "$(_world_ns_inode "$ns")"
		ip netns del "$ns" 2>/dev/null
		rm -rf "/etc/netns/$ns"
	done
	for l in $(ip -n "$WORLD_HOST_NS" -o link show 2>/dev/null |
	    awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^sl-'); do
		ip -n "$WORLD_HOST_NS" link del "$l" 2>/dev/null
	done
	world_host nft delete table inet sluice 2>/dev/null
	return 0
}

# ---------------------------------------------------------- MCP upstreams

# world_mcp_http_start [PORT]: the MCP reference server
# (@modelcontextprotocol/server-everything, Streamable HTTP) in inet,
# reachable at http://192.0.2.30:PORT/mcp (default PORT 3001; the server
# binds every address of inet, so use distinct ports for several). Needs
# `npm ci` in tests/e2e (tests/deps.sh does it). The server keeps no
# request log; its output is in $WORLD_DIR/log/mcp-PORT.out.
world_mcp_http_start() {
	local port=${1:-3001} bin=$E2E_DIR/node_modules/.bin/mcp-server-everything
	[ -e "$bin" ] || { _world_fail "no $bin: run tests/deps.sh"; return 1; }
	[[ $port =~ ^[0-9]{1,5}$ ]] || { _world_fail "bad port $port"; return 1; }
	_world_spawn "mcp-$port" inet env PORT="$port" node "$bin" streamableHttp
	# Any HTTP status means it listens (GET without a session is refused).
	wait_for 15 world_inet curl -s -m 2 -o /dev/null \
	    "http://$WORLD_MCP:$port/mcp" || {
		_world_fail "mcp server did not start:"
		sed 's/^/#   /' "$WORLD_DIR/log/mcp-$port.out" >&2
		return 1
	}
}

# world_mcp_client WHERE ARGS...: the SDK client (servers/mcp_client.mjs)
# run in WHERE: host, inet, sandbox:ID or here (the caller's namespace).
# ARGS as mcp_client.mjs takes them; prints its JSON, returns its status.
world_mcp_client() {
	local where=$1; shift
	case $where in
	host) world_host node "$WORLD_SERVERS/mcp_client.mjs" "$@" ;;
	inet) world_inet node "$WORLD_SERVERS/mcp_client.mjs" "$@" ;;
	sandbox:*) world_sandbox "${where#sandbox:}" \
	    node "$WORLD_SERVERS/mcp_client.mjs" "$@" ;;
	here) node "$WORLD_SERVERS/mcp_client.mjs" "$@" ;;
	*) _world_fail "world_mcp_client: bad WHERE '$where'"; return 2 ;;
	esac
}
