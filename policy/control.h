/* The deferral controller: decides from the program's own wall time whether deferring its work
 * into graphs pays. One per process, not per stream: every stream's work shares the wall time
 * it measures, so per-stream controllers probing at once would measure each other. Deferral
 * saves host launch time but holds work back from the GPU until its chunk is complete; which
 * one wins depends on the program (a GPU-bound job, a Python loop that waits on every step) and
 * only measuring tells. Pure C, no clock of its own: the engine hands it the time at the points
 * it needs. Internal to policy/. */
#ifndef CG_POLICY_CONTROL_H
#define CG_POLICY_CONTROL_H

#include <stdbool.h>
#include <stdint.h>

/* Ops after which a stretch with no wait for the GPU counts as an interval of its own: loops
 * that never sync are measured in windows of this many ops (or 8 times their longest interval
 * between waits, while they wait: a window must not cut a loop that does). */
#define CG_CONTROL_WINDOW 256
#define CG_CONTROL_RING 64      /* interval lengths kept for finding the loop's period */
#define CG_CONTROL_SAMPLES 7    /* epochs of each mode compared at most, per probe */
#define CG_CONTROL_CLOSE_SAMPLES 5  /* of each, to confirm a decision in a close call */
/* Graphed time before the first probe, at least (control.c says why): a wrong trust costs under
 * a quarter of it, once. */
#define CG_CONTROL_TRUST_NS 500000000u

/* What one probe concluded. Times are the program's wall time per op over whole epochs
 * (whole loop periods, from just after one wait for the GPU to the same point later). */
struct cg_control_decision {
	bool defer;                 /* deferral stays on (graphed epochs were faster) */
	bool flipped;               /* the decision differs from the previous one */
	double eager_ns, graph_ns;  /* median ns per op, eager epochs and graphed epochs */
	uint32_t eager_samples, graph_samples;
	uint32_t period;            /* intervals per loop period (0: none found) */
	uint32_t epoch_intervals;   /* intervals per epoch */
	uint32_t stand;             /* epochs until it measures again */
	bool doubted;               /* the probe favoured the other mode, not clearly: kept until
	                               the next probe (soon) agrees */
};

enum cg_control_phase {
	CG_CTL_WAIT,   /* nothing graphed on the stream yet: nothing to decide */
	CG_CTL_PROBE,  /* epochs alternate between deferring and not, each one timed */
	CG_CTL_STAND,  /* the faster mode runs; measured again after `stand` epochs */
	CG_CTL_TRUST,  /* before the first probe: graphs run for `stand` settled epochs and a
	                  minimum time (control.c), unless
	                  two in a row are clearly slower than the eager epochs before them
	                  (control.c) */
};

/* What deferral did so far over every stream, counted since the start: ops replayed from
 * graphs, and ops deferred that then ran eagerly (a divergence, a boundary or a flush before
 * their chunk was complete, a failed launch): the cost of deferring that bought nothing. */
struct cg_control_work {
	uint64_t replayed, wasted;
};

struct cg_control {
	bool defer;                 /* the mode of the current epoch */
	enum cg_control_phase phase;
	uint32_t window;            /* ops after which an interval ends without a wait */
	/* The current epoch: from epoch_ns on, epoch_ops ops in epoch_intervals intervals. */
	uint64_t epoch_ns, epoch_ops;
	uint32_t epoch_intervals;
	uint32_t epoch_len;         /* intervals in the last complete epoch */
	bool epoch_graphed;         /* every interval of this epoch ran with graphs settled */
	bool epoch_eager;           /* none of its intervals had a graph in use */
	/* The loop's period in intervals, found in the lengths (ops) of the latest intervals. */
	uint32_t ring[CG_CONTROL_RING];
	uint64_t nring;
	uint32_t period;
	double eager_ref;           /* ns per op of the fastest epoch before any graph (0: none) */
	uint64_t trusted_ns;        /* time of the settled epochs trusted so far */
	uint32_t slow;              /* trusted epochs in a row clearly slower than eager_ref (kept
	                               after the trust: CG_CONTROL_TRUST_SLOW of them ended it) */
	double slow_ns;             /* ns per op of the latest of them */
	struct cg_control_work epoch_work;  /* the work counts when the current epoch began */
	uint32_t wasteful;          /* epochs in a row in which deferral wasted more than
	                               CG_CONTROL_WASTE of what it replayed (before any decision) */
	bool waste_cut;             /* such epochs ended the trust (or the wait) early */
	/* The current probe's epochs, ns per op and each epoch's length in ns, [0] eager,
	 * [1] graphed. */
	double sample[2][CG_CONTROL_SAMPLES];
	uint64_t sample_ns[2][CG_CONTROL_SAMPLES];
	uint32_t nsample[2];
	uint32_t unsettled;         /* unsettled epochs in a row not taken as samples */
	uint32_t stand, stand_len;      /* epochs the current phase stands (TRUST, STAND) */
	uint32_t decisions, flips;
	struct cg_control_decision last;
};

/* Where a controller stands, for the report. */
struct cg_control_summary {
	bool defer;
	enum cg_control_phase phase;
	uint32_t decisions, flips;
	struct cg_control_decision last;   /* valid when decisions > 0 */
	/* The trust ended early on clearly slower graphed epochs: the latest one's ns per op, and
	 * the fastest eager epoch's before the graphs. */
	bool trust_cut;
	double trust_cut_ns, eager_ref_ns;
	/* Deferral kept ending without a replay: the first probe came early. */
	bool waste_cut;
};

void cg_control_init(struct cg_control *c);
void cg_control_summarize(const struct cg_control *c, struct cg_control_summary *out);

/* What graphs did in an interval. */
enum cg_control_graphs {
	CG_CTL_NO_GRAPHS,  /* none launched yet: every op ran eagerly */
	CG_CTL_UNSETTLED,  /* in use, but one was built or timed for the cost gate */
	CG_CTL_SETTLED,    /* in use, none built or timed: deferring makes its difference */
};

/* An interval of `ops` ops ended at `end_ns`: `waited`, at the last of one or more waits for
 * the GPU (a sync, a copy to the host; the caller closes it at the next op, so that a wait
 * counts in the epoch whose work it waits for), else after c->window ops without a wait.
 * Probing starts after a whole epoch of settled intervals, and an epoch that was not settled is
 * measured again rather than compared; what eager costs before the graphs is measured on
 * epochs without any. Returns true when a probe just ended, with its outcome in *out; c->defer
 * says the mode from now on. */
bool cg_control_interval(struct cg_control *c, uint32_t ops, uint64_t end_ns, bool waited,
                         enum cg_control_graphs graphs, const struct cg_control_work *work,
                         struct cg_control_decision *out);

#endif
