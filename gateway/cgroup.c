/*
 * cgroup.c: sandboxes' control groups on cgroup v1 and v2 (see cgroup.h).
 * The file writes are few and small; none waits on anything a sandbox
 * controls (cgroupfs files answer from kernel counters), so they run on
 * the daemon's loop.
 */
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>

#include <linux/magic.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway/cgroup.h"
#include "netns/netns.h"

/* The v1 trees, in the order of cg_limit_writes' tree indexes. */
static const char *const v1_trees[CG_TREES_MAX] = { "pids", "memory", "cpu" };

#define CPU_PERIOD_US	100000u

struct cg {
	enum cg_mode	mode;
	size_t		ntrees;
	/* <root>/<tree><own>/<name> for each tree */
	char		base[CG_TREES_MAX][CG_PATH_MAX];
};

/* ------------------------------------------------------------ pure */

/* Does the comma-separated list of controllers in [s, s+n) name ctl? */
static int
ctl_listed(const char *s, size_t n, const char *ctl)
{
	size_t l = strlen(ctl), i = 0, j;

	while (i < n) {
		for (j = i; j < n && s[j] != ','; j++)
			;
		if (j - i == l && memcmp(s + i, ctl, l) == 0)
			return 1;
		i = j + 1;
	}
	return 0;
}

int
cg_self_path(const char *text, const char *ctl, char *out, size_t outlen)
{
	const char *line = text, *eol, *c1, *c2;
	size_t plen, ll = strlen(CG_LEAF_NAME);

	for (; line != NULL && *line != '\0'; line = *eol ? eol + 1 : eol) {
		if ((eol = strchr(line, '\n')) == NULL)
			eol = line + strlen(line);
		if ((c1 = memchr(line, ':', (size_t)(eol - line))) == NULL ||
		    (c2 = memchr(c1 + 1, ':', (size_t)(eol - c1 - 1))) == NULL)
			continue;
		if (ctl == NULL ? !(c1 - line == 1 && line[0] == '0' &&
		    c2 == c1 + 1) : !ctl_listed(c1 + 1, (size_t)(c2 - c1 - 1),
		    ctl))
			continue;
		plen = (size_t)(eol - c2 - 1);
		if (plen == 0 || c2[1] != '/' || plen >= outlen)
			return -1;
		memcpy(out, c2 + 1, plen);
		out[plen] = '\0';
		/* v2: the daemon's own leaf is not its base. */
		if (ctl == NULL && plen > ll + 1 &&
		    strcmp(out + plen - ll, CG_LEAF_NAME) == 0 &&
		    out[plen - ll - 1] == '/')
			out[plen - ll - 1] = '\0';
		if (ctl == NULL && plen == ll + 1 &&
		    strcmp(out + 1, CG_LEAF_NAME) == 0)
			out[1] = '\0';
		return 0;
	}
	return -1;
}

static void
put(struct cg_write *w, size_t *n, size_t tree, const char *file,
    unsigned long long v, int unlimited_max)
{
	w[*n].tree = tree;
	w[*n].file = file;
	if (unlimited_max)
		snprintf(w[*n].value, sizeof(w[*n].value), "max");
	else
		snprintf(w[*n].value, sizeof(w[*n].value), "%llu", v);
	(*n)++;
}

size_t
cg_limit_writes(enum cg_mode mode, const struct pol_resources *r,
    struct cg_write *out)
{
	size_t n = 0;

	if (mode == CG_V2) {
		put(out, &n, 0, "pids.max", r->pids, r->pids == 0);
		put(out, &n, 0, "memory.max", r->memory, r->memory == 0);
		/* No swap: a memory limit is the memory it says. */
		put(out, &n, 0, "memory.swap.max", 0, r->memory == 0);
		out[n].tree = 0;
		out[n].file = "cpu.max";
		if (r->cpu_milli == 0)
			snprintf(out[n].value, sizeof(out[n].value), "max %u",
			    CPU_PERIOD_US);
		else
			snprintf(out[n].value, sizeof(out[n].value), "%llu %u",
			    (unsigned long long)r->cpu_milli * CPU_PERIOD_US /
			    1000, CPU_PERIOD_US);
		n++;
	} else if (mode == CG_V1) {
		put(out, &n, 0, "pids.max", r->pids, r->pids == 0);
		/* v1 takes -1 for "no limit"; memsw must stay >= the limit,
		 * so the limit goes first when it is set, memsw first when
		 * it is lifted. */
		if (r->memory == 0) {
			out[n].tree = 1, out[n].file = "memory.memsw.limit_in_bytes";
			snprintf(out[n++].value, sizeof(out[0].value), "-1");
			out[n].tree = 1, out[n].file = "memory.limit_in_bytes";
			snprintf(out[n++].value, sizeof(out[0].value), "-1");
		} else {
			put(out, &n, 1, "memory.limit_in_bytes", r->memory, 0);
			put(out, &n, 1, "memory.memsw.limit_in_bytes",
			    r->memory, 0);
		}
		put(out, &n, 2, "cpu.cfs_period_us", CPU_PERIOD_US, 0);
		out[n].tree = 2;
		out[n].file = "cpu.cfs_quota_us";
		if (r->cpu_milli == 0)
			snprintf(out[n].value, sizeof(out[n].value), "-1");
		else
			snprintf(out[n].value, sizeof(out[n].value), "%llu",
			    (unsigned long long)r->cpu_milli * CPU_PERIOD_US /
			    1000);
		n++;
	}
	return n;
}

void
cg_base_name(const char *state_dir, char *out, size_t outlen)
{
	uint32_t h = 2166136261u;	/* FNV-1a */
	const unsigned char *p;

	for (p = (const unsigned char *)(state_dir != NULL ? state_dir : "");
	    *p != '\0'; p++)
		h = (h ^ *p) * 16777619u;
	snprintf(out, outlen, "sluice-%08x", (unsigned)h);
}

int
cg_base_name_ok(const char *name)
{
	size_t i;

	if (name == NULL || strncmp(name, "sluice-", 7) != 0 ||
	    strlen(name) != 15)
		return 0;
	for (i = 7; i < 15; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'f')))
			return 0;
	return 1;
}

uint64_t
cg_event_count(const char *text, const char *key)
{
	size_t kl = strlen(key);
	const char *p = text;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ')
			return strtoull(p + kl + 1, NULL, 10);
		if ((p = strchr(p, '\n')) != NULL)
			p++;
	}
	return 0;
}

int
cg_id_ok(const char *id)
{
	size_t i;

	if (id == NULL || id[0] == '\0' || id[0] == '-')
		return 0;
	for (i = 0; id[i] != '\0'; i++)
		if (i >= 32 || !((id[i] >= 'a' && id[i] <= 'z') ||
		    (id[i] >= '0' && id[i] <= '9') || id[i] == '-'))
			return 0;
	return 1;
}

/* ------------------------------------------------------------ files */

static int
mkdir_ok(const char *path)
{
	return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* ------------------------------------------------------------ detect */

enum cg_mode
cg_detect(const char *root)
{
	struct statfs sf;
	char path[CG_PATH_MAX], buf[256];
	size_t i;

	if (statfs(root, &sf) == -1)
		return CG_NONE;
	if (sf.f_type == CGROUP2_SUPER_MAGIC) {
		if (ns_cg_read(root, "cgroup.controllers", buf, sizeof(buf)) ==
		    -1 || strstr(buf, "pids") == NULL ||
		    strstr(buf, "memory") == NULL || strstr(buf, "cpu") == NULL)
			return CG_NONE;
		return CG_V2;
	}
	for (i = 0; i < CG_TREES_MAX; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, v1_trees[i]);
		if (statfs(path, &sf) == -1 || sf.f_type != CGROUP_SUPER_MAGIC)
			return CG_NONE;
	}
	return CG_V1;
}

/* v2: the processes of own go to own/sluiced, and pids, memory and cpu
 * are handed down from own and own/sluice. At the root no move is needed
 * (the root may hold processes and hand controllers down). */
static int
v2_setup(const char *own, const char *base, char *err, size_t errlen)
{
	char leaf[2 * CG_PATH_MAX + 16], procs[4096], *p, *nl;
	const char *ctl = "+pids +memory +cpu";
	int pass;

	if (strcmp(own + strlen(own) - 1, "/") != 0) {
		snprintf(leaf, sizeof(leaf), "%s/%s", own, CG_LEAF_NAME);
		if (mkdir_ok(leaf) == -1) {
			snprintf(err, errlen, "%s: %s", leaf, strerror(errno));
			return -1;
		}
		/* Whoever is in own is the service's (its delegated
		 * subtree): a few passes for what forks meanwhile. */
		for (pass = 0; pass < 8; pass++) {
			if (ns_cg_read(own, "cgroup.procs", procs,
			    sizeof(procs)) <= 0)
				break;
			for (p = procs; *p != '\0'; p = nl) {
				if ((nl = strchr(p, '\n')) == NULL)
					nl = p + strlen(p);
				else
					*nl++ = '\0';
				if (*p != '\0')
					(void)ns_cg_write(leaf, "cgroup.procs", p);
			}
		}
	}
	if (ns_cg_write(own, "cgroup.subtree_control", ctl) == -1) {
		snprintf(err, errlen, "%s/cgroup.subtree_control: %s", own,
		    strerror(errno));
		return -1;
	}
	if (mkdir_ok(base) == -1 ||
	    ns_cg_write(base, "cgroup.subtree_control", ctl) == -1) {
		snprintf(err, errlen, "%s: %s", base, strerror(errno));
		return -1;
	}
	return 0;
}

struct cg *
cg_new(const char *root, enum cg_mode mode, const char *self_text,
    const char *name, char *err, size_t errlen)
{
	char own[CG_PATH_MAX], dir[CG_PATH_MAX];
	struct cg *g;
	size_t i;

	if (mode == CG_NONE) {
		snprintf(err, errlen, "no usable cgroup tree under %s", root);
		return NULL;
	}
	if (!cg_base_name_ok(name)) {
		snprintf(err, errlen, "cgroup: bad base name");
		return NULL;
	}
	if ((g = calloc(1, sizeof(*g))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	g->mode = mode;
	g->ntrees = mode == CG_V2 ? 1 : CG_TREES_MAX;
	for (i = 0; i < g->ntrees; i++) {
		if (cg_self_path(self_text, mode == CG_V2 ? NULL : v1_trees[i],
		    own, sizeof(own)) == -1) {
			snprintf(err, errlen, "/proc/self/cgroup: no %s line",
			    mode == CG_V2 ? "v2" : v1_trees[i]);
			goto fail;
		}
		if (snprintf(dir, sizeof(dir), "%s%s%s", root,
		    mode == CG_V2 ? "" : "/", mode == CG_V2 ? "" :
		    v1_trees[i]) >= (int)sizeof(dir) ||
		    snprintf(g->base[i], sizeof(g->base[i]), "%s%s%s%s", dir,
		    strcmp(own, "/") == 0 ? "" : own, "/", name) >=
		    (int)sizeof(g->base[i])) {
			snprintf(err, errlen, "cgroup path too long");
			goto fail;
		}
		if (mode == CG_V2) {
			char owndir[2 * CG_PATH_MAX];

			if (snprintf(owndir, sizeof(owndir), "%s%s", dir,
			    strcmp(own, "/") == 0 ? "/" : own) >= CG_PATH_MAX) {
				snprintf(err, errlen, "cgroup path too long");
				goto fail;
			}
			if (v2_setup(owndir, g->base[i], err, errlen) == -1)
				goto fail;
		} else if (mkdir_ok(g->base[i]) == -1) {
			snprintf(err, errlen, "%s: %s", g->base[i],
			    strerror(errno));
			goto fail;
		}
	}
	return g;
fail:
	free(g);
	return NULL;
}

void
cg_release(struct cg *g)
{
	size_t i;

	for (i = 0; g != NULL && i < g->ntrees; i++)
		(void)rmdir(g->base[i]);	/* EBUSY: groups in it */
}

void
cg_free(struct cg *g)
{
	free(g);
}

enum cg_mode
cg_get_mode(const struct cg *g)
{
	return g != NULL ? g->mode : CG_NONE;
}

size_t
cg_ntrees(const struct cg *g)
{
	return g != NULL ? g->ntrees : 0;
}

int
cg_base(const struct cg *g, size_t i, char *out, size_t outlen)
{
	if (g == NULL || i >= g->ntrees ||
	    snprintf(out, outlen, "%s", g->base[i]) >= (int)outlen) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

int
cg_dir(const struct cg *g, size_t i, const char *id, char *out,
    size_t outlen)
{
	if (g == NULL || i >= g->ntrees || !cg_id_ok(id) ||
	    snprintf(out, outlen, "%s/%s", g->base[i], id) >= (int)outlen) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ groups */

int
cg_create(struct cg *g, const char *id, const struct pol_resources *r,
    char *err, size_t errlen)
{
	struct cg_write w[CG_WRITES_MAX];
	char dir[CG_PATH_MAX];
	size_t i, n;

	for (i = 0; i < g->ntrees; i++) {
		if (cg_dir(g, i, id, dir, sizeof(dir)) == -1 ||
		    mkdir_ok(dir) == -1) {
			snprintf(err, errlen, "cgroup %s: %s", dir,
			    strerror(errno));
			goto fail;
		}
	}
	n = cg_limit_writes(g->mode, r, w);
	for (i = 0; i < n; i++) {
		(void)cg_dir(g, w[i].tree, id, dir, sizeof(dir));
		if (ns_cg_write(dir, w[i].file, w[i].value) == 0)
			continue;
		/* Without swap accounting there is no memsw file: the
		 * memory limit alone holds then (there is no swap to use
		 * past it that the kernel counts). */
		if (errno == ENOENT && strstr(w[i].file, "memsw") != NULL)
			continue;
		if (errno == ENOENT && strcmp(w[i].file, "memory.swap.max") ==
		    0)
			continue;
		snprintf(err, errlen, "%s/%s = %s: %s", dir, w[i].file,
		    w[i].value, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	(void)cg_remove(g, id, NULL, 0);
	return -1;
}

int
cg_exists(const struct cg *g, const char *id)
{
	char dir[CG_PATH_MAX];
	struct stat st;
	size_t i;

	for (i = 0; i < cg_ntrees(g); i++)
		if (cg_dir(g, i, id, dir, sizeof(dir)) == -1 ||
		    stat(dir, &st) == -1 || !S_ISDIR(st.st_mode))
			return 0;
	return g != NULL;
}

int
cg_kill(struct cg *g, const char *id)
{
	char dir[CG_PATH_MAX];
	int total = 0, n, seen;
	size_t i;

	if (g == NULL)
		return -1;
	seen = cg_members(g, id);
	for (i = 0; i < g->ntrees; i++) {
		if (cg_dir(g, i, id, dir, sizeof(dir)) == -1)
			return -1;
		if ((n = ns_cg_kill(dir)) > 0)
			total += n;
	}
	return total > 0 ? total : seen < 0 ? 0 : seen;
}

int
cg_members(const struct cg *g, const char *id)
{
	char dir[CG_PATH_MAX], buf[65536], *p;
	int n = 0;

	if (cg_dir(g, 0, id, dir, sizeof(dir)) == -1 ||
	    ns_cg_read(dir, "cgroup.procs", buf, sizeof(buf)) == -1)
		return -1;
	for (p = buf; *p != '\0'; p++)
		if (*p == '\n')
			n++;
	return n;
}

int
cg_remove(struct cg *g, const char *id, char *err, size_t errlen)
{
	char dir[CG_PATH_MAX];
	size_t i;
	int rc = 0;

	for (i = 0; i < cg_ntrees(g); i++) {
		if (cg_dir(g, i, id, dir, sizeof(dir)) == -1)
			return -1;
		if (rmdir(dir) == -1 && errno != ENOENT) {
			if (rc == 0 && err != NULL)
				snprintf(err, errlen, "%s: %s", dir,
				    strerror(errno));
			rc = -1;
		}
	}
	return rc;
}

void
cg_foreach(const struct cg *g, void (*fn)(const char *id, void *arg),
    void *arg)
{
	struct dirent *de;
	DIR *d;

	if (g == NULL || (d = opendir(g->base[0])) == NULL)
		return;
	while ((de = readdir(d)) != NULL)
		if (de->d_type == DT_DIR && cg_id_ok(de->d_name))
			fn(de->d_name, arg);
	closedir(d);
}

int
cg_read_events(const struct cg *g, const char *id, struct cg_events *ev)
{
	char dir[CG_PATH_MAX], buf[1024];
	size_t mem = g != NULL && g->mode == CG_V1 ? 1 : 0;

	memset(ev, 0, sizeof(*ev));
	if (cg_dir(g, 0, id, dir, sizeof(dir)) == -1 ||
	    ns_cg_read(dir, "pids.events", buf, sizeof(buf)) == -1)
		return -1;
	ev->pids_max = cg_event_count(buf, "max");
	if (cg_dir(g, mem, id, dir, sizeof(dir)) == -1 ||
	    ns_cg_read(dir, mem ? "memory.oom_control" : "memory.events", buf,
	    sizeof(buf)) == -1)
		return -1;
	ev->oom_kills = cg_event_count(buf, "oom_kill");
	return 0;
}
