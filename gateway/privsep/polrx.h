/*
 * polrx: a child's side of the policy set as the parent streams it
 * (MSG_POLICY_BEGIN, then per file MSG_POLICY_FILE and its MSG_POLICY_DATA,
 * then MSG_POLICY_END). Each child keeps its own copy, loaded from the same
 * bytes the parent loaded (pol_policy_load_buf), so no pointer crosses and
 * a digest mismatch means the two processes disagree about the text. Both
 * children (DNS and bridge) receive the set the same way; this is that
 * way. Leaf module: errors come back with a message, the caller decides.
 */
#ifndef SLUICE_GATEWAY_PRIVSEP_POLRX_H
#define SLUICE_GATEWAY_PRIVSEP_POLRX_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/privsep/chan.h"
#include "policy/policy.h"

struct polrx;

/* polrx_new: an idle receiver. NULL with errno. */
struct polrx	*polrx_new(void);
/* polrx_free: drops a set half received. NULL is a no-op. */
void		 polrx_free(struct polrx *rx);

/*
 * polrx_msg: one policy message (type one of the four above, payload
 * already size-checked by msg_check). cfg is given to the loader (may be
 * NULL: no server references are checked, the parent did). Returns 0 when
 * more is expected, 1 when MSG_POLICY_END completed a set (then *out is
 * the new set, the caller's), -1 when the messages are out of order or a
 * file does not load to the parent's digest (a message in err; the
 * receiver is reset).
 */
int		 polrx_msg(struct polrx *rx, uint32_t type, const void *pl,
		    size_t len, const struct pol_config *cfg,
		    struct pol_set **out, char *err, size_t errlen);

/*
 * polrx_send: the parent's half: set as the messages above, each file as
 * the bytes it was loaded from (pol_policy_source) with its digest. 0, or
 * -1 with errno at the first message the channel did not take (the child
 * then has half a set and must be restarted).
 */
int		 polrx_send(struct chan *c, const struct pol_set *set);

#endif /* SLUICE_GATEWAY_PRIVSEP_POLRX_H */
