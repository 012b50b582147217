#!/bin/bash
# t_audit_daemon.sh: the audit log as the running daemon writes it.
# Unit suites prove the log's integrity on its own; this scenario
# proves the daemon actually records what it does: sandbox lifecycle
# (durable: the control API answers only after the record is committed),
# policy reloads (ok and failed, with the errors), DNS decisions and denied
# packets, and that a reviewer can verify and read the live database beside
# the writer. Then the hard case: SIGKILL sluiced while records stream in
# (a loop of DNS queries and sandbox creations), restart it, and check that
# the chain continues (a new log.open, verify passes) and that every record
# whose durable acknowledgement was given (a 201 for a sandbox) is present.
. "$(dirname "$0")/lib.sh"
. "$E2E_DIR/world.sh"
require_root
world_up || { not_ok "world_up"; finish; }

POL=$E2E_TMP/policies
CFG=$E2E_TMP/sluice.yaml
DB=$WORLD_DIR/state/audit.db
world_sluiced_config "$CFG" "$POL"
cat >"$POL/audited.yaml" <<'EOF'
version: 1
name: audited
egress:
  allow:
    - host: pkg.example.com
      ports: [80]
dns:
  rate: {qps: 1000, burst: 2000}
EOF

world_start_sluiced "$CFG" || { not_ok "sluiced starts"; finish; }
ok "sluiced starts and opens $DB"

sl() { world_host "$SLUICE" -s "$WORLD_SOCK" "$@"; }
au() { SLUICE_AUDIT_DB=$DB "$SLUICE" audit "$@"; }
kind() { au tail --kind "$1" 2>/dev/null; }
# verify_ok: exit 0 (verified) or 3 (verified with warnings: no signing key
# is configured here, so checkpoints are unsigned).
verify_ok() { au verify >"$E2E_TMP/verify.out" 2>&1; r=$?; [ $r -eq 0 ] || [ $r -eq 3 ] || { cat "$E2E_TMP/verify.out"; return 1; }; }
has() { kind "$1" | grep -q -- "$2"; }

check_match "log.open is the first thing the daemon wrote" '"kind":"log.open"' \
    "$(kind log.open | head -n 1)"

# ------------------------------------------------------------- lifecycle

ID=$(sl sandbox create --policy audited | jq -r .id)
if [[ ! $ID =~ ^[a-z0-9][a-z0-9-]{0,31}$ ]]; then
	not_ok "sandbox create (got '$ID')"; finish
fi
# No wait: the 201 is given only after the record's FULL commit.
check "sandbox.create is in the log when create returns" \
    has sandbox.create "\"id\":\"$ID\""
check_match "sandbox.create names the policy" '"policy":\{"id":"audited"' \
    "$(kind sandbox.create | grep "$ID")"

# ------------------------------------------------------------- reload

check "reload succeeds" sl reload
check_match "policy.reload ok recorded with the policies" \
    '"result":"ok"' "$(kind policy.reload | tail -n 1)"
printf 'version: 1\nname: broken\negress: {allow: [{host: 1}]}\nbogus: 1\n' \
    >"$POL/broken.yaml"
check_fails "a broken policy is refused by reload" sl reload
last=$(kind policy.reload | tail -n 1)
check_match "policy.reload failure recorded" '"result":"failed"' "$last"
check_match "with the error's file and line" 'broken\.yaml:[0-9]+:[0-9]+' "$last"
rm -f "$POL/broken.yaml"
world_host kill -HUP "$_WORLD_SLUICED_PID"
n_ok() { [ "$(kind policy.reload | grep -c '"result":"ok"')" -ge 2 ]; }
check "SIGHUP reload recorded too" wait_for 10 n_ok

# ------------------------------------------------------------- dns, net.deny

world_sandbox "$ID" dig +time=3 +tries=1 +short @"$WORLD_SERVICE" \
    pkg.example.com A >/dev/null
world_sandbox "$ID" dig +time=3 +tries=1 +short @"$WORLD_SERVICE" \
    evil.example.net A >/dev/null
dns_seen() { kind dns.decision | grep -q evil.example.net; }
check "dns.decision records reach the log (async)" wait_for 10 dns_seen
recs=$(kind dns.decision)
check_match "tail --kind dns.decision shows the allowed query" \
    '"decision":"allow"' "$(printf '%s\n' "$recs" | grep pkg.example.com)"
check_match "and the denied one" '"decision":"deny"' \
    "$(printf '%s\n' "$recs" | grep evil.example.net)"
check_match "dns.decision carries the sandbox" "\"sandbox\":\\{\"id\":\"$ID\"" \
    "$(printf '%s\n' "$recs" | head -n 1)"
check_eq "tail --kind shows only that kind" "" \
    "$(printf '%s\n' "$recs" | grep -v '"kind":"dns.decision"')"

world_sandbox "$ID" curl -s -m 2 http://"$WORLD_ATTACKER"/ >/dev/null 2>&1
nd_seen() { kind net.deny | grep -q "$WORLD_ATTACKER"; }
check "net.deny record for the blocked connection" wait_for 10 nd_seen
nd=$(kind net.deny | grep "$WORLD_ATTACKER" | head -n 1)
check_match "net.deny names the sandbox" "\"sandbox\":\\{\"id\":\"$ID\"" "$nd"
check_match "net.deny names the destination and port" \
    "\"dst\":\\{\"ip\":\"$WORLD_ATTACKER\",\"port\":80\\}" "$nd"
check_match "net.deny carries a count" '"count":[1-9]' "$nd"

check "audit verify passes on the live database" verify_ok
# No signing key is configured: verify must say the log is unsigned.
check_match "without a key, verify reports no key assurance" \
    '"assurance":"none"' "$(au verify --json 2>/dev/null | jq -c .)"
check_match "OCSF view of a DNS record is DNS Activity" '"class_uid":4003' \
    "$(au tail --format ocsf --kind dns.decision 2>/dev/null | head -n 1)"

check "sandbox rm" sl sandbox rm "$ID"
check "sandbox.delete recorded" has sandbox.delete "\"id\":\"$ID\""

# ------------------------------------------------------------- SIGKILL

ID=$(sl sandbox create --policy audited | jq -r .id)
# DNS queries stream in from the sandbox (bounded: 3000 queries, 60 s),
# while sandbox creations collect durable acknowledgements.
( world_sandbox "$ID" timeout 60 bash -c \
    'for ((i = 0; i < 300; i++)); do
        dig +time=1 +tries=1 +short @'"$WORLD_SERVICE"' \
            pkg.example.com A pkg.example.com A pkg.example.com A \
            pkg.example.com A pkg.example.com A pkg.example.com A \
            pkg.example.com A pkg.example.com A pkg.example.com A \
            pkg.example.com A >/dev/null 2>&1
    done' ) &
DIGS=$!
cleanup_push "kill $DIGS"
acked=()
for ((i = 0; i < 8; i++)); do
	id=$(sl sandbox create --policy audited 2>/dev/null | jq -r .id 2>/dev/null)
	[[ $id =~ ^sb- ]] && acked+=("$id")
done
before=$(kind dns.decision | wc -l)
stream() { [ "$(kind dns.decision | wc -l)" -gt $((before + 20)) ]; }
wait_for 20 stream
kill -KILL "$_WORLD_SLUICED_PID"
wait "$_WORLD_SLUICED_PID" 2>/dev/null
_WORLD_SLUICED_PID=
kill "$DIGS" 2>/dev/null; wait "$DIGS" 2>/dev/null
check "sandbox creations were acknowledged before the kill" \
    test "${#acked[@]}" -ge 1
opens_before=$(kind log.open | wc -l)

world_start_sluiced "$CFG" || { not_ok "sluiced restarts after SIGKILL"; finish; }
ok "sluiced restarts after SIGKILL"
check_eq "a new log.open continues the chain" "$((opens_before + 1))" \
    "$(kind log.open | wc -l)"
check "audit verify passes after the crash" verify_ok
missing=0
for id in "${acked[@]}"; do
	kind sandbox.create | grep -q "\"id\":\"$id\"" || {
		echo "# acknowledged but missing: $id"; missing=$((missing + 1)); }
done
check_eq "every acknowledged sandbox.create is present (${#acked[@]})" 0 "$missing"
adopt_seen() { kind sandbox.adopt | grep -q "\"id\":\"${acked[0]}\""; }
check "the restart recorded sandbox.adopt" adopt_seen
world_sandbox "$ID" dig +time=3 +tries=1 +short @"$WORLD_SERVICE" \
    pkg.example.com A >/dev/null
check_eq "DNS is answered again after the restart" "192.0.2.10" \
    "$(world_sandbox "$ID" dig +time=3 +tries=1 +short @"$WORLD_SERVICE" \
    pkg.example.com A 2>/dev/null)"
check "sluiced stops cleanly" world_stop_sluiced
check_match "log.close written at clean shutdown" '"kind":"log.close"' \
    "$(au tail -n 1 2>/dev/null)"
check "audit verify passes at the end" verify_ok

# ------------------------------------------------------------- signing key

# With audit.key configured the daemon signs checkpoints; a reviewer holding
# the verifier key gets "local-key" assurance.
ORIGIN=$(sed -n 's/^  origin: //p' "$CFG")
VKEY=$("$SLUICE" audit keygen --origin "$ORIGIN" --out "$E2E_TMP/audit.key")
check_match "keygen prints the verifier key" "^$ORIGIN\\+[0-9a-f]{8}\\+" "$VKEY"
echo "  key: $E2E_TMP/audit.key" >>"$CFG"
world_start_sluiced "$CFG" || { not_ok "sluiced starts with a key"; finish; }
ID=$(sl sandbox create --policy audited | jq -r .id)
check "sandbox.create recorded with the key configured" \
    has sandbox.create "\"id\":\"$ID\""
check "sluiced stops cleanly (final signed checkpoint)" world_stop_sluiced
au verify --key "$VKEY" --json >"$E2E_TMP/v.json" 2>/dev/null; r=$?
check "verify with the verifier key passes (exit $r)" test $r -eq 0 -o $r -eq 3
check_eq "assurance is local-key" "local-key" "$(jq -r .assurance "$E2E_TMP/v.json")"
# ------------------------------------------------------------- daemon mode

# Without --foreground sluiced forks; the audit writer is a thread, so the
# log is closed before the fork and opened again in the child: the chain
# must go on unbroken and records written after the fork must land.
opens=$(kind log.open | wc -l)
PIDF=$WORLD_DIR/run/sluiced.pid
rm -f "$PIDF" "$WORLD_SOCK"
world_host "$SLUICED" --config "$CFG" >>"$WORLD_DIR/log/sluiced.log" 2>&1
cleanup_push "[ -s '$PIDF' ] && kill -KILL \$(cat '$PIDF')"
check "daemon mode: the control socket appears" wait_for 10 test -S "$WORLD_SOCK"
check "daemon mode: pid file written" wait_for 5 test -s "$PIDF"
ID=$(sl sandbox create --policy audited | jq -r .id)
check "daemon mode: sandbox.create committed after the fork" \
    has sandbox.create "\"id\":\"$ID\""
check_eq "daemon mode: log.open before and after the fork" "$((opens + 2))" \
    "$(kind log.open | wc -l)"
dpid=$(cat "$PIDF" 2>/dev/null)
[ -n "$dpid" ] && kill -TERM "$dpid"
gone() { ! kill -0 "$dpid" 2>/dev/null; }
check "daemon mode: SIGTERM stops it" wait_for 10 gone
check "audit verify passes after daemon mode" verify_ok

# ------------------------------------------------------------- audit down

# No action without a record: with the audit database on a file system that
# is full, a sandbox create answers 503 audit_unavailable and makes nothing
# (no pin, no link, no row). A delete is never refused for the log: it
# removes the sandbox, its record written from the log's reserve (or once
# there is room again).
FS=$E2E_TMP/auditfs
mkdir -p "$FS"
if mount -t tmpfs -o size=4m tmpfs "$FS"; then
	cleanup_push "umount -l '$FS'"
	CFG2=$E2E_TMP/sluice-full.yaml
	sed "s|^  db: .*|  db: $FS/audit.db|; /^  key: /d" "$CFG" >"$CFG2"
	SDB=$WORLD_DIR/state/state.db
	fdb() { SLUICE_AUDIT_DB=$FS/audit.db "$SLUICE" audit tail --kind "$1" 2>/dev/null; }
	npins() { ls /run/netns | grep -c '^sluice-'; }
	nrows() { sqlite3 "$SDB" "SELECT count(*) FROM sandboxes"; }
	state() { echo "$(npins) $(nrows) $(world_host ip -o link show | grep -c ' sl-')"; }
	if world_start_sluiced "$CFG2"; then
		FID=$(sl sandbox create --policy audited --id "full-$$" | jq -r .id)
		check_eq "audit on tmpfs: create works while there is room" "full-$$" "$FID"
		fhas() { fdb "$1" | grep "\"id\":\"$2\"" | grep -q "$3"; }
		check "and its sandbox.create (allow) is in that log" \
		    fhas sandbox.create "$FID" '"decision":"allow"'
		dd if=/dev/zero of="$FS/fill" bs=64k >/dev/null 2>&1
		s0=$(state)
		sl sandbox create --policy audited --id "nolog-$$" >/dev/null 2>"$E2E_TMP/full.err"
		check_eq "audit full: create exits 1" 1 "$?"
		check_match "audit full: 503 audit_unavailable" 'audit_unavailable \(503\)' \
		    "$(cat "$E2E_TMP/full.err")"
		check_fails "audit full: no namespace made" test -e "/run/netns/sluice-nolog-$$"
		check_eq "audit full: nothing made (pins rows links)" "$s0" "$(state)"
		check_eq "audit full: no state row" "" \
		    "$(sqlite3 "$SDB" "SELECT id FROM sandboxes WHERE id = 'nolog-$$'")"
		check "audit full: rm goes through" sl sandbox rm "$FID"
		check_fails "audit full: the namespace is gone" test -e "/run/netns/sluice-$FID"
		rm -f "$FS/fill"
		delrec() { fhas sandbox.delete "$FID" '"kind":"sandbox.delete"'; }
		check "room again: sandbox.delete recorded" wait_for 10 delrec
		check_eq "no allow record for the refused id" "" \
		    "$(fdb sandbox.create | grep "nolog-$$" | grep '"decision":"allow"')"
		check "sluiced stops cleanly (audit on tmpfs)" world_stop_sluiced
	else
		not_ok "sluiced starts with its audit log on a tmpfs"
	fi
else
	ok "# SKIP audit down: cannot mount a tmpfs"
fi

check_fails "no sanitizer report in the daemon's log" \
    grep -qE "AddressSanitizer|LeakSanitizer|runtime error:" \
    "$WORLD_DIR/log/sluiced.log"
finish
