#!/bin/bash
# t_audit_cli.sh: `sluice audit` as a reviewer uses it, on real files.
#
# A small helper (compiled here from the heredoc below against the ASan
# build's audit/ objects) plays the daemon's part and writes records through
# the real writer; the reviewer then runs keygen, verify (with and without an
# external checkpoint, also while a writer is running), checkpoint, proof,
# check-proof and tail, and finally edits copies of the database with the
# sqlite3 shell as an attacker would. No network, no namespaces: files only,
# all under the scenario's temp dir.
. "$(dirname "$0")/lib.sh"

if ! "$SLUICE" audit --help >/dev/null 2>&1; then
	not_ok "$SLUICE has an 'audit' command"
	exit 1
fi
for t in cc sqlite3 jq pkg-config; do
	command -v "$t" >/dev/null || { echo "not ok - $t missing"; exit 1; }
done

T=$E2E_TMP
ORIGIN="audit.e2e$$.test.example/seg/0"
OBJ=$SLUICE_BUILD/obj/audit

cat >"$T/fill.c" <<'EOF'
/* fill DB KEY ORIGIN N: append N records through the real writer. */
#include <stdio.h>
#include <stdlib.h>
#include "audit/audit.h"
int
main(int argc, char **argv)
{
	struct aud_opts o = { 0 };
	struct aud_log *l;
	char err[256];
	int i, n;

	if (argc != 5)
		return 2;
	o.db_path = argv[1];
	o.key_path = argv[2];
	o.origin = argv[3];
	n = atoi(argv[4]);
	if ((l = aud_open(&o, err, sizeof(err))) == NULL) {
		fprintf(stderr, "fill: %s\n", err);
		return 1;
	}
	for (i = 0; i < n; i++) {
		json_t *f;
		const char *k;

		if (i % 3 == 0) {
			k = "dns.decision";
			f = json_pack("{s:{s:s,s:s},s:{s:s,s:s,s:s},s:s}",
			    "sandbox", "id", i % 2 ? "sb-A" : "sb-B", "run", "r1",
			    "q", "name", "example.com", "type", "A", "class",
			    "IN", "decision", "deny");
		} else {
			k = "mcp.call";
			f = json_pack("{s:{s:s},s:s,s:s,s:i,s:s}", "sandbox", "id",
			    i % 2 ? "sb-A" : "sb-B", "server", "files", "tool",
			    "read", "jsonrpc_id", i, "decision", "allow");
		}
		if (aud_submit_async(l, k, f) == -1)
			i--;	/* queue full: retry, this helper is no daemon */
		if (i % 50 == 0)
			aud_sync(l);
	}
	aud_close(l);
	return 0;
}
EOF
# shellcheck disable=SC2046
if ! cc -std=c17 -D_GNU_SOURCE -I"$TOP" $(pkg-config --cflags jansson) \
    -fsanitize=address,undefined -o "$T/fill" "$T/fill.c" "$OBJ"/*.o \
    $(pkg-config --libs jansson sqlite3 libcrypto libcurl) -lpthread 2>"$T/cc.err"; then
	not_ok "compile the record writer helper"; sed 's/^/#   /' "$T/cc.err"
	exit 1
fi

DB=$T/audit.db
KEY=$T/audit.key
VK=$("$SLUICE" audit keygen --origin "$ORIGIN" --out "$KEY")
check_match "keygen prints the vkey name+id+key" \
    "^$ORIGIN\\+[0-9a-f]{8}\\+[A-Za-z0-9+/]{44}\$" "$VK"
check_eq "keygen writes the key with mode 0600" "600" "$(stat -c %a "$KEY")"
check_match "key file is PKCS#8 PEM" "BEGIN PRIVATE KEY" "$(head -n 1 "$KEY")"
check_fails "keygen never overwrites a key" \
    "$SLUICE" audit keygen --origin "$ORIGIN" --out "$KEY"
echo "$VK" >"$T/vkey"

check "writer appends 120 records" "$T/fill" "$DB" "$KEY" "$ORIGIN" 120

# verify: no external checkpoint -> verified with warnings (3), local-key.
"$SLUICE" audit verify --db "$DB" --key "$VK" --json >"$T/v.json"; rc=$?
check_eq "verify without external checkpoint exits 3" 3 "$rc"
check_eq "assurance is local-key" local-key "$(jq -r .assurance "$T/v.json")"
check_eq "size counts log.open and log.close" 122 "$(jq -r .size "$T/v.json")"
check_eq "nothing unsealed after close" 0 "$(jq -r .unsealed_tail "$T/v.json")"

check "checkpoint export" "$SLUICE" audit checkpoint --db "$DB" --out "$T/ext.ckpt"
check_match "checkpoint is a C2SP note" "^$ORIGIN
122
[A-Za-z0-9+/]{43}=

— $ORIGIN " "$(cat "$T/ext.ckpt")"
"$SLUICE" audit verify --db "$DB" --key "$T/vkey" --checkpoint "$T/ext.ckpt" \
    >"$T/v.txt"; rc=$?
check_eq "verify with external checkpoint exits 0" 0 "$rc"
check_match "human report names the assurance" "assurance: external" \
    "$(cat "$T/v.txt")"
check_match "human report states the claims" "contiguous from 0" \
    "$(cat "$T/v.txt")"

# proofs
check "proof for seq 7" "$SLUICE" audit proof --db "$DB" --seq 7 --out "$T/7.proof"
check_eq "proof starts with the tlog-proof header" "c2sp.org/tlog-proof@v1" \
    "$(head -n 1 "$T/7.proof")"
out=$("$SLUICE" audit check-proof --key "$VK" "$T/7.proof" 2>&1); rc=$?
check_eq "check-proof accepts a good proof" 0 "$rc"
check_match "check-proof prints the record" '"seq":7' "$out"
# Options after the file are options too (GNU order), as for any command.
"$SLUICE" audit check-proof "$T/7.proof" --key "$VK" >/dev/null 2>&1
check_eq "check-proof takes --key after the file" 0 "$?"
sed '2s/^extra ./extra A/' "$T/7.proof" >"$T/bad.proof"
if cmp -s "$T/7.proof" "$T/bad.proof"; then
	sed '2s/^extra ./extra B/' "$T/7.proof" >"$T/bad.proof"
fi
"$SLUICE" audit check-proof --key "$VK" "$T/bad.proof" >/dev/null 2>&1; rc=$?
check_eq "check-proof refuses an edited record" 1 "$rc"
"$SLUICE" audit proof --db "$DB" --seq 999 >/dev/null 2>&1; rc=$?
check_eq "proof for a seq beyond the log fails" 1 "$rc"

# tail
check_eq "tail -n 5 prints 5 records" 5 \
    "$("$SLUICE" audit tail --db "$DB" -n 5 | wc -l)"
check_eq "tail -n 5 ends with log.close" log.close \
    "$("$SLUICE" audit tail --db "$DB" -n 5 | tail -n 1 | jq -r .kind)"
check_eq "tail --kind dns.decision" 40 \
    "$("$SLUICE" audit tail --db "$DB" --kind dns.decision | wc -l)"
check_eq "tail --sandbox sb-A" 60 \
    "$("$SLUICE" audit tail --db "$DB" --sandbox sb-A | wc -l)"
check_eq "tail --format ocsf maps mcp.call to API Activity" 6003 \
    "$("$SLUICE" audit tail --db "$DB" --format ocsf --kind mcp.call -n 1 | jq -r .class_uid)"
check_eq "tail --format ocsf maps dns.decision to DNS Activity" 4003 \
    "$("$SLUICE" audit tail --db "$DB" --format ocsf --kind dns.decision -n 1 | jq -r .class_uid)"
"$SLUICE" audit tail --db "$DB" --kind no.such >/dev/null 2>&1; rc=$?
check_eq "tail refuses an unknown kind" 2 "$rc"

# verify beside a running writer: never a false tamper, never an error.
"$T/fill" "$DB" "$KEY" "$ORIGIN" 3000 &
fpid=$!
cleanup_push "kill $fpid"
bad=0
for i in 1 2 3 4 5; do
	"$SLUICE" audit verify --db "$DB" --key "$VK" --checkpoint "$T/ext.ckpt" \
	    >"$T/live.txt" 2>&1; rc=$?
	case $rc in 0|3) ;; *) bad=1; sed 's/^/#   /' "$T/live.txt" | head -n 8 ;; esac
done
wait "$fpid"; frc=$?
check_eq "writer finished while verify ran" 0 "$frc"
check_eq "verify beside a live writer: no false alarm" 0 "$bad"
"$SLUICE" audit verify --db "$DB" --key "$VK" --checkpoint "$T/ext.ckpt" \
    >/dev/null; rc=$?
check_eq "grown log still verifies against the old checkpoint" 0 "$rc"

# tampering, on copies, with the triggers dropped first
tamper() {	# tamper NAME SQL: copy the DB, apply SQL
	# .backup, not cp: a -wal file may still hold committed pages.
	sqlite3 "$DB" ".backup '$T/$1.db'"
	sqlite3 "$T/$1.db" "DROP TRIGGER rec_no_upd; DROP TRIGGER rec_no_del;
	    DROP TRIGGER mn_no_upd; DROP TRIGGER mn_no_del;
	    DROP TRIGGER ck_no_upd; DROP TRIGGER ck_no_del; $2"
}
tamper edit "UPDATE records SET canon = CAST(replace(CAST(canon AS TEXT),
    '\"tool\":\"read\"', '\"tool\":\"rm_r\"') AS BLOB) WHERE seq = 11"
"$SLUICE" audit verify --db "$T/edit.db" --key "$VK" --json >"$T/e.json"; rc=$?
check_eq "edited record: verify exits 1" 1 "$rc"
check_eq "edited record: first failure at seq 11" 11 \
    "$(jq -r .first_failure.seq "$T/e.json")"

sz=$(sqlite3 "$DB" "SELECT count(*) FROM records")
tamper trunc "DELETE FROM records WHERE seq >= 100;
    DELETE FROM merkle_nodes WHERE ((idx + 1) << level) > 100;
    DELETE FROM checkpoints WHERE size > 100;"
"$SLUICE" audit verify --db "$T/trunc.db" --key "$VK" >/dev/null; rc=$?
check_eq "truncated log without external checkpoint: only warnings" 3 "$rc"
"$SLUICE" audit checkpoint --db "$DB" --out "$T/ext2.ckpt"
"$SLUICE" audit verify --db "$T/trunc.db" --key "$VK" --checkpoint "$T/ext2.ckpt" \
    --json >"$T/t.json"; rc=$?
check_eq "truncated log with external checkpoint: exits 1" 1 "$rc"
check_eq "TRUNCATION reported" TRUNCATION "$(jq -r .first_failure.check "$T/t.json")"
check_eq "missing record count" $((sz - 100)) "$(jq -r .missing "$T/t.json")"

tamper del "DELETE FROM records WHERE seq = 42"
"$SLUICE" audit verify --db "$T/del.db" --key "$VK" >"$T/d.txt"; rc=$?
check_eq "deleted row: exits 1" 1 "$rc"
check_match "deleted row reported as a gap at 42" "contiguity at seq 42.*gap" \
    "$(cat "$T/d.txt")"

# usage and I/O errors
"$SLUICE" audit verify --bogus >/dev/null 2>&1; rc=$?
check_eq "unknown option is a usage error" 2 "$rc"
"$SLUICE" audit >/dev/null 2>&1; rc=$?
check_eq "no subcommand is a usage error" 2 "$rc"
"$SLUICE" audit verify --db "$T/none.db" >/dev/null 2>&1; rc=$?
check_eq "missing database is an I/O error" 2 "$rc"
check_fails "verify did not create the missing database" test -e "$T/none.db"
"$SLUICE" audit verify --db "$DB" --key "not-a-key" >/dev/null 2>&1; rc=$?
check_eq "malformed --key is an error" 2 "$rc"
head -c 3000 /dev/urandom >"$T/junk.db"
"$SLUICE" audit verify --db "$T/junk.db" >/dev/null 2>&1; rc=$?
check_eq "random bytes as database: error, no crash" 2 "$rc"

# A database file that shrinks while verify has it mapped raises SIGBUS;
# verify must end with its error result, not die of the signal. Sent here
# while verify waits deterministically: its --checkpoint is a FIFO nobody
# writes yet (the handler is in place before the options are read).
mkfifo "$T/ckpt.fifo"
for fmt in --json ""; do
	# shellcheck disable=SC2086 # $fmt is one word or none
	"$SLUICE" audit verify $fmt --db "$DB" --checkpoint "$T/ckpt.fifo" \
	    >"$T/bus.out" 2>&1 &
	bp=$!
	for ((i = 0; i < 100; i++)); do
		grep -Eq 'fifo|wait_for_partner' "/proc/$bp/wchan" 2>/dev/null && break
		sleep 0.05
	done
	kill -BUS "$bp"
	wait "$bp"; rc=$?
	check_eq "SIGBUS during verify${fmt:+ ($fmt)}: exits 2 (error), not killed" 2 "$rc"
	if [ -n "$fmt" ]; then
		check_eq "SIGBUS during verify: JSON result error" error \
		    "$(jq -r .result "$T/bus.out" 2>/dev/null)"
	else
		check_match "SIGBUS during verify: says the file shrank" \
		    "result: +error.*shrank while it was being read" "$(tr '\n' ' ' <"$T/bus.out")"
	fi
done

[ "$E2E_FAILS" -eq 0 ]
