/*
 * sandbox_table.c: the manager's table of sandboxes, and who hears of it.
 * The DNS proxy and the bridge look a packet's sandbox up once per query
 * or call, so the table is indexed twice, by id (a hash) and by pool slot
 * (an array: an address or a link name gives its slot by arithmetic), and
 * what they get is a flat copy (struct sbx_view), never a pointer into it.
 * A copy of the table kept elsewhere follows it through the watchers, told
 * of each change once it is made. The check that keeps sandboxed code off
 * the control socket reads the table too, so it lives here.
 */
#include <sys/stat.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "gateway/sandbox.h"
#include "gateway/sandbox_int.h"
#include "netns/netns.h"

/* ------------------------------------------------------------ indexes */

static unsigned
id_hash(const char *id)
{
	uint32_t h = 2166136261u;

	while (*id != '\0')
		h = (h ^ (unsigned char)*id++) * 16777619u;
	return h % SBX_HASH;
}

struct sandbox *
sb_find(const struct sbx *m, const char *id)
{
	struct sandbox *s;

	if (id == NULL)
		return NULL;
	for (s = m->by_id[id_hash(id)]; s != NULL; s = s->hnext)
		if (strcmp(s->rec.id, id) == 0)
			return s;
	return NULL;
}

/* Takes the slot and enters s in both indexes. -1 if either is taken. */
int
sb_link(struct sbx *m, struct sandbox *s)
{
	unsigned h = id_hash(s->rec.id);

	if (sb_find(m, s->rec.id) != NULL) {
		errno = EEXIST;
		return -1;
	}
	if (sbx_slots_take(m->slots, s->rec.index) == -1)
		return -1;
	m->by_slot[s->rec.index] = s;
	s->hnext = m->by_id[h];
	m->by_id[h] = s;
	m->count++;
	return 0;
}

void
sb_unlink(struct sbx *m, struct sandbox *s)
{
	struct sandbox **pp;

	for (pp = &m->by_id[id_hash(s->rec.id)]; *pp != NULL;
	    pp = &(*pp)->hnext) {
		if (*pp == s) {
			*pp = s->hnext;
			m->by_slot[s->rec.index] = NULL;
			sbx_slots_put(m->slots, s->rec.index);
			m->count--;
			return;
		}
	}
}

/* ------------------------------------------------------------ watchers */

/* Tells every watcher, in registration order, of a change already made
 * in the kernel and the table; v is the sandbox as it is now (or was, for
 * SB_REMOVED). */
void
sb_notify_view(const struct sbx *m, enum sb_change what,
    const struct sbx_view *v)
{
	const struct sbx_watch *w;
	size_t i;

	for (i = 0; i < m->nwatch; i++) {
		w = &m->watch[i];
		switch (what) {
		case SB_ADDED:
			if (w->added != NULL)
				w->added(w->ctx, v);
			break;
		case SB_REMOVED:
			if (w->removed != NULL)
				w->removed(w->ctx, v);
			break;
		case SB_CHANGED:
			if (w->changed != NULL)
				w->changed(w->ctx, v);
			break;
		}
	}
}

void
sb_notify(const struct sbx *m, enum sb_change what, const struct sandbox *s)
{
	struct sbx_view v;

	if (m->nwatch == 0)
		return;
	sb_fill_view(s, &v);
	sb_notify_view(m, what, &v);
}

int
sbx_watch_add(struct sbx *m, const struct sbx_watch *w)
{
	if (m->nwatch >= SBX_WATCHERS) {
		errno = ENOSPC;
		return -1;
	}
	m->watch[m->nwatch++] = *w;
	return 0;
}

void
sbx_watch_del(struct sbx *m, const void *ctx)
{
	size_t i, j;

	for (i = j = 0; i < m->nwatch; i++)
		if (m->watch[i].ctx != ctx)
			m->watch[j++] = m->watch[i];
	m->nwatch = j;
}

void
sbx_foreach(const struct sbx *m, void (*fn)(void *ctx,
    const struct sbx_view *v), void *ctx)
{
	struct sbx_view v;
	uint32_t i;

	for (i = 0; i < m->nslots; i++) {
		if (m->by_slot[i] == NULL)
			continue;
		sb_fill_view(m->by_slot[i], &v);
		fn(ctx, &v);
	}
}

/* ------------------------------------------------------------ views */

void
sb_fill_view(const struct sandbox *s, struct sbx_view *v)
{
	const char *k;
	json_t *val;
	size_t i = 0;

	memset(v, 0, sizeof(*v));
	/* The DNS proxy takes a view two or three times per query: copies,
	 * not snprintf. v is zeroed, so a cut copy stays terminated. */
	memcpy(v->id, s->rec.id, strnlen(s->rec.id, sizeof(v->id) - 1));
	memcpy(v->ifname, s->spec.host_if, strnlen(s->spec.host_if,
	    sizeof(v->ifname) - 1));
	memcpy(v->subject, s->rec.subject, strnlen(s->rec.subject,
	    sizeof(v->subject) - 1));
	memcpy(v->policy, s->rec.policy, strnlen(s->rec.policy,
	    sizeof(v->policy) - 1));
	memcpy(v->addr4, &s->spec.sandbox_addr, 4);
	v->index = s->rec.index;
	v->tainted = s->rec.tainted != 0;
	v->attached = s->rec.attached != 0;
	v->expires = s->rec.expires;
	json_object_foreach(s->labels, k, val) {
		if (i >= SBX_LABELS_MAX)
			break;
		snprintf(v->label_keys[i], sizeof(v->label_keys[i]), "%s", k);
		snprintf(v->label_values[i], sizeof(v->label_values[i]), "%s",
		    json_string_value(val));
		i++;
	}
	v->nlabels = i;
}

int
sbx_lookup_addr4(const struct sbx *m, const uint8_t addr4[4],
    struct sbx_view *out)
{
	const struct sandbox *s;
	int64_t slot;

	slot = sbx_pool_slot(m->pool4, m->prefix, addr4);
	/* The slot is derived from the address; the entry must still say
	 * it owns that address (a stale slot is never trusted). */
	if (slot < 0 || (uint64_t)slot >= m->nslots ||
	    (s = m->by_slot[slot]) == NULL ||
	    memcmp(&s->spec.sandbox_addr, addr4, 4) != 0) {
		errno = ENOENT;
		return -1;
	}
	sb_fill_view(s, out);
	return 0;
}

int
sbx_lookup_id(const struct sbx *m, const char *id, struct sbx_view *out)
{
	const struct sandbox *s;

	if ((s = sb_find(m, id)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	sb_fill_view(s, out);
	return 0;
}

int
sbx_lookup_ifname(const struct sbx *m, const char *ifname,
    struct sbx_view *out)
{
	const struct sandbox *s;
	unsigned long n;
	char *end;

	/* sl-<slot>: the slot is in the name; the entry must agree. */
	if (ifname == NULL || strncmp(ifname, NS_LINK_PREFIX, 3) != 0 ||
	    ifname[3] < '0' || ifname[3] > '9' ||
	    (errno = 0, n = strtoul(ifname + 3, &end, 10), *end != '\0') ||
	    errno != 0 || n >= m->nslots || (s = m->by_slot[n]) == NULL ||
	    strcmp(s->spec.host_if, ifname) != 0) {
		errno = ENOENT;
		return -1;
	}
	sb_fill_view(s, out);
	return 0;
}

int
sbx_token_ok(const struct sbx *m, const char *id, const char *token)
{
	const struct sandbox *s;

	if (token == NULL || (s = sb_find(m, id)) == NULL ||
	    strlen(token) != SBX_TOKEN_HEX)
		return 0;
	return CRYPTO_memcmp(token, s->rec.token, SBX_TOKEN_HEX) == 0;
}

int
sbx_token_digest(const struct sbx *m, const char *id, uint8_t out[32])
{
	const struct sandbox *s;
	unsigned int n = 0;

	if ((s = sb_find(m, id)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	if (EVP_Digest(s->rec.token, strlen(s->rec.token), out, &n,
	    EVP_sha256(), NULL) != 1 || n != 32) {
		errno = EIO;
		return -1;
	}
	return 0;
}

void
sb_fill_info(const struct sbx *m, const struct sandbox *s, int with_token,
    struct sbx_info *out)
{
	memset(out, 0, sizeof(*out));
	sb_fill_view(s, &out->view);
	snprintf(out->netns, sizeof(out->netns), "%s", s->spec.netns);
	snprintf(out->netns_path, sizeof(out->netns_path), "%s/%s",
	    s->spec.netns_dir, s->spec.netns);
	snprintf(out->addr, sizeof(out->addr), "%s", s->rec.addr);
	snprintf(out->host_addr, sizeof(out->host_addr), "%s",
	    s->rec.host_addr);
	inet_ntop(AF_INET, &m->svc, out->service_addr,
	    sizeof(out->service_addr));
	out->bridge_port = m->cfg->bridge_port;
	out->created = s->rec.created;
	out->idle_ms = ev_now_ms() - s->active_ms;
	out->gen = s->rec.gen;
	if (s->rec.attached)
		memcpy(out->attached_from, s->rec.attach_src,
		    sizeof(out->attached_from));
	if (s->ns_known) {
		out->netns_dev = (uint64_t)s->ns_dev;
		out->netns_ino = (uint64_t)s->ns_ino;
	}
	if (with_token)
		memcpy(out->token, s->rec.token, sizeof(out->token));
}

int
sbx_get(const struct sbx *m, const char *id, int with_token,
    struct sbx_info *out)
{
	const struct sandbox *s;

	if ((s = sb_find(m, id)) == NULL) {
		errno = ENOENT;
		return -1;
	}
	sb_fill_info(m, s, with_token, out);
	return 0;
}

/*
 * The control socket is a path, so a process in a sandbox that still sees
 * the host's files (`sluice exec` keeps them, and so does a provider that
 * shares the host's filesystem) could reach it, and approve its own calls
 * or make itself a laxer sandbox. A caller whose network namespace is one
 * of the sandboxes' is refused, and so is one whose namespace cannot be
 * read (it exited). Only callers outside the daemon's own namespace pay
 * for the walk over the sandboxes, which compares the identities taken
 * when each namespace was made (no file per sandbox, and a namespace
 * whose name was unmounted while code still runs in it is still known).
 *
 * Code in a sandbox can leave the sandbox's namespace for one of its own
 * without any privilege (a new user namespace, and a network namespace in
 * it: `unshare -Urn`), and then is in none of the sandboxes'. An
 * unprivileged process can be in a network namespace other than the one
 * it was put in only that way, so a caller outside the daemon's network
 * namespace that is also outside its user namespace is refused too.
 * (Code that is root on the host can rejoin the host's namespaces
 * anyway: this check is no boundary against it.)
 */
int
sbx_pid_sandbox(const struct sbx *m, pid_t pid, struct sbx_view *out)
{
	const struct sandbox *s;
	struct stat ps, st;
	char path[PATH_MAX];
	size_t i;

	if (out != NULL)
		memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%ld/ns/net", (long)pid);
	if (stat(path, &ps) == -1)
		return 1;
	if (stat("/proc/self/ns/net", &st) == 0 && st.st_dev == ps.st_dev &&
	    st.st_ino == ps.st_ino)
		return 0;
	for (i = 0; i < SBX_HASH; i++) {
		for (s = m->by_id[i]; s != NULL; s = s->hnext) {
			if (s->ns_known) {
				st.st_dev = s->ns_dev;
				st.st_ino = s->ns_ino;
			} else {
				snprintf(path, sizeof(path), "%s/%s",
				    s->spec.netns_dir, s->spec.netns);
				if (stat(path, &st) == -1)
					continue;
			}
			if (st.st_dev == ps.st_dev && st.st_ino == ps.st_ino) {
				if (out != NULL)
					sb_fill_view(s, out);
				return 1;
			}
		}
	}
	snprintf(path, sizeof(path), "/proc/%ld/ns/user", (long)pid);
	if (stat(path, &ps) == -1 || stat("/proc/self/ns/user", &st) == -1 ||
	    st.st_dev != ps.st_dev || st.st_ino != ps.st_ino)
		return 1;
	return 0;
}

struct fw *
sbx_fw(struct sbx *m)
{
	return m->fw;
}

size_t
sbx_count(const struct sbx *m)
{
	return m->count;
}

void
sbx_metrics_print(const struct sbx *m, FILE *fp)
{
	fprintf(fp,
	    "# HELP sluice_sandboxes Sandboxes that exist.\n"
	    "# TYPE sluice_sandboxes gauge\n"
	    "sluice_sandboxes %zu\n"
	    "# HELP sluice_sandbox_creates_total Sandboxes created.\n"
	    "# TYPE sluice_sandbox_creates_total counter\n"
	    "sluice_sandbox_creates_total %" PRIu64 "\n"
	    "# HELP sluice_sandbox_deletes_total Sandboxes removed (deleted "
	    "or expired).\n"
	    "# TYPE sluice_sandbox_deletes_total counter\n"
	    "sluice_sandbox_deletes_total %" PRIu64 "\n"
	    "# HELP sluice_sandbox_failures_total Sandbox creates or removals "
	    "that failed.\n"
	    "# TYPE sluice_sandbox_failures_total counter\n"
	    "sluice_sandbox_failures_total %" PRIu64 "\n"
	    "# HELP sluice_sandbox_policy_updates_total Sandboxes whose "
	    "static rules a reload re-applied.\n"
	    "# TYPE sluice_sandbox_policy_updates_total counter\n"
	    "sluice_sandbox_policy_updates_total %" PRIu64 "\n",
	    m->count, m->creates, m->deletes, m->failures, m->reapplied);
}
