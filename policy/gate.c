/* The cost gate's arithmetic (gate.h). */
#include "policy/gate.h"

/* A graph slower than its eager ops, or exposed to a wait, by less than this much (us, or this
 * share of its GPU time) is within the samples' noise: it keeps its graph, the same way in
 * every run (a one-op chunk's graph saves 0.9 us; its samples differ by about that). */
#define CG_TIMING_NOISE_US 1.0
#define CG_TIMING_NOISE 0.03

static double max_d(double a, double b)
{
	return a > b ? a : b;
}

/* How far apart samples of the same work on the GPU may be, for work of `us`. */
static double noise_us(double us)
{
	return max_d(CG_TIMING_NOISE_US, CG_TIMING_NOISE * us);
}

/* A graph runs the same kernels as its eager ops: on the GPU it can be slower than they are
 * only by what comes between them, per node, a few microseconds (on the H200: one node 3.1 us
 * over its kernel; 12 us at the most seen, timed while eight threads' streams ran alongside,
 * whose work a stream's events time as well). */
#define CG_NODE_EXCESS_US 16.0

/* One, and two where a longer warmup gives them: the sightings between the cold first and the
 * one that earns the graph (which runs as it) are timed for free (none at the default warmup 2,
 * one at 3); the others cost a replay each, and only where the gate could act. A burst of the
 * same ops timed on the GPU differs little from one run to the next. */
uint32_t cg_gate_eager_samples(const struct cg_gate_costs *c)
{
	return c->warmup >= 3 ? 2 : 1;
}

double cg_gate_launch_saved_us(const struct cg_gate_costs *c, double ops, double graph_launches)
{
	double saved = ops * c->launch_host_us - graph_launches * c->graph_launch_host_us;
	return saved > 0 ? saved : 0;
}

double cg_gate_saved_us(const struct cg_gate_costs *c, const struct cg_chunk *t)
{
	return cg_gate_launch_saved_us(c, t->n, 1);
}

/* It acts on a graph slower than its eager ops by more than the host time it saves and the
 * noise, so not on one that cannot be that much slower: one whose GPU time is no more than
 * those two (it judges the least of the graph's samples, two at least: a graph of tiny kernels,
 * as fast on the GPU as its ops launched in a burst and a few microseconds under its saving,
 * needs no eager run, though one sample alone may come out over it, by its noise), nor one
 * with too few nodes to fall behind by that much (a few ops around a kernel of milliseconds,
 * whose noise is tens of microseconds).
 * Nor once a pair of samples shows the graph slower by less than half the saving: GPU times of
 * the same ops read back by events differ by far less from one run to the next, and every
 * further eager sample costs the replay of an occurrence. */
bool cg_gate_plausible(const struct cg_gate_costs *c, const struct cg_chunk *t)
{
	double saved = cg_gate_saved_us(c, t);
	double most = t->n * CG_NODE_EXCESS_US;
	if (t->graph_us < most)
		most = t->graph_us;
	if (t->graph_n < 2 || most <= saved + noise_us(t->graph_us))
		return false;
	return !t->eager_n || t->graph_us - t->eager_us >= saved / 2;
}

double cg_gate_span_us(const struct cg_chunk *t)
{
	return t->span_n ? t->span_us / t->span_n : 0;
}

/* The eager ops' GPU time (0: no sample). Once the graph was timed afresh (samples.c: the same
 * ops may have come to take longer), the eager samples, taken before, stand for the work as it
 * grew by what the graph's time grew: both run the same kernels, and the graph differs from
 * them by what comes between the kernels, which the work's growth does not change. */
double cg_gate_eager_us(const struct cg_chunk *t)
{
	if (!t->eager_n)
		return 0;
	double e = t->eager_us + (t->retimes ? t->graph_us - t->graph_before_us : 0);
	return e > 0 ? e : 0;
}

/* How much later a wait right after the chunk ends deferred than eager (us; below 0: sooner).
 * Deferred, the chunk's graph starts on the GPU once its last op is submitted: its whole GPU
 * time g comes after the host's span S of submitting it (measured) and the graph launch G.
 * Eager, each op starts as it is launched (L each): the GPU is done at the later of the last
 * launch plus about the last op's share of g (a host slower than the GPU: a Python loop) and
 * the first launch plus the ops' GPU time back to back (a GPU slower than the host: its eager
 * sample's time, else taken as the graph's). So a host that submits slowly loses about g less
 * the launch time saved; a host that keeps ahead of the GPU loses at most S + G - L, what
 * holding the first op back until the last costs. */
static double exposure_us(const struct cg_gate_costs *c, const struct cg_chunk *t, double e)
{
	double g = t->graph_us, n = t->n;
	double gpu = t->eager_n ? e : g;
	double span = cg_gate_span_us(t);
	double L = c->launch_host_us, G = c->graph_launch_host_us;
	double eager_done = max_d(span + n * L + g / n, L + gpu);
	return span + G + g - eager_done;
}

void cg_gate_judge(const struct cg_gate_costs *c, const struct cg_chunk *t,
                   struct cg_gate_verdict *v)
{
	double saved = cg_gate_saved_us(c, t);
	double g = t->graph_us, e = cg_gate_eager_us(t);
	*v = (struct cg_gate_verdict){ .reason = CG_R_NONE, .graph_us = g, .eager_us = e,
	                               .saved_us = saved };
	/* A graph under half the host time it saves can neither be slower than its eager ops by
	 * more than that saving, nor exposed: no sample can come that the gate would act on but
	 * one far off this, so the runs that would show it stop here (until its graph is timed
	 * afresh, samples.c: the work may grow). */
	v->settled = g <= saved / 2;
	double noise = noise_us(g);
	if (t->eager_n >= cg_gate_eager_samples(c) && t->graph_n >= CG_TIMING_SAMPLES &&
	    g - e - noise > saved)
		v->reason = CG_R_COST_GATE;
	/* A chunk the host then waits for (.item(), a sync): paid where the host waits, the saving
	 * at every run (a chunk waited for at one run in ten, a copy to the host every 10 steps,
	 * pays a tenth of its exposure; the runs of its learning samples came before its graph,
	 * where waits are not counted). */
	else if (t->graph_n >= CG_TIMING_SAMPLES && t->waits) {
		uint64_t runs = t->launched + t->timed_eager - t->learn_samples;
		double share = runs > t->waits ? (double)t->waits / (double)runs : 1.0;
		v->exposure_us = exposure_us(c, t, e);
		v->waited_share = share;
		if (share * (v->exposure_us - noise) > (1 - share) * saved)
			v->reason = CG_R_EXPOSED;
	}
}
