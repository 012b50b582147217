/*
 * reason: the one table of reason names.
 *
 * Decisions carry enum pol_reason; records and messages carry text. The
 * text of every code is written here and nowhere else, so a record can be
 * renamed without touching any comparison that enforces something, and a
 * code added to the enum without a name is caught by the table's test.
 */
#include "policy/policy.h"

static const char *const names[POL_REASON__COUNT] = {
	[POL_REASON_NONE] = "none",
	[POL_REASON_ALLOWED] = "allowed",
	[POL_REASON_NO_MATCHING_RULE] = "no_matching_rule",
	[POL_REASON_TAINTED] = "tainted",
	[POL_REASON_BAD_REQUEST] = "bad_request",
	[POL_REASON_BAD_HOST] = "bad_host",
	[POL_REASON_BAD_PORT] = "bad_port",
	[POL_REASON_BAD_PROTOCOL] = "bad_protocol",
	[POL_REASON_ALWAYS_DENIED_CLASS] = "always_denied_class",
	[POL_REASON_EXPLICIT_DENY] = "explicit_deny",
	[POL_REASON_PRIVATE_RANGE] = "private_range",
	[POL_REASON_SYNTHETIC] = "synthetic",
	[POL_REASON_BAD_NAME] = "bad_name",
	[POL_REASON_NODATA] = "nodata",
	[POL_REASON_TYPE_NOT_ALLOWED] = "type_not_allowed",
	[POL_REASON_NAME_TOO_LONG] = "name_too_long",
	[POL_REASON_LABEL_TOO_LONG] = "label_too_long",
	[POL_REASON_HIGH_ENTROPY] = "high_entropy",
	[POL_REASON_RULE_DENY] = "rule_deny",
	[POL_REASON_PIN_MISMATCH] = "pin_mismatch",
	[POL_REASON_BAD_ARGUMENTS] = "bad_arguments",
	[POL_REASON_UNKNOWN_ARGUMENT] = "unknown_argument",
	[POL_REASON_ARGUMENT_CONSTRAINT] = "argument_constraint",
	[POL_REASON_MISSING_ARGUMENT] = "missing_argument",
	[POL_REASON_BUDGET_EXHAUSTED] = "budget_exhausted",
	[POL_REASON_APPROVAL_REQUIRED] = "approval_required",
	[POL_REASON_VISIBLE] = "visible",
	[POL_REASON_DROPPED] = "dropped",
	[POL_REASON_FORMERR] = "formerr",
	[POL_REASON_NOTIMP] = "notimp",
	[POL_REASON_RATE_LIMITED] = "rate_limited",
	[POL_REASON_UNKNOWN_SOURCE] = "unknown_source",
	[POL_REASON_SUSPECT_NAME] = "suspect_name",
	[POL_REASON_OVERLOAD] = "overload",
	[POL_REASON_NO_MEMORY] = "no_memory",
	[POL_REASON_UPSTREAM_FAILED] = "upstream_failed",
	[POL_REASON_LEARNED_CAP] = "learned_cap",
	[POL_REASON_LEARN_FAILED] = "learn_failed",
	[POL_REASON_SANDBOX_GONE] = "sandbox_gone",
	[POL_REASON_REBINDING] = "rebinding",
	[POL_REASON_INTERNAL] = "internal",
	[POL_REASON_DENIED] = "denied",
	[POL_REASON_UNKNOWN_TOOL] = "unknown_tool",
	[POL_REASON_TOOL_DRIFT] = "tool_drift",
	[POL_REASON_INVALID_PARAMS] = "invalid_params",
	[POL_REASON_INTERNAL_ERROR] = "internal_error",
	[POL_REASON_UPSTREAM_ERROR] = "upstream_error",
	[POL_REASON_RESULT_TOO_LARGE] = "result_too_large",
	[POL_REASON_REDACTION_FAILED] = "redaction_failed",
	[POL_REASON_TAINT_FAILED] = "taint_failed",
	[POL_REASON_APPROVAL_TIMEOUT] = "approval_timeout",
	[POL_REASON_APPROVAL_UNAVAILABLE] = "approval_unavailable",
	[POL_REASON_APPROVAL_DENIED] = "approval_denied",
	[POL_REASON_SHUTDOWN] = "shutdown",
	[POL_REASON_RECORD_FAILED] = "record_failed",
	[POL_REASON_NAME_MISMATCH] = "name_mismatch",
	[POL_REASON_NO_NAME] = "no_name",
	[POL_REASON_ECH] = "ech",
	[POL_REASON_NOT_TLS] = "not_tls",
	[POL_REASON_NOT_HTTP] = "not_http",
	[POL_REASON_BAD_URI] = "bad_uri",
	[POL_REASON_SHARED_STATE_UNAVAILABLE] = "shared_state_unavailable",
	[POL_REASON_NOT_IN_CALL] = "not_in_call",
	[POL_REASON_NOT_FORWARDED] = "not_forwarded",
	[POL_REASON_CANCELLED] = "cancelled",
	[POL_REASON_NO_ANSWER] = "no_answer",
	[POL_REASON_NO_STREAM] = "no_stream",
	[POL_REASON_OUTCOME_UNKNOWN] = "outcome_unknown",
};

const char *
pol_reason_name(enum pol_reason r)
{
	/* Unsigned: a value below zero cast into the enum is out too. */
	if ((unsigned)r >= POL_REASON__COUNT || names[r] == NULL)
		return "unknown_reason";
	return names[r];
}
