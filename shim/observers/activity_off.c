/* Profile mode without CUPTI headers at build time: no GPU busy time, and the report says so. */
#include "activity.h"
#include "busy.h"

bool cg_activity_start(cg_clock_fn ours, cg_clock_fn *clock, const char **why)
{
	*clock = ours;
	*why = "cugraft was built without CUPTI";
	return false;
}

void cg_activity_flush(void)
{
}

bool cg_activity_pause(void)
{
	return false;
}

bool cg_activity_resume(void)
{
	return false;
}

bool cg_activity_running(void)
{
	return false;
}

void cg_activity_stats(struct cg_activity_stats *st)
{
	*st = (struct cg_activity_stats){ 0, 0, 0 };
}

uint64_t cg_activity_busy(uint64_t t0, uint64_t t1, int *dev)
{
	(void)t0;
	(void)t1;
	*dev = -1;
	return 0;
}

uint64_t cg_activity_idle_in(struct cg_span *host, size_t nh, uint64_t t0, uint64_t t1, int dev)
{
	return cg_busy_idle_in(NULL, 0, host, nh, dev, t0, t1);
}
