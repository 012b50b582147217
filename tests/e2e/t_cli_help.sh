#!/bin/bash
# t_cli_help: the CLI as a newcomer meets it in the first hour, and what the
# binary carries. Every command answers --help with its own usage (exit 0,
# nothing on stderr, no daemon asked); `sluice --help` and `sluice help`
# list every command the CLI has; `audit keygen` writes a signing key only
# to the new file it was given; and build/sluice contains no object of the
# daemon (DNS proxy, bridge, sandbox manager, control server) nor links
# the libraries only those use. No daemon, no network: files only.
. "$(dirname "$0")/lib.sh"
cd "$TOP" || exit 1

if [ ! -x "$SLUICE" ]; then
	not_ok "sluice binary missing: $SLUICE"
	exit 1
fi

# No daemon: a command that tried to reach one would fail, not print help.
export SLUICE_SOCKET=$E2E_TMP/no-daemon.sock
o=$E2E_TMP/out e=$E2E_TMP/err

# run_cli ARGS...: sluice with stdout to $o and stderr to $e; echo rc.
run_cli() {
	"$SLUICE" "$@" >"$o" 2>"$e"
	echo $?
}

# help_ok TEXT WORDS ARGS...: sluice ARGS exits 0 with a usage on stdout
# whose first line names WORDS, and nothing on stderr.
help_ok() {
	local text=$1 words=$2 rc; shift 2
	rc=$(run_cli "$@")
	if [ "$rc" = 0 ] && [ ! -s "$e" ] &&
	    head -n 1 "$o" | grep -qE "^usage: sluice( \[-s SOCKET\])? $words"; then
		ok "$text"
	else
		not_ok "$text (rc $rc; stdout: $(head -c 160 "$o"); stderr: $(head -c 160 "$e"))"
	fi
}

# --- the whole CLI's usage -------------------------------------------------

help_ok "sluice --help prints the usage, exit 0" "\[-s SOCKET\] COMMAND" --help
help_ok "sluice help prints the usage, exit 0" "\[-s SOCKET\] COMMAND" help
help_ok "sluice -h prints the usage, exit 0" "\[-s SOCKET\] COMMAND" -h
rc=$(run_cli)
check_eq "sluice without a command is a usage error" 2 "$rc"

# Every command of the dispatch (gateway/cli/sluice.c) and every
# subcommand of the groups (gateway/cli/cli_*.c).
run_cli --help >/dev/null
overview=$(cat "$o")
for c in "policy check" "policy explain" "audit verify" "audit keygen" \
    "audit checkpoint" "audit proof" "audit check-proof" "audit tail" \
    "sandbox create" "sandbox ls" "sandbox show" "sandbox rm" "exec" "run" \
    "approvals" "approve" "deny" "mcp pins" "mcp accept" "status" "reload" \
    "fleet migrate"; do
	if printf '%s\n' "$overview" | grep -qE "^  $c( |$)"; then
		ok "sluice --help lists '$c'"
	else
		not_ok "sluice --help lists '$c'"
	fi
done
check_match "sluice --help shows keygen's --out FILE" \
    "audit keygen --origin O --out FILE" "$overview"

# --- each command's own usage ----------------------------------------------

for c in policy audit fleet sandbox exec run approvals approve deny mcp status \
    reload; do
	help_ok "sluice $c --help: its own usage" "$c" "$c" --help
	help_ok "sluice help $c: its own usage" "$c" help "$c"
done
help_ok "sluice policy check --help" "policy" policy check --help
help_ok "sluice policy explain --help" "policy" policy explain --help
for s in verify keygen proof check-proof checkpoint tail; do
	help_ok "sluice audit $s --help" "audit" audit "$s" --help
done
help_ok "sluice sandbox create --help" "sandbox" sandbox create --help
help_ok "sluice sandbox rm -h" "sandbox" sandbox rm -h
help_ok "sluice mcp pins --help" "mcp" mcp pins --help
help_ok "sluice status --help" "status" status --help
help_ok "sluice run --policy p --help: help wins over the options" "run" \
    run --policy p --help
help_ok "sluice -s SOCKET exec --help" "exec" -s "$SLUICE_SOCKET" exec --help
run_cli audit verify --help >/dev/null
check_match "audit --help shows every audit subcommand" \
    "audit check-proof --key PUB FILE" "$(cat "$o")"
check_match "audit --help says where keygen writes the key" \
    "keygen writes the new signing key to FILE only" "$(cat "$o")"

# A --help after "--" is the command's, not ours: exec tries the (absent)
# daemon instead of printing our usage.
rc=$(run_cli exec sb1 -- sh --help)
if [ "$rc" != 0 ] && ! grep -q "^usage:" "$o"; then
	ok "exec ID -- CMD --help leaves --help to CMD"
else
	not_ok "exec ID -- CMD --help leaves --help to CMD (rc $rc)"
fi
rc=$(run_cli help nosuchcommand)
check_eq "sluice help of an unknown command is a usage error" 2 "$rc"
rc=$(run_cli audit verify --no-such-option)
check_eq "an unknown option is still a usage error" 2 "$rc"
check_match "a usage error prints the command's usage on stderr" \
    "^usage: sluice audit verify" "$(cat "$e")"

# --- audit keygen: the key only where it was asked to go --------------------

K=$E2E_TMP/keygen
mkdir -m 0700 "$K"
ORIGIN=sluice.test/cli-help
rc=$( (cd "$K" && "$SLUICE" audit keygen --origin "$ORIGIN" >"$o" 2>"$e"); echo $?)
check_eq "keygen without --out is a usage error" 2 "$rc"
check_eq "keygen without --out writes no file in the current directory" \
    "" "$(ls -A "$K")"
if grep -q "PRIVATE KEY" "$o" "$e"; then
	not_ok "keygen without --out prints no private key"
else
	ok "keygen without --out prints no private key"
fi
rc=$( (cd "$K" && "$SLUICE" audit keygen --origin "$ORIGIN" --out - >"$o" 2>"$e"); echo $?)
check_eq "keygen --out - is refused" 2 "$rc"
check_eq "keygen --out - writes no file" "" "$(ls -A "$K")"
if grep -q "PRIVATE KEY" "$o" "$e"; then
	not_ok "keygen --out - prints no private key"
else
	ok "keygen --out - prints no private key"
fi

rc=$(run_cli audit keygen --origin "$ORIGIN" --out "$K/audit.key")
check_eq "keygen --out FILE exits 0" 0 "$rc"
check_eq "keygen --out FILE writes mode 0600" 600 "$(stat -c %a "$K/audit.key")"
check_match "keygen prints only the verifier key" \
    "^$ORIGIN\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+$" "$(cat "$o")"
sum=$(sha256sum <"$K/audit.key")
rc=$(run_cli audit keygen --origin "$ORIGIN" --out "$K/audit.key")
check_eq "keygen onto an existing key fails" 1 "$rc"
check_eq "keygen leaves the existing key as it was" "$sum" \
    "$(sha256sum <"$K/audit.key")"
ln -s "$K/planted-target" "$K/link.key"
rc=$(run_cli audit keygen --origin "$ORIGIN" --out "$K/link.key")
check_eq "keygen onto a planted symlink fails" 1 "$rc"
if [ -e "$K/planted-target" ]; then
	not_ok "keygen does not follow a planted symlink"
else
	ok "keygen does not follow a planted symlink"
fi

# --- what the binary carries -------------------------------------------------

# Every global symbol the daemon's own objects define (gateway/, bridge
# included; not the CLI's room nor the CNI plugin's, not sluiced's main,
# not the fleet's store library, which the CLI links by design)
# must be absent from build/sluice and build/sluice-cni: each links its
# room and the files it calls.
# Only objects whose source is in the tree: a build directory used before
# a file moved still holds the object of its old place.
objs=
for o in $(find "$SLUICE_BUILD/obj/gateway" -name '*.o' ! -path '*/gateway/cli/*' \
    ! -path '*/gateway/cni/*' ! -name sluiced.o \
    ! -path '*/gateway/fleet/budget.o' ! -path '*/gateway/fleet/pg.o' \
    ! -path '*/gateway/fleet/wload.o' 2>/dev/null); do
	src=${o#"$SLUICE_BUILD/obj/"}
	[ -f "$TOP/${src%.o}.c" ] && objs="$objs $o"
done
if [ -z "$objs" ]; then
	not_ok "daemon objects missing under $SLUICE_BUILD/obj/gateway"
else
	# shellcheck disable=SC2086
	nm -g --defined-only $objs 2>/dev/null | awk 'NF == 3 { print $3 }' |
	    sort -u >"$E2E_TMP/daemon.sym"
	nm --defined-only "$SLUICE" | awk 'NF == 3 { print $3 }' | sort -u \
	    >"$E2E_TMP/cli.sym"
	shared=$(comm -12 "$E2E_TMP/daemon.sym" "$E2E_TMP/cli.sym")
	check_eq "build/sluice defines no symbol of the daemon's objects" "" \
	    "$(printf '%s' "$shared" | head -n 8 | paste -sd' ')"
	for p in dns_new dns_free br_ sbx_ ctl_; do
		if grep -q "^$p" "$E2E_TMP/cli.sym"; then
			not_ok "build/sluice has no $p* symbol"
		else
			ok "build/sluice has no $p* symbol"
		fi
	done
	# The CNI plugin, which a container runtime runs as root on a pod's
	# config: its own files and the CLI's HTTP client, nothing more.
	if [ -x "$SLUICE_BUILD/sluice-cni" ]; then
		nm --defined-only "$SLUICE_BUILD/sluice-cni" | awk 'NF == 3 { print $3 }' |
		    sort -u >"$E2E_TMP/cni.sym"
		check_eq "build/sluice-cni defines no symbol of the daemon's objects" "" \
		    "$(comm -12 "$E2E_TMP/daemon.sym" "$E2E_TMP/cni.sym" | head -n 8 | paste -sd' ')"
		check_eq "build/sluice-cni links no rtnetlink, nftables, HTTP server or DNS library" "" \
		    "$(ldd "$SLUICE_BUILD/sluice-cni" | awk '{ print $1 }' |
		    grep -E '^lib(mnl|nftnl|microhttpd|ldns|seccomp|sqlite3)\.' | paste -sd' ')"
	else
		not_ok "build/sluice-cni is built"
	fi
fi
libs=$(ldd "$SLUICE" | awk '{ print $1 }')
for l in libmicrohttpd libnftnl libldns; do
	if printf '%s\n' "$libs" | grep -q "^$l\."; then
		not_ok "build/sluice does not link $l"
	else
		ok "build/sluice does not link $l"
	fi
done

finish
