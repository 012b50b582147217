/*
 * ansmem: the parent's copy of the answers the name gate holds.
 *
 * The name gate (gateway/dns/gate.c) lets a flow to a DNS-learned address
 * pass only for a name the sandbox was answered with at that address, and
 * that memory is the DNS process's own. When that process dies the parent
 * starts another (gateway/privsep/proc.c), the kernel still holds every
 * element learned before, and the new process would know none of the
 * answers behind them: every flow to them would be refused until the
 * sandbox asked again. So the parent keeps, from the learn batches it
 * already receives and only for the elements the kernel acknowledged, the
 * (name, address, protocol, ports, expiry) of each, and hands them to the
 * next DNS process before it serves (MSG_GATE_ANSWERS).
 *
 * Why a copy here rather than the name in each kernel element's userdata,
 * read back from the sets: an element is one address for every name that
 * was answered with it, and its timeout is the latest of their answers;
 * userdata holds one short name and no expiry of its own, so reading the
 * sets back would either lose names or let a name pass past its own
 * answer's end. The parent keeps the names as opaque bytes it only
 * compares (it parses nothing a sandbox sent: the DNS process wrote them,
 * and gets them back as they were), each with its own expiry.
 *
 * Bounded per sandbox at the kernel's own bound on its learned elements
 * (dns.max_learned): past it the answer learned or refreshed longest ago
 * is dropped. Dropping only ever costs a sandbox one more query after a
 * restart: an answer not kept is one the next DNS process does not know,
 * so its flows are refused, never let through. What expired is never
 * handed over.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_ANSMEM_H
#define SLUICE_GATEWAY_PRIVSEP_ANSMEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/privsep/msg.h"

struct ansmem;

/* ansmem_new: an empty memory keeping at most per_sbx answers per sandbox
 * (per_sbx >= 1). NULL with errno. */
struct ansmem	*ansmem_new(uint32_t per_sbx);
/* ansmem_free: everything kept and the memory. NULL is a no-op. */
void		 ansmem_free(struct ansmem *m);

/*
 * ansmem_put: the sandbox of link a->ifname was answered a->name with
 * a->addr (a->family), usable over a->proto on [a->port_lo, a->port_hi]
 * until a->expires_ms (CLOCK_MONOTONIC ms), and the kernel has the
 * element. An answer with the same key (link, family, address, protocol,
 * ports, name) takes the new expiry, as gate_learn does, earlier or later.
 * now (CLOCK_MONOTONIC ms) lets what expired make room first. 0, or -1
 * with errno (EINVAL: a is not one msg_answers_ok takes; ENOMEM).
 */
int		 ansmem_put(struct ansmem *m, const struct msg_answer *a,
		    uint64_t now);
/* ansmem_forget: everything kept for link ifname (its sandbox went; the
 * next sandbox on that link must inherit nothing). */
void		 ansmem_forget(struct ansmem *m, const char *ifname);
/* ansmem_count: answers kept (expired ones not yet dropped included),
 * for sizing what a replay may queue. */
size_t		 ansmem_count(const struct ansmem *m);
/* ansmem_count_sbx: answers kept for link ifname. */
size_t		 ansmem_count_sbx(const struct ansmem *m, const char *ifname);
/*
 * ansmem_replay: drops what expired by now and calls fn once for each
 * answer left, in batches of 1..MSG_ANSWERS_MAX as the payload of one
 * MSG_GATE_ANSWERS (hdr followed by hdr->n answers, len bytes in all;
 * valid during the call). Stops at the first batch fn returns -1 for and
 * returns -1; else the number of answers handed over.
 */
long		 ansmem_replay(struct ansmem *m, uint64_t now,
		    int (*fn)(void *ctx, const struct msg_answers *hdr,
		    size_t len), void *ctx);

/*
 * ansmem_save / ansmem_load: across a restart of sluiced itself (its
 * sandboxes and their kernel elements kept, table adopted), the copy goes
 * through a file in the state directory, which only root reads.
 *
 * ansmem_save: writes what has not expired by now to path (mode 0600,
 * through path.tmp and a rename: a reader finds the whole file or none),
 * tagged with boot, the kernel's boot id (an expiry on CLOCK_MONOTONIC
 * means nothing in another boot). 0, or -1 with errno.
 *
 * ansmem_load: puts into m the answers of a file ansmem_save wrote in
 * this boot that have not expired by now, for the links keep(ctx,
 * ifname) says still have the sandbox they had (the daemon adopted it),
 * and removes the file, read once: a crash later must not bring back
 * what was forgotten since. Each record is checked as a replay message
 * is. The number of answers kept, or -1 with errno (ENOENT: no file;
 * EPROTO: not such a file, another boot's, or a record that is not
 * one: m is then left empty, a file not whole is not trusted in part).
 */
int		 ansmem_save(struct ansmem *m, const char *path,
		    const char *boot, uint64_t now);
long		 ansmem_load(struct ansmem *m, const char *path,
		    const char *boot, uint64_t now,
		    bool (*keep)(void *ctx, const char *ifname), void *ctx);

#endif /* SLUICE_GATEWAY_PRIVSEP_ANSMEM_H */
