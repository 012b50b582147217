#!/usr/bin/env bash
# t_quickstart.sh: the README's Quickstart works as written.
#
# A new user's first hour is the Quickstart: if one of its commands fails
# on the shipped examples, nothing else matters. This scenario reads the
# commands from the ```sh block of README.md's "## Quickstart" section (so
# a README change that breaks them fails here) and runs each one, in order,
# in the e2e world's host namespace, checking what each step promises.
#
# The Quickstart is for a real machine; the test changes only what cannot
# be real here, with sed, on each command and on the copied files:
#   - /etc/sluice, /var/lib/sluice, /run/sluice, /var/log/sluice become
#     directories under $E2E_TMP (the real ones are never touched), and the
#     CLI finds the socket through $SLUICE_SOCKET;
#   - build/ becomes $SLUICE_BUILD/ (the binaries under test), and
#     `make deps && make` is skipped (the build is given; tests never run
#     deps.sh);
#   - sluiced runs in the world's host namespace (nsenter), and every other
#     command there too;
#   - the edits the README asks for after copying sluice.yaml (uplink,
#     dns.upstreams) become the world's uplink and resolver;
#   - https://pypi.org/ becomes the world's package index,
#     http://pkg.example.com:443/ (plain HTTP on 443), and coding-agent's
#     `host: pypi.org` rule names pkg.example.com with `check: none` (the
#     name gate would refuse plain HTTP on a tls port);
#   - <id> and <vkey printed by keygen> become what the earlier steps printed.
# A command the test does not recognise is a failure: a new Quickstart step
# needs a check here.

. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root
world_up || { not_ok "world_up"; finish; }

Q=$E2E_TMP/qs
mkdir -p "$Q"
export SLUICE_SOCKET=$Q/run/sluice.sock

# The commands of the Quickstart's sh block, one a line.
mapfile -t STEPS < <(awk '
    /^## Quickstart/ { inq = 1; next }
    inq && /^## / { exit }
    inq && /^```sh/ { inb = 1; next }
    inq && inb && /^```/ { exit }
    inq && inb && NF { print }' "$TOP/README.md")
if [ "${#STEPS[@]}" -ge 8 ]; then
	ok "README Quickstart has its sh block (${#STEPS[@]} commands)"
else
	not_ok "README Quickstart: sh block with commands not found"; finish
fi

# paths LINE: the command with this machine's paths and binaries.
paths() {
	sed -e "s#/etc/sluice#$Q/etc#g" -e "s#/var/lib/sluice#$Q/lib#g" \
	    -e "s#/run/sluice#$Q/run#g" -e "s#/var/log/sluice#$Q/log#g" \
	    -e "s#build/sluiced #$SLUICED #g" -e "s#build/sluice #$SLUICE #g" \
	    -e "s#https://pypi.org/#http://pkg.example.com:443/#g" <<<"$1"
}

# edit_config: what the README asks the user to edit, plus this world's
# paths and host names.
edit_config() {
	local f=$Q/etc/sluice.yaml p
	[ -f "$f" ] || return 1
	sed -i -e "s#/etc/sluice#$Q/etc#g" -e "s#/var/lib/sluice#$Q/lib#g" \
	    -e "s#/run/sluice#$Q/run#g" -e "s#/var/log/sluice#$Q/log#g" \
	    -e "s#^\(  uplink:\) *eth0#\1 $WORLD_UPLINK#" \
	    -e "/^dns:/,/^[a-z]/{s#^    - 192\.0\.2\.53#    - $WORLD_DNS#;/2001:db8::53/d}" \
	    "$f" || return 1
	grep -q "uplink: $WORLD_UPLINK" "$f" || return 1
	# The world's 443 is plain HTTP, which the name gate (tls by default
	# on 443) refuses: the copies' rules say check: none.
	for p in "$Q"/etc/policies/*.yaml; do
		sed -i 's#^\( *\)- host: pypi\.org$#\1- host: pkg.example.com\n\1  check: none#' \
		    "$p" || return 1
	done
	grep -q 'host: pkg.example.com' "$Q/etc/policies/coding-agent.yaml"
}

# in_host CMD: run the shell command CMD in the world's host namespace.
in_host() { world_host bash -c "$1"; }

SBX_ID='' VKEY='' EDITED=0
cd "$TOP" || exit 1
for step in "${STEPS[@]}"; do
	cmd=$(paths "$step")
	case $step in
	"make deps"*)
		ok "skipped: $step (the build under test is given)" ;;
	"install -d "*|"cp "*)
		check "$step" in_host "$cmd"
		if [[ $step == *sluice.yaml* ]]; then
			if edit_config; then EDITED=1; ok "config edited: uplink, dns.upstreams, paths"
			else not_ok "config edits (uplink, dns.upstreams) did not apply"; fi
		fi ;;
	*"sluice audit keygen "*)
		VKEY=$(in_host "$cmd" 2>"$E2E_TMP/keygen.err")
		check_match "$step: prints the verifier key" \
		    '^[^+ ]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]+$' "$VKEY" ;;
	*"sluiced "*"&")
		[ "$EDITED" -eq 1 ] || not_ok "sluiced starts before the config was copied"
		# The daemon is this shell's child (so world_stop_sluiced
		# stops it), in the host namespace, as the line says.
		{ eval "nsenter --net=/run/netns/$WORLD_HOST_NS -- $cmd"; } \
		    >>"$WORLD_DIR/log/sluiced.log" 2>&1 </dev/null
		_WORLD_SLUICED_PID=$!
		_world_push "world_stop_sluiced"
		if wait_for 15 "$SLUICE" status; then
			ok "$step: the daemon starts with the example config"
		else
			not_ok "$step: the daemon did not start"
			world_sluiced_log | tail -n 20 | sed 's/^/#   /'
			finish
		fi ;;
	*"sluice status"*)
		out=$(in_host "$cmd" 2>&1)
		check_match "$step: answers" 'policies|sandboxes' "$out" ;;
	*"sluice sandbox create "*)
		out=$(in_host "$cmd" 2>&1)
		SBX_ID=$(jq -r '.id // empty' <<<"$out" 2>/dev/null)
		check_match "$step: JSON with an id" '^[a-z0-9][a-z0-9-]*$' "$SBX_ID"
		check_match "$step: JSON has netns_path and token" \
		    '"netns_path".*"token"|"token".*"netns_path"' "$(tr -d '\n' <<<"$out")" ;;
	*"sluice exec <id> "*)
		[ -n "$SBX_ID" ] || not_ok "exec before a sandbox was created"
		out=$(in_host "${cmd//<id>/$SBX_ID}" 2>&1)
		check_match "$step: the command runs in the sandbox and reaches the allowed host" \
		    '^HTTP/[0-9.]+ 200' "$out" ;;
	*"sluice run --policy locked-down "*)
		world_log_clear metadata
		out=$(in_host "$cmd" 2>&1)
		check_match "$step: prints blocked" '^blocked$' "$out"
		check_eq "$step: the metadata service saw nothing" "" \
		    "$(world_log metadata)" ;;
	*"sluice audit verify "*)
		[ -n "$VKEY" ] || not_ok "verify before keygen printed a key"
		out=$(in_host "${cmd//<vkey printed by keygen>/$VKEY}" 2>&1); rc=$?
		# 3: verified, with the warning that no external checkpoint
		# was given (the Quickstart gives none).
		if [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ]; then
			ok "$step: verifies (exit $rc)"
		else
			not_ok "$step: exit $rc"; sed 's/^/#   /' <<<"$out" | head -n 10
		fi
		check_match "$step: signed by the keygen key" 'verified' "$out" ;;
	*"sluice approvals"*)
		check "$step: answers" in_host "$cmd" ;;
	*)
		not_ok "unknown Quickstart step (add its check here): $step" ;;
	esac
done

# The daemon said nothing about missing credentials or unknown servers.
log=$(world_sluiced_log)
check_eq "no policy was refused for an unknown MCP server" "" \
    "$(grep -i 'unknown MCP server' <<<"$log")"
check_eq "the real /etc/sluice was not used" "" \
    "$(grep -F ' /etc/sluice' <<<"$log")"
# The example's file sink writes the records (its directory is not made by
# the Quickstart either).
if grep -q '^  - name: local-file' "$Q/etc/sluice.yaml"; then
	check "the example's local-file sink receives the records" \
	    wait_for 10 test -s "$Q/log/audit.ndjson"
fi
# Enabling a credential without creating it, as the config's comment
# warns: the daemon refuses to start and names the file.
world_stop_sluiced
cfg2=$Q/etc/sluice-files-cred.yaml
sed -e '/^  - name: files/,/^  - name: /{s/^    # credential:/    credential:/;s/^    #   /      /}' \
    "$Q/etc/sluice.yaml" >"$cfg2"
if grep -q "^      file: $Q/etc/files.token" "$cfg2"; then
	out=$(timeout 30 nsenter --net="/run/netns/$WORLD_HOST_NS" -- \
	    "$SLUICED" --config "$cfg2" --foreground </dev/null 2>&1); rc=$?
	check_match "files' credential enabled, token missing: sluiced exits (not 0, not killed)" \
	    '^([1-9]|[1-9][0-9]|1[01][0-9]|12[0-3])$' "$rc"
	check_match "... naming the server and the file" \
	    "upstream files: credential file $Q/etc/files.token" "$out"
else
	not_ok "the example config's files credential could not be uncommented"
fi

# What the daemon said about its upstreams and sinks (diagnostics).
grep -iE 'upstream|sink' <<<"$log" | head -n 10 | sed 's/^/# /'
finish
