/*
 * cli_audit: `sluice audit ...`, the reviewer's side of the audit log. Every
 * subcommand works offline on the database file (read-only, safe beside a
 * running sluiced) or on files a reviewer was handed (keys, checkpoints,
 * proofs), so an auditor never needs the daemon or its socket. The checks
 * themselves live in audit/; this file parses arguments and prints.
 *
 *   audit verify [--db F] [--key PUB]... [--checkpoint F]...
 *                [--witness CONNINFO [--host NAME]] [--json]
 *   audit keygen --origin O --out FILE
 *   audit proof [--db F] --seq N [--out FILE]
 *   audit check-proof --key PUB FILE
 *   audit checkpoint [--db F] [--out FILE]
 *   audit tail [-f] [--db F] [--format json|ocsf] [--sandbox ID] [--kind K] [-n N]
 *
 * Exit status of verify: 0 verified, 1 tampered, 2 usage or I/O error,
 * 3 verified with warnings; of the others: 0 success, 1 failure, 2 usage.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "audit/audit.h"
#include "gateway/fleet/fleet.h"
#include "gateway/cli/cli.h"
#include "policy/policy.h"

#define MAXLIST		64
/* Witnessed checkpoints a verify takes: the newest, far more than a
 * year of one a minute would need to catch a cut tail or a fork. */
#define MAXWITNESS	100000
#define WITNESS_DEADLINE_MS	10000
#define MAXFILE		(8 * 1024 * 1024)

static int
usage(void)
{
	return cli_usage("audit");
}

static const char *
default_db(void)
{
	const char *e = getenv("SLUICE_AUDIT_DB");

	return e != NULL && *e != '\0' ? e : CLI_DEFAULT_AUDIT_DB;
}

/* Reads a whole (small) file into a NUL-terminated buffer. */
static char *
slurp(const char *path, size_t *lenp)
{
	FILE *f;
	char *buf;
	size_t n = 0, cap = 4096, r;

	if ((f = fopen(path, "r")) == NULL)
		return NULL;
	if ((buf = malloc(cap + 1)) == NULL) {
		fclose(f);
		return NULL;
	}
	while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
		n += r;
		if (n == cap) {
			char *nb;

			if (cap >= MAXFILE || (nb = realloc(buf, cap * 2 + 1)) ==
			    NULL) {
				free(buf);
				fclose(f);
				errno = EFBIG;
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	buf[n] = '\0';
	if (lenp != NULL)
		*lenp = n;
	return buf;
}

/* A vkey given inline, or the first line of a file holding one. */
static char *
vkey_arg(const char *arg)
{
	char *s, *nl;

	if (strchr(arg, '+') != NULL && access(arg, F_OK) == -1)
		return strdup(arg);
	if ((s = slurp(arg, NULL)) == NULL)
		return NULL;
	if ((nl = strchr(s, '\n')) != NULL)
		*nl = '\0';
	return s;
}

static int
write_out(const char *path, const char *text, int mode)
{
	FILE *f;
	int fd;

	if (path == NULL || strcmp(path, "-") == 0) {
		fputs(text, stdout);
		return fflush(stdout) == 0 ? 0 : -1;
	}
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) ==
	    -1)
		return -1;
	if ((f = fdopen(fd, "w")) == NULL) {
		close(fd);
		return -1;
	}
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

static void
print_human(json_t *rep)
{
	json_t *ff = json_object_get(rep, "first_failure"), *x;
	size_t i;

	printf("result:    %s\n", json_string_value(json_object_get(rep,
	    "result")));
	printf("assurance: %s\n", json_string_value(json_object_get(rep,
	    "assurance")));
	if (json_is_string(json_object_get(rep, "origin")))
		printf("origin:    %s\n", json_string_value(json_object_get(rep,
		    "origin")));
	printf("size:      %lld\n", (long long)json_integer_value(
	    json_object_get(rep, "size")));
	if (json_is_string(json_object_get(rep, "root")))
		printf("root:      %s\n", json_string_value(json_object_get(rep,
		    "root")));
	if (json_is_integer(json_object_get(rep, "unsealed_tail")))
		printf("unsealed:  %lld\n", (long long)json_integer_value(
		    json_object_get(rep, "unsealed_tail")));
	if (json_is_string(json_object_get(rep, "error")))
		printf("error:     %s\n", json_string_value(json_object_get(rep,
		    "error")));
	if (json_is_object(ff)) {
		x = json_object_get(ff, "seq");
		printf("FAILED:    %s", json_string_value(json_object_get(ff,
		    "check")));
		if (json_is_integer(x))
			printf(" at seq %lld", (long long)json_integer_value(x));
		printf(": %s\n", json_string_value(json_object_get(ff,
		    "detail")));
	}
	x = json_object_get(rep, "warnings");
	for (i = 0; i < json_array_size(x); i++)
		printf("warning:   %s\n", json_string_value(json_array_get(x,
		    i)));
	x = json_object_get(rep, "claims");
	printf("claims:\n");
	for (i = 0; i < json_array_size(x); i++)
		printf("  - %s\n", json_string_value(json_array_get(x, i)));
}

/*
 * Verification maps the database file (SQLite's mmap and the read-ahead of
 * audit/verify.c), and a mapped file that shrinks under the reader raises
 * SIGBUS instead of failing a read. A log truncated or rewritten during
 * verification must end as an error the reviewer can read, never as a
 * crash that a script could mistake for anything else: the handler prints
 * the result (in the chosen format) and exits with the I/O error status.
 * Only async-signal-safe calls; nothing else has been printed yet.
 */
static volatile sig_atomic_t verify_json;

static void
verify_sigbus(int sig)
{
	static const char js[] = "{\"assurance\":\"none\",\"error\":"
	    "\"the database file shrank while it was being read (SIGBUS): "
	    "it was truncated or rewritten during verification\","
	    "\"result\":\"error\"}\n";
	static const char hu[] = "result:    error\nassurance: none\n"
	    "error:     the database file shrank while it was being read "
	    "(SIGBUS): it was truncated or rewritten during verification\n";
	ssize_t w;

	(void)sig;
	if (verify_json)
		w = write(STDOUT_FILENO, js, sizeof(js) - 1);
	else
		w = write(STDOUT_FILENO, hu, sizeof(hu) - 1);
	(void)w;
	_exit(AUD_ERROR);
}

/*
 * The checkpoints the fleet's witness holds for host, after the nck given
 * with --checkpoint in *all (grown; the caller frees what it returns). The
 * password is the daemon's: SLUICE_PG_PASSWORD, else libpq's own sources.
 * 0, or -1 with a message on stderr.
 */
static int
witness_ckpts(const char *conninfo, const char *host, const char ***all,
    size_t *nall, char ***notes, size_t *nnotes)
{
	const char **grown;
	char err[400], hn[POL_FLEET_HOST_MAX + 1];
	PGconn *c;
	size_t i;

	if (host == NULL) {
		if (gethostname(hn, sizeof(hn)) == -1) {
			fprintf(stderr, "sluice audit: --witness: no host name "
			    "(give --host)\n");
			return -1;
		}
		host = hn;
	}
	if ((c = fleet_pg_connect_env(conninfo, WITNESS_DEADLINE_MS, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "sluice audit: --witness: %s\n", err);
		return -1;
	}
	*notes = fleet_witness_load(c, host, MAXWITNESS, WITNESS_DEADLINE_MS,
	    nnotes, err, sizeof(err));
	PQfinish(c);
	if (*notes == NULL) {
		fprintf(stderr, "sluice audit: --witness: %s\n", err);
		return -1;
	}
	if (*nnotes == 0)
		fprintf(stderr, "sluice audit: --witness holds no checkpoint "
		    "of host %s\n", host);
	if ((grown = calloc(*nall + *nnotes + 1, sizeof(*grown))) == NULL) {
		fprintf(stderr, "sluice audit: --witness: %s\n",
		    strerror(errno));
		return -1;
	}
	for (i = 0; i < *nall; i++)
		grown[i] = (*all)[i];
	for (i = 0; i < *nnotes; i++)
		grown[*nall + i] = (*notes)[i];
	*all = grown;
	*nall += *nnotes;
	return 0;
}

static int
cmd_verify(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "key", required_argument, NULL, 'k' },
		{ "checkpoint", required_argument, NULL, 'c' },
		{ "witness", required_argument, NULL, 'w' },
		{ "host", required_argument, NULL, 'H' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	struct aud_verify_opts o = { 0 };
	const char *witness = NULL, *host = NULL, **merged = NULL;
	char **wnotes = NULL;
	size_t nwnotes = 0;
	struct sigaction sa;
	const char *keys[MAXLIST], *ckpts[MAXLIST];
	char *owned[2 * MAXLIST];
	size_t nown = 0, i;
	json_t *rep;
	int ch, json = 0, rc = 2;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = verify_sigbus;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	o.db_path = default_db();
	o.vkeys = keys;
	o.ext_ckpts = ckpts;
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			o.db_path = optarg;
			break;
		case 'k':
			if (o.nvkeys == MAXLIST)
				goto out;
			if ((owned[nown] = vkey_arg(optarg)) == NULL) {
				fprintf(stderr, "sluice audit: --key %s: %s\n",
				    optarg, strerror(errno));
				goto out;
			}
			keys[o.nvkeys++] = owned[nown++];
			break;
		case 'c':
			if (o.next_ckpts == MAXLIST)
				goto out;
			if ((owned[nown] = slurp(optarg, NULL)) == NULL) {
				fprintf(stderr, "sluice audit: --checkpoint %s: "
				    "%s\n", optarg, strerror(errno));
				goto out;
			}
			ckpts[o.next_ckpts++] = owned[nown++];
			break;
		case 'w':
			witness = optarg;
			break;
		case 'H':
			host = optarg;
			break;
		case 'j':
			json = 1;
			verify_json = 1;
			break;
		default:
			rc = usage();
			goto out;
		}
	}
	if (optind != argc || (host != NULL && witness == NULL)) {
		rc = usage();
		goto out;
	}
	if (witness != NULL) {
		if (witness_ckpts(witness, host, &o.ext_ckpts, &o.next_ckpts,
		    &wnotes, &nwnotes) == -1)
			goto out;
		merged = o.ext_ckpts;
	}
	rc = aud_verify(&o, &rep);
	if (json) {
		char *s = json_dumps(rep, JSON_COMPACT | JSON_SORT_KEYS);

		if (s != NULL)
			puts(s);
		free(s);
	} else
		print_human(rep);
	json_decref(rep);
out:
	for (i = 0; i < nown; i++)
		free(owned[i]);
	free(merged);
	fleet_notes_free(wnotes, nwnotes);
	return rc;
}

static int
cmd_keygen(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "origin", required_argument, NULL, 'o' },
		{ "out", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *origin = NULL, *out = NULL;
	struct aud_key *k;
	char err[256], vk[512];
	int ch;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'o':
			origin = optarg;
			break;
		case 'f':
			out = optarg;
			break;
		default:
			return usage();
		}
	}
	if (origin == NULL || optind != argc)
		return usage();
	/* A signing key lands only where it was asked to go: no default
	 * file in the current directory, and not stdout, where a terminal's
	 * scrollback or a CI log would keep it. */
	if (out == NULL || *out == '\0' || strcmp(out, "-") == 0) {
		fprintf(stderr, "sluice audit keygen: --out FILE is required "
		    "(a new file; the private key is written nowhere else)\n");
		return usage();
	}
	if ((k = aud_key_new(origin, err, sizeof(err))) == NULL) {
		fprintf(stderr, "sluice audit keygen: %s\n", err);
		return 2;
	}
	/* aud_key_save creates out with O_EXCL, mode 0600: an existing file
	 * (or a link planted in its place) is refused, never replaced. */
	if (aud_key_vkey(k, vk, sizeof(vk)) == -1) {
		fprintf(stderr, "sluice audit keygen: cannot encode the "
		    "verifier key\n");
		aud_key_free(k);
		return 1;
	}
	if (aud_key_save(k, out, err, sizeof(err)) == -1) {
		fprintf(stderr, "sluice audit keygen: %s%s\n", err,
		    errno == EEXIST ? " (refusing to overwrite a key)" : "");
		aud_key_free(k);
		return 1;
	}
	aud_key_free(k);
	printf("%s\n", vk);
	return 0;
}

static int
parse_seq(const char *s, uint64_t *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return (*end != '\0' || errno != 0) ? -1 : 0;
}

static int
cmd_proof(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "seq", required_argument, NULL, 's' },
		{ "out", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *db = default_db(), *out = NULL;
	uint64_t seq = 0;
	int ch, have = 0, rc;
	char err[256], *p;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			db = optarg;
			break;
		case 's':
			if (parse_seq(optarg, &seq) == -1)
				return usage();
			have = 1;
			break;
		case 'f':
			out = optarg;
			break;
		default:
			return usage();
		}
	}
	if (!have || optind != argc)
		return usage();
	if ((p = aud_proof(db, seq, err, sizeof(err))) == NULL) {
		fprintf(stderr, "sluice audit proof: %s\n", err);
		return 1;
	}
	rc = write_out(out, p, 0644) == 0 ? 0 : 1;
	if (rc != 0)
		fprintf(stderr, "sluice audit proof: %s: %s\n", out,
		    strerror(errno));
	free(p);
	return rc;
}

static int
cmd_check_proof(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "key", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	struct aud_key *k;
	char *vk = NULL, *p, err[256], *s;
	size_t len;
	json_t *rec;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'k':
			free(vk);
			if ((vk = vkey_arg(optarg)) == NULL) {
				fprintf(stderr, "sluice audit: --key %s: %s\n",
				    optarg, strerror(errno));
				return 2;
			}
			break;
		default:
			free(vk);
			return usage();
		}
	}
	if (vk == NULL || optind != argc - 1) {
		free(vk);
		return usage();
	}
	k = aud_key_from_vkey(vk, err, sizeof(err));
	free(vk);
	if (k == NULL) {
		fprintf(stderr, "sluice audit check-proof: %s\n", err);
		return 2;
	}
	if ((p = slurp(argv[optind], &len)) == NULL) {
		fprintf(stderr, "sluice audit check-proof: %s: %s\n",
		    argv[optind], strerror(errno));
		aud_key_free(k);
		return 2;
	}
	rc = aud_check_proof(p, len, k, &rec, err, sizeof(err));
	if (rc == 0) {
		s = aud_canon_dump(rec, NULL, NULL, 0);
		printf("ok: record %lld is in the log signed by %s\n%s\n",
		    (long long)json_integer_value(json_object_get(rec, "seq")),
		    aud_key_name(k), s ? s : "");
		free(s);
		json_decref(rec);
	} else
		fprintf(stderr, "sluice audit check-proof: FAILED: %s\n", err);
	free(p);
	aud_key_free(k);
	return rc == 0 ? 0 : 1;
}

static int
cmd_checkpoint(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "out", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *db = default_db(), *out = NULL;
	char err[256], *note;
	int ch, rc;

	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			db = optarg;
			break;
		case 'f':
			out = optarg;
			break;
		default:
			return usage();
		}
	}
	if (optind != argc)
		return usage();
	if ((note = aud_latest_checkpoint(db, err, sizeof(err))) == NULL) {
		fprintf(stderr, "sluice audit checkpoint: %s\n", err);
		return 1;
	}
	rc = write_out(out, note, 0644) == 0 ? 0 : 1;
	free(note);
	return rc;
}

/* ---- tail ---- */

static volatile sig_atomic_t stop_tail;

static void
on_signal(int sig)
{
	(void)sig;
	stop_tail = 1;
}

struct tailopts {
	const char	*sandbox, *kind;
	int		 ocsf;
};

/* Formats one record if it passes the filters; NULL otherwise. */
static char *
format_rec(const struct tailopts *t, const void *canon, int len)
{
	json_t *r, *ev;
	const char *k;
	char *s = NULL;

	if (len <= 0 || (r = aud_canon_parse(canon, (size_t)len, NULL, 0)) ==
	    NULL)
		return NULL;
	k = json_string_value(json_object_get(r, "kind"));
	if (t->kind != NULL && (k == NULL || strcmp(k, t->kind) != 0))
		goto out;
	if (t->ocsf) {
		if ((ev = aud_ocsf(canon, (size_t)len, NULL, 0)) != NULL) {
			s = json_dumps(ev, JSON_COMPACT | JSON_SORT_KEYS);
			json_decref(ev);
		}
	} else if ((s = malloc((size_t)len + 1)) != NULL) {
		memcpy(s, canon, (size_t)len);
		s[len] = '\0';
	}
out:
	json_decref(r);
	return s;
}

static int
cmd_tail(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "db", required_argument, NULL, 'd' },
		{ "format", required_argument, NULL, 'F' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "kind", required_argument, NULL, 'k' },
		{ "follow", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct tailopts t = { 0 };
	const char *db = default_db();
	uint64_t n = 0, next = 0, i;
	char **ring = NULL, *s;
	size_t head = 0, cnt = 0;
	int ch, follow = 0, rc = 0, have_n = 0;
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	struct timespec pause = { 0, 200 * 1000 * 1000 };

	while ((ch = getopt_long(argc, argv, "fn:", lo, NULL)) != -1) {
		switch (ch) {
		case 'd':
			db = optarg;
			break;
		case 'F':
			if (strcmp(optarg, "ocsf") == 0)
				t.ocsf = 1;
			else if (strcmp(optarg, "json") != 0)
				return usage();
			break;
		case 's':
			t.sandbox = optarg;
			break;
		case 'k':
			if (!aud_kind_valid(optarg)) {
				fprintf(stderr, "sluice audit tail: unknown kind "
				    "%s\n", optarg);
				return 2;
			}
			t.kind = optarg;
			break;
		case 'f':
			follow = 1;
			break;
		case 'n':
			if (parse_seq(optarg, &n) == -1 || n > 1000000)
				return usage();
			have_n = 1;
			break;
		default:
			return usage();
		}
	}
	if (optind != argc)
		return usage();
	if (access(db, R_OK) == -1 || sqlite3_open_v2(db, &h,
	    SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		fprintf(stderr, "sluice audit tail: %s: %s\n", db,
		    h ? sqlite3_errmsg(h) : strerror(errno));
		sqlite3_close(h);
		return 2;
	}
	sqlite3_busy_timeout(h, 5000);
	if (sqlite3_prepare_v2(h, "SELECT seq, canon FROM records WHERE seq >= ?"
	    " AND (?2 IS NULL OR sandbox = ?2) ORDER BY seq", -1, &st, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "sluice audit tail: %s: %s\n", db,
		    sqlite3_errmsg(h));
		sqlite3_close(h);
		return 2;
	}
	if (have_n && n > 0 && (ring = calloc(n, sizeof(*ring))) == NULL) {
		rc = 1;
		goto done;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (;;) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, (sqlite3_int64)next);
		if (t.sandbox != NULL)
			sqlite3_bind_text(st, 2, t.sandbox, -1, SQLITE_STATIC);
		while (!stop_tail && sqlite3_step(st) == SQLITE_ROW) {
			next = (uint64_t)sqlite3_column_int64(st, 0) + 1;
			s = format_rec(&t, sqlite3_column_blob(st, 1),
			    sqlite3_column_bytes(st, 1));
			if (s == NULL)
				continue;
			if (have_n) {
				/* -n: keep the last N of the first pass. */
				if (n == 0) {
					free(s);
					continue;
				}
				free(ring[head]);
				ring[head] = s;
				head = (head + 1) % n;
				if (cnt < n)
					cnt++;
				continue;
			}
			puts(s);
			free(s);
		}
		if (have_n) {
			for (i = 0; i < cnt; i++) {
				size_t j = (head + n - cnt + i) % n;

				puts(ring[j]);
				free(ring[j]);
				ring[j] = NULL;
			}
			have_n = 0;
			cnt = 0;
		}
		fflush(stdout);
		if (!follow || stop_tail)
			break;
		nanosleep(&pause, NULL);
	}
done:
	free(ring);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return rc;
}

int
cli_audit(int argc, char **argv)
{
	const char *sub;

	if (argc < 2)
		return usage();
	sub = argv[1];
	/* Subcommands parse their own options from argv[1]. */
	argc--;
	argv++;
	optind = 0;	/* 0, not 1: also resets getopt's "+" mode left from sluice.c */
	if (strcmp(sub, "verify") == 0)
		return cmd_verify(argc, argv);
	if (strcmp(sub, "keygen") == 0)
		return cmd_keygen(argc, argv);
	if (strcmp(sub, "proof") == 0)
		return cmd_proof(argc, argv);
	if (strcmp(sub, "check-proof") == 0)
		return cmd_check_proof(argc, argv);
	if (strcmp(sub, "checkpoint") == 0)
		return cmd_checkpoint(argc, argv);
	if (strcmp(sub, "tail") == 0)
		return cmd_tail(argc, argv);
	return usage();
}
