/* Names and hints of the fallback reasons, expanded from the one list in reason.h. */
#include "policy/reason.h"

static const char *const reason_names[CG_R_COUNT] = {
#define CG_REASON_NAME(id, name, hint) [CG_R_##id] = name,
	CG_REASONS(CG_REASON_NAME)
#undef CG_REASON_NAME
};

static const char *const reason_hints[CG_R_COUNT] = {
#define CG_REASON_HINT(id, name, hint) [CG_R_##id] = hint,
	CG_REASONS(CG_REASON_HINT)
#undef CG_REASON_HINT
};

const char *cg_reason_name(enum cg_reason r)
{
	return (unsigned)r < CG_R_COUNT ? reason_names[r] : "invalid";
}

const char *cg_reason_hint(enum cg_reason r)
{
	return (unsigned)r < CG_R_COUNT ? reason_hints[r] : "";
}
