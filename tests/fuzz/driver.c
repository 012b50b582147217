/*
 * driver.c: a standalone, deterministic stand-in for libFuzzer, so that every
 * fuzz target (tests/fuzz/fuzz_<name>.c, one LLVMFuzzerTestOneInput each)
 * runs under gcc with ASan+UBSan as part of `make test`.
 *
 * libFuzzer explores by coverage and by the clock; a test must not. This
 * driver replays the seed corpus, then applies a fixed number of mutations
 * drawn from a seeded PRNG (bit flips, byte inserts and deletes, interesting
 * values, chunk copies, splices with other seeds, dictionary tokens), so a
 * run is the same on every machine and a failure reproduces from its seed.
 * It finds shallow bugs and keeps the invariants the targets assert honest;
 * deep exploration is the libFuzzer build's job (tests/fuzz/README.md).
 *
 *   fuzz_<name> [FILE|DIR]...
 *
 * With no argument the corpus is tests/fuzz/corpus/<name>/ (relative to the
 * current directory) and the dictionary tests/fuzz/<name>.dict if present.
 * Only FILE arguments: replay them and stop (reproducing a crash).
 * Environment: FUZZ_ITERS (mutations, default 20000), FUZZ_SEED (default 1),
 * FUZZ_MAXLEN (default 4096), FUZZ_DICT (a dictionary file),
 * FUZZ_ARTIFACTS (where a crashing input is written, default ".").
 *
 * Output: a summary line and a Check-style "100%: Checks: 2, Failures: 0,
 * Errors: 0" (corpus replay and mutation run) that tests/run.sh counts. A
 * crash or a failed invariant aborts under the sanitizers, which prints no
 * summary: run.sh reports that as a failure. The input that did it is saved
 * first, as crash-<name>, and printed in hex.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int	LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
void	__sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

#define FILE_MAX	(1 << 20)	/* seeds larger than this are refused */

struct buf {
	uint8_t		*p;
	size_t		 n;
};

struct bufs {
	struct buf	*v;
	size_t		 n, cap;
};

/* What is running now, so a dying process can save it. */
static const uint8_t	*cur_data;
static size_t		 cur_size;
static char		 crash_path[4096];

static void
dump_current(void)
{
	static const char hex[] = "0123456789abcdef";
	char	 line[3];
	size_t	 i;
	int	 fd;

	if (cur_data == NULL)
		return;
	fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd != -1) {
		if (write(fd, cur_data, cur_size) != (ssize_t)cur_size)
			(void)!write(2, "fuzz: short write\n", 18);
		close(fd);
	}
	(void)!write(2, "fuzz: crashing input (", 22);
	(void)!write(2, crash_path, strlen(crash_path));
	(void)!write(2, "), hex:\n", 8);
	for (i = 0; i < cur_size && i < 4096; i++) {
		line[0] = hex[cur_data[i] >> 4];
		line[1] = hex[cur_data[i] & 15];
		(void)!write(2, line, 2);
	}
	(void)!write(2, "\n", 1);
	cur_data = NULL;
}

static void
on_signal(int sig)
{
	dump_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Runs one input from an exactly-sized heap copy, so that ASan sees any
 * read past size; a zero-length input is a distinct 1-byte allocation. */
static void
run_one(const uint8_t *data, size_t size)
{
	uint8_t	*copy = malloc(size > 0 ? size : 1);

	if (copy == NULL) {
		fprintf(stderr, "fuzz: out of memory\n");
		exit(2);
	}
	memcpy(copy, data, size);
	cur_data = copy;
	cur_size = size;
	LLVMFuzzerTestOneInput(copy, size);
	cur_data = NULL;
	free(copy);
}

static void
bufs_add(struct bufs *b, uint8_t *p, size_t n)
{
	struct buf	*v;

	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 16;
		v = realloc(b->v, b->cap * sizeof(*v));
		if (v == NULL) {
			fprintf(stderr, "fuzz: out of memory\n");
			exit(2);
		}
		b->v = v;
	}
	b->v[b->n].p = p;
	b->v[b->n].n = n;
	b->n++;
}

static void
bufs_free(struct bufs *b)
{
	size_t	 i;

	for (i = 0; i < b->n; i++)
		free(b->v[i].p);
	free(b->v);
}

static int
read_file(const char *path, struct bufs *out)
{
	uint8_t	*p;
	FILE	*f;
	size_t	 n;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "fuzz: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if ((p = malloc(FILE_MAX + 1)) == NULL) {
		fclose(f);
		return -1;
	}
	n = fread(p, 1, FILE_MAX + 1, f);
	if (ferror(f) || n > FILE_MAX) {
		fprintf(stderr, "fuzz: %s: unreadable or over %d bytes\n",
		    path, FILE_MAX);
		fclose(f);
		free(p);
		return -1;
	}
	fclose(f);
	bufs_add(out, p, n);
	return 0;
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular, non-hidden file of dir, in name order (determinism). */
static int
read_dir(const char *dir, struct bufs *out)
{
	struct dirent	 *de;
	struct stat	  st;
	char		**names = NULL, **nn, path[4096];
	size_t		  n = 0, i, len;
	int		  rc = 0;
	DIR		 *d;

	if ((d = opendir(dir)) == NULL) {
		fprintf(stderr, "fuzz: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		len = strlen(de->d_name) + 1;
		if ((nn = realloc(names, (n + 1) * sizeof(*names))) == NULL) {
			rc = -1;
			break;
		}
		names = nn;
		if ((names[n] = malloc(len)) == NULL) {
			rc = -1;
			break;
		}
		memcpy(names[n++], de->d_name, len);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
		    read_file(path, out) == -1)
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

/*
 * A libFuzzer/AFL dictionary: one token per line as "..." (optionally
 * name="..."), with \\, \" and \xNN escapes; # starts a comment.
 */
static int
read_dict(const char *path, struct bufs *out)
{
	char	 line[1024], *q, *e;
	uint8_t	*tok;
	size_t	 n;
	FILE	*f;
	int	 lineno = 0;

	if ((f = fopen(path, "r")) == NULL)
		return errno == ENOENT ? 0 : -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		q = strchr(line, '"');
		e = strrchr(line, '"');
		if (line[strspn(line, " \t")] == '#' || q == NULL)
			continue;
		if (e == q || (tok = malloc((size_t)(e - q))) == NULL) {
			fprintf(stderr, "fuzz: %s:%d: bad token\n", path,
			    lineno);
			fclose(f);
			return -1;
		}
		for (n = 0, q++; q < e; q++) {
			if (*q == '\\' && q + 1 < e && q[1] == 'x' && q + 3 < e) {
				char hx[3] = { q[2], q[3], 0 };
				tok[n++] = (uint8_t)strtoul(hx, NULL, 16);
				q += 3;
			} else if (*q == '\\' && q + 1 < e) {
				tok[n++] = (uint8_t)*++q;
			} else
				tok[n++] = (uint8_t)*q;
		}
		bufs_add(out, tok, n);
	}
	fclose(f);
	return 0;
}

/* xorshift64*: small, fast, and the same everywhere. */
static uint64_t rng_state;

static uint64_t
rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static size_t
below(size_t n)
{
	return n == 0 ? 0 : (size_t)(rng() % n);
}

static void
insert(uint8_t *b, size_t *n, size_t max, size_t at, const uint8_t *src,
    size_t len)
{
	if (*n + len > max)
		len = max - *n;
	memmove(b + at + len, b + at, *n - at);
	memcpy(b + at, src, len);
	*n += len;
}

/* One mutation of b (length *n, capacity max), in place. */
static void
mutate_once(uint8_t *b, size_t *n, size_t max, const struct bufs *corpus,
    const struct bufs *dict)
{
	static const uint8_t	 interesting[] = {
		0x00, 0x01, 0x7f, 0x80, 0xff, '\n', '\t', ' ', '.', ':', '/',
		'%', '[', ']', '-', '+', 'x', '0', '1', '9', 'f', '"', '\\',
	};
	static const uint32_t	 values[] = {
		0, 1, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff,
		0x10000, 0x7fffffff, 0x80000000u, 0xffffffffu,
	};
	const struct buf	*o;
	uint8_t			 tmp[4];
	uint32_t		 v;
	size_t			 at, len;

	switch (below(11)) {
	case 0:		/* flip a bit */
		if (*n > 0)
			b[below(*n)] ^= (uint8_t)(1u << below(8));
		break;
	case 1:		/* any byte */
		if (*n > 0)
			b[below(*n)] = (uint8_t)rng();
		break;
	case 2:		/* insert a byte */
		if (*n < max) {
			tmp[0] = (uint8_t)rng();
			insert(b, n, max, below(*n + 1), tmp, 1);
		}
		break;
	case 3:		/* delete a run */
		if (*n > 0) {
			at = below(*n);
			len = 1 + below(*n - at < 8 ? *n - at : 8);
			memmove(b + at, b + at + len, *n - at - len);
			*n -= len;
		}
		break;
	case 4:		/* insert or set a byte that parsers care about */
		tmp[0] = interesting[below(sizeof(interesting))];
		if (*n > 0 && (rng() & 1))
			b[below(*n)] = tmp[0];
		else if (*n < max)
			insert(b, n, max, below(*n + 1), tmp, 1);
		break;
	case 5:		/* an interesting 8/16/32-bit value, either order */
		v = values[below(sizeof(values) / sizeof(values[0]))];
		len = (size_t)1 << below(3);
		if (*n >= len) {
			at = below(*n - len + 1);
			for (size_t i = 0; i < len; i++)
				b[at + i] = (uint8_t)(v >> (8 * ((rng() & 1) ?
				    i : len - 1 - i)));
		}
		break;
	case 6:		/* copy a chunk of itself elsewhere */
		if (*n > 0 && *n < max) {
			uint8_t	 chunk[64];

			at = below(*n);
			len = 1 + below(*n - at < sizeof(chunk) ? *n - at :
			    sizeof(chunk));
			memcpy(chunk, b + at, len);
			insert(b, n, max, below(*n + 1), chunk, len);
		}
		break;
	case 7:		/* splice: our head, another seed's tail */
		if (corpus->n > 0) {
			o = &corpus->v[below(corpus->n)];
			at = below(*n + 1);
			len = o->n > 0 ? below(o->n) : 0;
			*n = at;
			insert(b, n, max, at, o->p + len, o->n - len);
		}
		break;
	case 8:		/* a dictionary token */
		if (dict->n > 0) {
			o = &dict->v[below(dict->n)];
			at = below(*n + 1);
			if ((rng() & 1) && at + o->n <= *n)
				memcpy(b + at, o->p, o->n);
			else
				insert(b, n, max, at, o->p, o->n);
		}
		break;
	case 9:		/* truncate */
		*n = below(*n + 1);
		break;
	default:	/* nudge a byte, so digits walk across 9/0 and 255/256 */
		if (*n > 0) {
			at = below(*n);
			b[at] = (uint8_t)(b[at] + ((rng() & 1) ? 1 : -1));
		}
		break;
	}
}

static unsigned long
env_num(const char *name, unsigned long dflt)
{
	const char	*s = getenv(name);
	char		*end;
	unsigned long	 v;

	if (s == NULL || *s == '\0')
		return dflt;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *end != '\0') {
		fprintf(stderr, "fuzz: %s=%s is not a number\n", name, s);
		exit(2);
	}
	return v;
}

int
main(int argc, char **argv)
{
	struct bufs	 corpus = { 0 }, dict = { 0 };
	struct stat	 st;
	const char	*base, *name, *dictpath, *art;
	char		 path[4096];
	unsigned long	 iters, seed, maxlen, it;
	uint8_t		*b;
	size_t		 n, maxseen = 0, i;
	int		 only_files = argc > 1, ai;

	if (LLVMFuzzerInitialize != NULL)
		LLVMFuzzerInitialize(&argc, &argv);
	base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	name = strncmp(base, "fuzz_", 5) == 0 ? base + 5 : base;
	iters = env_num("FUZZ_ITERS", 20000);
	seed = env_num("FUZZ_SEED", 1);
	maxlen = env_num("FUZZ_MAXLEN", 4096);
	if (maxlen == 0 || maxlen > FILE_MAX) {
		fprintf(stderr, "fuzz: FUZZ_MAXLEN must be 1..%d\n", FILE_MAX);
		return 2;
	}
	art = getenv("FUZZ_ARTIFACTS") ? getenv("FUZZ_ARTIFACTS") : ".";
	snprintf(crash_path, sizeof(crash_path), "%s/crash-%s", art, name);
	if (__sanitizer_set_death_callback != NULL)
		__sanitizer_set_death_callback(dump_current);
	signal(SIGABRT, on_signal);
	signal(SIGSEGV, on_signal);
	signal(SIGBUS, on_signal);
	signal(SIGILL, on_signal);
	signal(SIGFPE, on_signal);

	if (argc > 1) {
		for (ai = 1; ai < argc; ai++) {
			if (stat(argv[ai], &st) == 0 && S_ISDIR(st.st_mode)) {
				only_files = 0;
				if (read_dir(argv[ai], &corpus) == -1)
					return 2;
			} else if (read_file(argv[ai], &corpus) == -1)
				return 2;
		}
	} else {
		snprintf(path, sizeof(path), "tests/fuzz/corpus/%s", name);
		if (read_dir(path, &corpus) == -1)
			return 2;
	}
	dictpath = getenv("FUZZ_DICT");
	if (dictpath == NULL) {
		snprintf(path, sizeof(path), "tests/fuzz/%s.dict", name);
		dictpath = path;
	}
	if (read_dict(dictpath, &dict) == -1) {
		fprintf(stderr, "fuzz: %s: unreadable dictionary\n", dictpath);
		return 2;
	}
	if (only_files && getenv("FUZZ_ITERS") == NULL)
		iters = 0;

	for (i = 0; i < corpus.n; i++) {
		run_one(corpus.v[i].p, corpus.v[i].n);
		if (corpus.v[i].n > maxseen)
			maxseen = corpus.v[i].n;
	}

	rng_state = 0x9E3779B97F4A7C15ULL ^ (seed * 0xBF58476D1CE4E5B9ULL);
	if (rng_state == 0)
		rng_state = 1;
	if ((b = malloc(maxlen)) == NULL)
		return 2;
	n = 0;
	for (it = 0; it < iters; it++) {
		int	 k, rounds;

		/*
		 * Mostly start again from a seed; sometimes keep walking
		 * from the last mutant, to get several edits deep.
		 */
		if (it == 0 || (rng() & 3) != 0) {
			n = 0;
			if (corpus.n > 0) {
				const struct buf *s = &corpus.v[below(corpus.n)];

				n = s->n < maxlen ? s->n : maxlen;
				memcpy(b, s->p, n);
			}
		}
		rounds = 1 + (int)below(4);
		for (k = 0; k < rounds; k++)
			mutate_once(b, &n, maxlen, &corpus, &dict);
		if (n > maxseen)
			maxseen = n;
		run_one(b, n);
	}
	free(b);

	printf("fuzz_%s: %zu corpus inputs, %lu mutations (seed %lu), "
	    "%zu dictionary tokens, largest input %zu bytes: no crash\n",
	    name, corpus.n, iters, seed, dict.n, maxseen);
	printf("100%%: Checks: %d, Failures: 0, Errors: 0\n", iters > 0 ? 2 : 1);
	bufs_free(&corpus);
	bufs_free(&dict);
	return 0;
}
