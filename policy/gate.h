/* The cost gate's arithmetic: what the GPU times of a chunk's samples (its ops run eagerly in a
 * burst, its graph) and its host's pace of submitting it decide. Whether another eager sample
 * could still change the verdict, and the verdict itself: the graph stays, or the chunk is kept
 * eager because its graph is slower on the GPU than the launch time it saves (cost_gate) or
 * makes a wait right after it end later (exposed). Pure arithmetic on a chunk's figures; the
 * engine takes the samples and acts on the verdict. Internal to policy/. */
#ifndef CG_POLICY_GATE_H
#define CG_POLICY_GATE_H

#include <stdbool.h>
#include <stdint.h>
#include "policy/chunk.h"
#include "policy/reason.h"

/* What the host pays (us): one eager op's launch, one graph launch; and the warmup, which
 * decides how many eager samples learning gives. */
struct cg_gate_costs {
	double launch_host_us, graph_launch_host_us;
	uint32_t warmup;
};

/* Graph runs timed per chunk, and the runs whose submission span (first deferred op to the
 * graph's launch) is kept: what a wait after the chunk costs depends on how fast the host
 * submits it. */
#define CG_TIMING_SAMPLES 3
#define CG_SPAN_RUNS 6

/* Eager samples the gate needs before it acts. */
uint32_t cg_gate_eager_samples(const struct cg_gate_costs *c);
/* Host launch time (us) that `graph_launches` graph launches running `ops` ops save. */
double cg_gate_launch_saved_us(const struct cg_gate_costs *c, double ops, double graph_launches);
/* Host launch time the chunk's graph saves at each run. */
double cg_gate_saved_us(const struct cg_gate_costs *c, const struct cg_chunk *t);
/* Could an eager sample still lead the gate to act? */
bool cg_gate_plausible(const struct cg_gate_costs *c, const struct cg_chunk *t);
/* The eager ops' GPU time by their samples (0: none), shifted by what the graph's time changed
 * since they were taken, once it was timed afresh. */
double cg_gate_eager_us(const struct cg_chunk *t);
/* The mean span of submitting the chunk's deferred runs (us; 0 before one was measured). */
double cg_gate_span_us(const struct cg_chunk *t);

struct cg_gate_verdict {
	enum cg_reason reason;  /* CG_R_NONE (the graph stays), CG_R_COST_GATE or CG_R_EXPOSED */
	bool settled;           /* no later sample can change it: the chunk needs no more */
	/* the least of the samples (us): the graph's GPU time, the eager ops' (0 without a
	 * sample); the launch time saved; how much later a wait right after it ends deferred,
	 * and the share of its runs waited for (both 0 where no run was waited for) */
	double graph_us, eager_us, saved_us, exposure_us, waited_share;
};
/* The verdict on a chunk with at least one graph sample. */
void cg_gate_judge(const struct cg_gate_costs *c, const struct cg_chunk *t,
                   struct cg_gate_verdict *v);

#endif
