#!/bin/sh
# Installs what the build, the tests and the demo need on a Debian 12 machine.
# Quiet and fast when everything is present: dpkg is asked first, apt-get only
# runs (with one `apt-get update`) when something is missing.
set -eu

PKGS="build-essential pkg-config
libnftnl-dev libmnl-dev libldns-dev libmicrohttpd-dev libjansson-dev libyaml-dev
libpcre2-dev libssl-dev libsqlite3-dev libcurl4-openssl-dev libseccomp-dev libpq-dev check
postgresql
nftables conntrack iproute2 dnsmasq-base dnsutils ldnsutils curl iperf3 sqlite3 jq
busybox-static runc podman bubblewrap
procps psmisc iputils-ping util-linux python3 nodejs npm cppcheck valgrind"

missing=""
for p in $PKGS; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in *" installed") ;; *) missing="$missing $p" ;; esac
done

# Node.js may come from somewhere other than Debian's package; accept any node
# and npm on PATH rather than installing a second one next to it.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
	missing=$(echo "$missing" | tr ' ' '\n' | grep -vx -e nodejs -e npm | tr '\n' ' ')
fi

# On a fresh machine unattended-upgrades or another apt-get often holds the
# dpkg/apt locks for a while; failing at once with "Could not get lock" is
# the worst first impression. Wait for them, bounded (DEPS_LOCK_WAIT
# seconds, 120 by default), polling with fuser when it is there, and let
# apt itself wait as long again for the lock it takes (DPkg::Lock::Timeout,
# apt 2.x as in Debian 12).
LOCK_WAIT=${DEPS_LOCK_WAIT:-120}
LOCKS="/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock
/var/cache/apt/archives/lock"

wait_apt_locks() {
	command -v fuser >/dev/null 2>&1 || return 0
	waited=0
	# shellcheck disable=SC2086
	while holders=$(fuser $LOCKS 2>/dev/null) && [ -n "$(echo "$holders" | tr -d ' ')" ]; do
		if [ "$waited" -eq 0 ]; then
			echo "deps: apt/dpkg is busy (pid$holders); waiting up to ${LOCK_WAIT} s"
		fi
		if [ "$waited" -ge "$LOCK_WAIT" ]; then
			echo "deps: apt/dpkg still busy after ${LOCK_WAIT} s (pid$holders); try again when it is done" >&2
			exit 1
		fi
		sleep 2
		waited=$((waited + 2))
	done
}

if [ -n "$(echo "$missing" | tr -d ' ')" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "deps: need root to install:$missing" >&2; exit 1; }
	echo "deps: about to install these Debian packages:"
	echo "$missing" | tr ' ' '\n' | grep -v '^$' | sed 's/^/  /'
	export DEBIAN_FRONTEND=noninteractive
	wait_apt_locks
	apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT" update -qq
	wait_apt_locks
	# shellcheck disable=SC2086
	apt-get -o DPkg::Lock::Timeout="$LOCK_WAIT" install -y -qq \
	    --no-install-recommends $missing >/dev/null
fi

# The users sluiced's unprivileged processes run as (privsep.dns_user and
# privsep.bridge_user in the config): system users with no home and no
# shell, as a package would create them.
for u in sluice-dns sluice-bridge; do
	if ! id -u "$u" >/dev/null 2>&1; then
		[ "$(id -u)" -eq 0 ] || { echo "deps: need root to create user $u" >&2; exit 1; }
		echo "deps: creating system user $u"
		useradd --system --no-create-home --home-dir /nonexistent \
		    --shell /usr/sbin/nologin "$u"
	fi
done

# npm packages of the end-to-end tests, pinned by tests/e2e/package-lock.json.
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/e2e/package.json" ]; then
	if [ ! -d "$here/e2e/node_modules" ] ||
	   [ "$here/e2e/package-lock.json" -nt "$here/e2e/node_modules/.package-lock.json" ]; then
		echo "deps: npm ci in tests/e2e"
		(cd "$here/e2e" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
fi
exit 0
