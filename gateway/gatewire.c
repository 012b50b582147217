/*
 * gatewire.c: net.deny records of the name gate (see gatewire.h). Apart
 * from dnswire.c, which carries the message, so that the record's shape
 * sits beside nothing else.
 */
#include <sys/socket.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <netinet/in.h>

#include <errno.h>

#include <string.h>

#include <jansson.h>
#include <libmnl/libmnl.h>

#include "gateway/gatewire.h"
#include "gateway/record.h"
#include "netns/fw.h"
#include "policy/policy.h"

json_t *
gatew_fields(const struct gate_event *ev)
{
	uint8_t a[16] = { 0 };
	json_t *o;
	int bad = 0;

	if ((o = json_object()) == NULL)
		return NULL;
	if (ev->sandbox[0] != '\0')
		bad |= rec_put(o, "sandbox", rec_sandbox_json(ev->sandbox));
	bad |= rec_put(o, "proto", json_string("tcp"));
	memcpy(a, ev->saddr, 4);
	bad |= rec_put(o, "src", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(AF_INET, a), "port", (json_int_t)ev->sport));
	memcpy(a, ev->daddr, 4);
	bad |= rec_put(o, "dst", json_pack("{s:o, s:I}", "ip",
	    rec_addr_json(AF_INET, a), "port", (json_int_t)ev->dport));
	bad |= rec_put(o, "decision", json_string("deny"));
	bad |= rec_put(o, "reason", rec_string(pol_reason_name(
	    (enum pol_reason)ev->reason)));
	bad |= rec_put(o, "check", json_string(pol_check_name(
	    (enum pol_check)ev->check)));
	bad |= rec_put(o, "name", rec_string(ev->name));
	bad |= rec_put(o, "count", json_integer(1));
	if (ev->suppressed > 0)
		bad |= rec_put(o, "suppressed", json_integer(ev->suppressed));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int
gatew_verdict(int fd, uint16_t queue, uint32_t id, uint32_t action)
{
	char buf[128];
	struct nlmsghdr *nlh;
	struct nfgenmsg *gm;
	struct nfqnl_msg_verdict_hdr vh;
	uint32_t mark = 0;

	switch (action) {
	case GATE_PASS:
		vh.verdict = htonl(NF_REPEAT);
		mark = FW_GATE_M_OK;
		break;
	case GATE_REFUSE:
		vh.verdict = htonl(NF_REPEAT);
		mark = FW_GATE_M_DENY;
		break;
	case GATE_ACCEPT:
		vh.verdict = htonl(NF_ACCEPT);
		break;
	case GATE_DROP:
		vh.verdict = htonl(NF_DROP);
		break;
	default:
		errno = EINVAL;
		return -1;
	}
	vh.id = htonl(id);
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	gm = mnl_nlmsg_put_extra_header(nlh, sizeof(*gm));
	gm->nfgen_family = AF_UNSPEC;
	gm->version = NFNETLINK_V0;
	gm->res_id = htons(queue);
	mnl_attr_put(nlh, NFQA_VERDICT_HDR, sizeof(vh), &vh);
	/* The whole mark: a sandbox's packets arrive with none (crossing
	 * namespaces clears it), and the forward chain clears these bits. */
	if (mark != 0)
		mnl_attr_put_u32(nlh, NFQA_MARK, htonl(mark));
	return send(fd, nlh, nlh->nlmsg_len, MSG_DONTWAIT) == -1 ? -1 : 0;
}
