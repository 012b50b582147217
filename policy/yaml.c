/*
 * yaml: libyaml events to a small positioned tree, plus the scalar
 * converters every schema walker uses.
 *
 * Policy files come from users and sometimes from attackers, so the reader
 * is deliberately narrow: one document, no anchors or aliases (an alias
 * bomb is then impossible by construction), no tags, scalar keys only, no
 * duplicate keys, bounded size, depth and node count, UTF-8 only. Every
 * refusal carries libyaml's position so the user sees FILE:LINE:COL.
 */
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <yaml.h>

#include "policy/internal.h"

#define MAX_MAP_KEYS	4096

struct yparse {
	yaml_parser_t	 p;
	const char	*file;
	struct pol_errors *errs;
	size_t		 nodes;
	bool		 failed;
};

void
ynode_free(struct ynode *n)
{
	size_t	i;

	if (n == NULL)
		return;
	for (i = 0; i < n->n; i++) {
		if (n->keys)
			ynode_free(n->keys[i]);
		if (n->vals)
			ynode_free(n->vals[i]);
	}
	free(n->keys);
	free(n->vals);
	free(n->str);
	free(n);
}

static void
perr(struct yparse *yp, const yaml_mark_t *m, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
perr(struct yparse *yp, const yaml_mark_t *m, const char *fmt, ...)
{
	char	buf[256];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pol_errors_add(yp->errs, yp->file, m ? (unsigned)m->line + 1 : 0,
	    m ? (unsigned)m->column + 1 : 0, "%s", buf);
	yp->failed = true;
}

/* next: one event; a libyaml error becomes ours (and ends the parse). */
static int
next(struct yparse *yp, yaml_event_t *ev)
{
	if (!yaml_parser_parse(&yp->p, ev)) {
		perr(yp, &yp->p.problem_mark, "syntax error: %s%s%s",
		    yp->p.problem ? yp->p.problem : "invalid YAML",
		    yp->p.context ? " " : "",
		    yp->p.context ? yp->p.context : "");
		return -1;
	}
	return 0;
}

static struct ynode *
newnode(struct yparse *yp, enum ynode_kind k, const yaml_mark_t *m)
{
	struct ynode *n;

	if (++yp->nodes > POL_MAX_NODES) {
		perr(yp, m, "too many nodes (more than %d)", POL_MAX_NODES);
		return NULL;
	}
	if ((n = calloc(1, sizeof(*n))) == NULL) {
		perr(yp, m, "out of memory");
		return NULL;
	}
	n->kind = k;
	n->line = (unsigned)m->line + 1;
	n->col = (unsigned)m->column + 1;
	return n;
}

static int
push(struct ynode ***arr, size_t n, struct ynode *v)
{
	struct ynode **a;

	/* Grow in powers of two; n is the count before the push. */
	if ((n & (n - 1)) == 0) {
		a = reallocarray(*arr, n ? n * 2 : 1, sizeof(**arr));
		if (a == NULL)
			return -1;
		*arr = a;
	}
	(*arr)[n] = v;
	return 0;
}

static struct ynode *parse_node(struct yparse *, yaml_event_t *, int);

/* refused: the event properties we never accept. */
static bool
refused(struct yparse *yp, yaml_event_t *ev, unsigned char *anchor,
    unsigned char *tag, bool implicit)
{
	if (ev->type == YAML_ALIAS_EVENT) {
		perr(yp, &ev->start_mark, "aliases are not allowed");
		return true;
	}
	if (anchor != NULL) {
		perr(yp, &ev->start_mark, "anchors are not allowed");
		return true;
	}
	if (tag != NULL && !implicit) {
		perr(yp, &ev->start_mark, "tags are not allowed");
		return true;
	}
	return false;
}

static struct ynode *
parse_scalar(struct yparse *yp, yaml_event_t *ev)
{
	struct ynode	*n;

	if (refused(yp, ev, ev->data.scalar.anchor, ev->data.scalar.tag,
	    ev->data.scalar.plain_implicit || ev->data.scalar.quoted_implicit))
		return NULL;
	if (strlen((char *)ev->data.scalar.value) != ev->data.scalar.length) {
		perr(yp, &ev->start_mark, "NUL byte in string");
		return NULL;
	}
	if ((n = newnode(yp, Y_SCALAR, &ev->start_mark)) == NULL)
		return NULL;
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	if ((n->str = strdup((char *)ev->data.scalar.value)) == NULL) {
		perr(yp, &ev->start_mark, "out of memory");
		free(n);
		return NULL;
	}
	return n;
}

static struct ynode *
parse_seq(struct yparse *yp, yaml_event_t *start, int depth)
{
	struct ynode	*n, *kid;
	yaml_event_t	 ev;

	if ((n = newnode(yp, Y_SEQ, &start->start_mark)) == NULL)
		return NULL;
	for (;;) {
		if (next(yp, &ev) == -1)
			goto fail;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return n;
		}
		kid = parse_node(yp, &ev, depth + 1);
		yaml_event_delete(&ev);
		if (kid == NULL)
			goto fail;
		if (push(&n->vals, n->n, kid) == -1) {
			ynode_free(kid);
			goto fail;
		}
		n->n++;
	}
fail:
	ynode_free(n);
	return NULL;
}

static struct ynode *
parse_map(struct yparse *yp, yaml_event_t *start, int depth)
{
	struct ynode	*n, *k = NULL, *v;
	yaml_event_t	 ev;
	size_t		 i;

	if ((n = newnode(yp, Y_MAP, &start->start_mark)) == NULL)
		return NULL;
	for (;;) {
		if (next(yp, &ev) == -1)
			goto fail;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return n;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			if (ev.type == YAML_ALIAS_EVENT)
				perr(yp, &ev.start_mark,
				    "aliases are not allowed");
			else
				perr(yp, &ev.start_mark,
				    "keys must be plain strings");
			yaml_event_delete(&ev);
			goto fail;
		}
		k = parse_scalar(yp, &ev);
		yaml_event_delete(&ev);
		if (k == NULL)
			goto fail;
		for (i = 0; i < n->n; i++) {
			if (strcmp(n->keys[i]->str, k->str) == 0) {
				pol_errors_add(yp->errs, yp->file, k->line,
				    k->col, "duplicate key \"%s\"", k->str);
				yp->failed = true;
				goto fail;
			}
		}
		if (n->n >= MAX_MAP_KEYS) {
			pol_errors_add(yp->errs, yp->file, k->line, k->col,
			    "too many keys in one mapping (more than %d)",
			    MAX_MAP_KEYS);
			yp->failed = true;
			goto fail;
		}
		if (next(yp, &ev) == -1)
			goto fail;
		v = parse_node(yp, &ev, depth + 1);
		yaml_event_delete(&ev);
		if (v == NULL)
			goto fail;
		if (push(&n->keys, n->n, k) == -1) {
			ynode_free(v);
			goto fail;
		}
		k = NULL;
		if (push(&n->vals, n->n, v) == -1) {
			/* keys[n] holds a key no count covers: free it here. */
			ynode_free(n->keys[n->n]);
			ynode_free(v);
			goto fail;
		}
		n->n++;
	}
fail:
	ynode_free(k);
	ynode_free(n);
	return NULL;
}

static struct ynode *
parse_node(struct yparse *yp, yaml_event_t *ev, int depth)
{
	if (depth > POL_MAX_DEPTH) {
		perr(yp, &ev->start_mark, "nesting deeper than %d levels",
		    POL_MAX_DEPTH);
		return NULL;
	}
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return parse_scalar(yp, ev);
	case YAML_SEQUENCE_START_EVENT:
		if (refused(yp, ev, ev->data.sequence_start.anchor,
		    ev->data.sequence_start.tag,
		    ev->data.sequence_start.implicit))
			return NULL;
		return parse_seq(yp, ev, depth);
	case YAML_MAPPING_START_EVENT:
		if (refused(yp, ev, ev->data.mapping_start.anchor,
		    ev->data.mapping_start.tag,
		    ev->data.mapping_start.implicit))
			return NULL;
		return parse_map(yp, ev, depth);
	case YAML_ALIAS_EVENT:
		refused(yp, ev, NULL, NULL, true);
		return NULL;
	default:
		perr(yp, &ev->start_mark, "unexpected YAML event");
		return NULL;
	}
}

/* utf8_check: the position of the first invalid sequence, so the user can
 * find it; overlongs, surrogates and > U+10FFFF are invalid. */
static int
utf8_check(const unsigned char *s, size_t len, unsigned *line, unsigned *col)
{
	size_t		i = 0, k, need;
	uint32_t	cp, min;

	*line = 1;
	*col = 1;
	while (i < len) {
		unsigned char c = s[i];

		if (c < 0x80) {
			if (c == '\n') {
				(*line)++;
				*col = 0;
			}
			i++;
			(*col)++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			need = 1; cp = c & 0x1f; min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			need = 2; cp = c & 0x0f; min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			need = 3; cp = c & 0x07; min = 0x10000;
		} else
			return -1;
		if (len - i <= need)
			return -1;
		for (k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return -1;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return -1;
		i += need + 1;
		(*col)++;
	}
	return 0;
}

struct ynode *
yaml_load_buf(const char *name, const unsigned char *buf, size_t len,
    struct pol_errors *errs)
{
	struct yparse	 yp;
	yaml_event_t	 ev;
	struct ynode	*root = NULL;
	unsigned	 line, col;
	size_t		 nerr0;

	if (len > POL_MAX_FILE) {
		pol_errors_add(errs, name, 0, 0,
		    "file is larger than 1 MiB");
		return NULL;
	}
	if (utf8_check(buf, len, &line, &col) == -1) {
		pol_errors_add(errs, name, line, col, "invalid UTF-8");
		return NULL;
	}
	if (memchr(buf, '\0', len) != NULL) {
		pol_errors_add(errs, name, 0, 0, "NUL byte in file");
		return NULL;
	}
	nerr0 = pol_errors_count(errs);
	memset(&yp, 0, sizeof(yp));
	yp.file = name;
	yp.errs = errs;
	if (!yaml_parser_initialize(&yp.p)) {
		pol_errors_add(errs, name, 0, 0, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&yp.p, buf, len);
	yaml_parser_set_encoding(&yp.p, YAML_UTF8_ENCODING);

	if (next(&yp, &ev) == -1)
		goto out;
	yaml_event_delete(&ev);	/* stream start */
	if (next(&yp, &ev) == -1)
		goto out;
	if (ev.type == YAML_STREAM_END_EVENT) {
		pol_errors_add(errs, name, 1, 1, "empty file");
		yaml_event_delete(&ev);
		goto out;
	}
	yaml_event_delete(&ev);	/* document start */
	if (next(&yp, &ev) == -1)
		goto out;
	root = parse_node(&yp, &ev, 1);
	yaml_event_delete(&ev);
	if (root == NULL)
		goto out;
	if (next(&yp, &ev) == -1)
		goto fail;
	yaml_event_delete(&ev);	/* document end */
	if (next(&yp, &ev) == -1)
		goto fail;
	if (ev.type != YAML_STREAM_END_EVENT) {
		perr(&yp, &ev.start_mark, "only one YAML document allowed");
		yaml_event_delete(&ev);
		goto fail;
	}
	yaml_event_delete(&ev);
	goto out;
fail:
	ynode_free(root);
	root = NULL;
out:
	yaml_parser_delete(&yp.p);
	/* Every refusal above names its cause except a failed allocation
	 * (node, array, libyaml's own): say so rather than fail silently. */
	if (root == NULL && pol_errors_count(errs) == nerr0)
		pol_errors_add(errs, name, 0, 0, "out of memory");
	return root;
}

int
yaml_read_file(const char *path, unsigned char **out, size_t *outlen,
    struct pol_errors *errs)
{
	struct stat	 st;
	unsigned char	*buf = NULL;
	size_t		 len = 0;
	ssize_t		 r;
	int		 fd;

	*out = NULL;
	*outlen = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) == -1) {
		pol_errors_add(errs, path, 0, 0, "cannot open: %s",
		    strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		pol_errors_add(errs, path, 0, 0, "not a regular file");
		close(fd);
		return -1;
	}
	if (st.st_size > POL_MAX_FILE) {
		pol_errors_add(errs, path, 0, 0, "file is larger than 1 MiB");
		close(fd);
		return -1;
	}
	/* Read one byte more than allowed: the file may grow under us. */
	if ((buf = malloc(POL_MAX_FILE + 1)) == NULL) {
		pol_errors_add(errs, path, 0, 0, "out of memory");
		close(fd);
		return -1;
	}
	while (len < POL_MAX_FILE + 1) {
		r = read(fd, buf + len, POL_MAX_FILE + 1 - len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			pol_errors_add(errs, path, 0, 0, "read: %s",
			    strerror(errno));
			close(fd);
			free(buf);
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	*out = buf;
	*outlen = len;
	return 0;
}

void
yaml_digest(const unsigned char *buf, size_t len, char *digest)
{
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen = 0;
	size_t		 i;

	if (EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL) != 1)
		mdlen = 0;
	for (i = 0; i < mdlen && i < 32; i++)
		snprintf(digest + 2 * i, 3, "%02x", md[i]);
	digest[2 * i] = '\0';
}

struct ynode *
yaml_load_file(const char *path, struct pol_errors *errs, char *digest)
{
	unsigned char	*buf;
	size_t		 len;
	struct ynode	*root;

	if (yaml_read_file(path, &buf, &len, errs) == -1)
		return NULL;
	if (digest != NULL)
		yaml_digest(buf, len, digest);
	root = yaml_load_buf(path, buf, len, errs);
	free(buf);
	return root;
}

/* ------------------------------------------------------------ walkers */

void
yerr(struct ywalk *w, const struct ynode *n, const char *fmt, ...)
{
	char	buf[400];
	va_list	ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	pol_errors_add(w->errs, w->file, n ? n->line : 0, n ? n->col : 0,
	    "%s", buf);
	w->nerr++;
}

int
ynomem(struct ywalk *w, const struct ynode *n)
{
	yerr(w, n, "out of memory");
	return -1;
}

const char *
ykind_name(enum ynode_kind k)
{
	switch (k) {
	case Y_SCALAR:
		return "scalar";
	case Y_MAP:
		return "mapping";
	case Y_SEQ:
		return "list";
	}
	return "?";
}

bool
yis(struct ywalk *w, const struct ynode *n, enum ynode_kind k,
    const char *what)
{
	if (n->kind == k)
		return true;
	yerr(w, n, "%s must be a %s, not a %s", what, ykind_name(k),
	    ykind_name(n->kind));
	return false;
}

bool
ycheck_map(struct ywalk *w, const struct ynode *n, const char *where,
    const char *const *allowed)
{
	size_t	i, j;

	if (!yis(w, n, Y_MAP, where))
		return false;
	for (i = 0; i < n->n; i++) {
		for (j = 0; allowed[j] != NULL; j++)
			if (strcmp(allowed[j], n->keys[i]->str) == 0)
				break;
		if (allowed[j] == NULL)
			yerr(w, n->keys[i], "unknown key \"%s\" in %s",
			    n->keys[i]->str, where);
	}
	return true;
}

const struct ynode *
yget(const struct ynode *map, const char *key)
{
	size_t	i;

	if (map == NULL || map->kind != Y_MAP)
		return NULL;
	for (i = 0; i < map->n; i++)
		if (strcmp(map->keys[i]->str, key) == 0)
			return map->vals[i];
	return NULL;
}

static bool
is_null(const struct ynode *n)
{
	return n->kind == Y_SCALAR && n->plain && (n->str[0] == '\0' ||
	    strcmp(n->str, "~") == 0 || strcmp(n->str, "null") == 0 ||
	    strcmp(n->str, "Null") == 0 || strcmp(n->str, "NULL") == 0);
}

int
ystr(struct ywalk *w, const struct ynode *n, char **out)
{
	if (n->kind != Y_SCALAR || is_null(n)) {
		yerr(w, n, "expected a string, found %s",
		    n->kind == Y_SCALAR ? "null" : ykind_name(n->kind));
		return -1;
	}
	if ((*out = strdup(n->str)) == NULL) {
		yerr(w, n, "out of memory");
		return -1;
	}
	return 0;
}

int
ybool(struct ywalk *w, const struct ynode *n, bool *out)
{
	if (n->kind == Y_SCALAR && n->plain && strcmp(n->str, "true") == 0) {
		*out = true;
		return 0;
	}
	if (n->kind == Y_SCALAR && n->plain && strcmp(n->str, "false") == 0) {
		*out = false;
		return 0;
	}
	yerr(w, n, "expected true or false");
	return -1;
}

int
pol_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t	v = 0;

	if (*s == '\0')
		return -1;
	/* Leading zeros would read as octal to some readers: refuse. */
	if (s[0] == '0' && s[1] != '\0')
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

int
yuint(struct ywalk *w, const struct ynode *n, uint64_t max, uint64_t *out)
{
	if (n->kind != Y_SCALAR || !n->plain ||
	    pol_parse_uint(n->str, max, out) == -1) {
		yerr(w, n, "expected an integer from 0 to %" PRIu64, max);
		return -1;
	}
	return 0;
}

/* Durations and sizes: digits then a unit, with the product checked so a
 * huge count cannot wrap to a small one. */
#define MAX_DURATION	(100ULL * 365 * 86400)

int
pol_parse_duration(const char *s, uint64_t *secs)
{
	char		 num[24];
	size_t		 i;
	uint64_t	 v, mul;

	for (i = 0; s[i] >= '0' && s[i] <= '9'; i++)
		if (i + 1 >= sizeof(num))
			return -1;
	if (i == 0 || s[i] == '\0' || s[i + 1] != '\0')
		return -1;
	memcpy(num, s, i);
	num[i] = '\0';
	switch (s[i]) {
	case 's': mul = 1; break;
	case 'm': mul = 60; break;
	case 'h': mul = 3600; break;
	case 'd': mul = 86400; break;
	default:
		return -1;
	}
	if (pol_parse_uint(num, MAX_DURATION, &v) == -1 ||
	    v > MAX_DURATION / mul)
		return -1;
	*secs = v * mul;
	return 0;
}

int
yduration(struct ywalk *w, const struct ynode *n, uint64_t *secs)
{
	if (n->kind != Y_SCALAR || pol_parse_duration(n->str, secs) == -1) {
		yerr(w, n, "invalid duration \"%s\" (use e.g. 30s, 5m, 1h, "
		    "2d; at most 100 years)",
		    n->kind == Y_SCALAR ? n->str : ykind_name(n->kind));
		return -1;
	}
	return 0;
}

#define MAX_SIZE	(1ULL << 50)

int
pol_parse_size(const char *s, uint64_t *bytes)
{
	static const struct { const char *u; uint64_t m; } units[] = {
		{ "", 1 }, { "B", 1 }, { "KiB", 1ULL << 10 },
		{ "MiB", 1ULL << 20 }, { "GiB", 1ULL << 30 },
		{ "TiB", 1ULL << 40 },
	};
	char		 num[24];
	size_t		 i, j;
	uint64_t	 v;

	for (i = 0; s[i] >= '0' && s[i] <= '9'; i++)
		if (i + 1 >= sizeof(num))
			return -1;
	if (i == 0)
		return -1;
	memcpy(num, s, i);
	num[i] = '\0';
	for (j = 0; j < sizeof(units) / sizeof(units[0]); j++) {
		if (strcmp(s + i, units[j].u) != 0)
			continue;
		if (pol_parse_uint(num, MAX_SIZE, &v) == -1 ||
		    v > MAX_SIZE / units[j].m)
			return -1;
		*bytes = v * units[j].m;
		return 0;
	}
	return -1;
}

int
ysize(struct ywalk *w, const struct ynode *n, uint64_t *bytes)
{
	if (n->kind != Y_SCALAR || pol_parse_size(n->str, bytes) == -1) {
		yerr(w, n, "invalid size \"%s\" (use e.g. 65536, 64KiB, 1GiB; "
		    "at most 1024TiB)",
		    n->kind == Y_SCALAR ? n->str : ykind_name(n->kind));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ names */

bool
dns_name_valid(const char *s, size_t len)
{
	size_t	i, lab = 0;
	bool	alldigit = true;

	if (len == 0 || len > 253)
		return false;
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '.') {
			if (lab == 0 || s[i - 1] == '-')
				return false;
			lab = 0;
			alldigit = true;
			continue;
		}
		if (!(isalnum(c) || c == '-' || c == '_'))
			return false;
		if (lab == 0 && c == '-')
			return false;
		if (!isdigit(c))
			alldigit = false;
		if (++lab > 63)
			return false;
	}
	/* A numeric last label makes it an address to many parsers. */
	if (lab == 0 || s[len - 1] == '-' || alldigit)
		return false;
	return true;
}

int
hostpat_parse(const char *s, struct hostpat *out, const char **why)
{
	struct pol_addr	 a;
	const char	*name = s;
	size_t		 i;

	memset(out, 0, sizeof(*out));
	if (pol_addr_parse(s, &a) == 0) {
		*why = "IP addresses go in cidr, not host";
		return -1;
	}
	if (strncmp(s, "*.", 2) == 0) {
		out->wildcard = true;
		name = s + 2;
	}
	if (strchr(name, '*') != NULL) {
		*why = "a wildcard is allowed only as a leading \"*.\" label";
		return -1;
	}
	if (!dns_name_valid(name, strlen(name))) {
		*why = "not a valid DNS name";
		return -1;
	}
	if ((out->name = strdup(name)) == NULL) {
		*why = "out of memory";
		return -1;
	}
	for (i = 0; out->name[i]; i++)
		out->name[i] = (char)tolower((unsigned char)out->name[i]);
	return 0;
}

bool
hostpat_match(const struct hostpat *hp, const char *name, size_t len)
{
	size_t	plen = strlen(hp->name);

	if (!hp->wildcard)
		return len == plen && strncasecmp(name, hp->name, len) == 0;
	/* "*.x" matches names below x, never x itself. */
	return len > plen + 1 && name[len - plen - 1] == '.' &&
	    strncasecmp(name + len - plen, hp->name, plen) == 0;
}

/* ------------------------------------------------------------ regexes */

static pcre2_code *
regex_compile(const char *pat, uint32_t opts, char *err, size_t errlen)
{
	pcre2_code	*re;
	int		 ec;
	PCRE2_SIZE	 off;
	PCRE2_UCHAR	 msg[160];

	re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
	    PCRE2_UTF | PCRE2_NEVER_BACKSLASH_C | opts, &ec, &off, NULL);
	if (re == NULL) {
		pcre2_get_error_message(ec, msg, sizeof(msg));
		snprintf(err, errlen, "%s at offset %zu", (char *)msg,
		    (size_t)off);
	}
	return re;
}

pcre2_code *
pol_regex_compile(const char *pat, char *err, size_t errlen)
{
	return regex_compile(pat, 0, err, errlen);
}

/* A constraint is a whole-value check: without DOLLAR_ENDONLY, PCRE2's `$`
 * also matches before a final newline, so "^[ -~]*$" would pass "hi\n".
 * Redaction patterns keep the default: there a wider `$` only redacts
 * more. */
pcre2_code *
pol_arg_regex_compile(const char *pat, char *err, size_t errlen)
{
	return regex_compile(pat, PCRE2_DOLLAR_ENDONLY, err, errlen);
}

pcre2_match_context *
pol_match_context(void)
{
	pcre2_match_context *mc;

	if ((mc = pcre2_match_context_create(NULL)) == NULL)
		return NULL;
	/* Bound backtracking: a pattern meets agent-controlled subjects. */
	pcre2_set_match_limit(mc, 100000);
	pcre2_set_depth_limit(mc, 1000);
	return mc;
}

/* name_ok: [a-z0-9][a-z0-9_-]* of at most maxlen characters. */
bool
name_ok(const char *s, size_t maxlen)
{
	size_t	i;

	if (!(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
		return false;
	for (i = 1; s[i]; i++)
		if (!(islower((unsigned char)s[i]) ||
		    isdigit((unsigned char)s[i]) || s[i] == '_' || s[i] == '-'))
			return false;
	return i <= maxlen;
}

/* strv_free: frees the n strings of v and v. */
void
strv_free(char **v, size_t n)
{
	size_t	i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* ystrlist: a list of strings (a single string is not accepted). */
int
ystrlist(struct ywalk *w, const struct ynode *n, const char *what,
    char ***out, size_t *nout)
{
	size_t	i;
	int	rc = 0;

	if (!yis(w, n, Y_SEQ, what))
		return -1;
	if (n->n == 0)
		return 0;
	if ((*out = calloc(n->n, sizeof(**out))) == NULL) {
		yerr(w, n, "out of memory");
		return -1;
	}
	for (i = 0; i < n->n; i++) {
		if (ystr(w, n->vals[i], &(*out)[*nout]) == -1)
			rc = -1;
		else
			(*nout)++;
	}
	return rc;
}
