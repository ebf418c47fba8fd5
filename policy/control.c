/* The deferral controller (control.h). The program's time is cut into intervals at its waits
 * for the GPU (or into windows of ops when it never waits); the loop's period is found in the
 * interval lengths, and an epoch is a whole number of periods, so that every epoch holds the
 * same work. Once the stream has graphs, they run a few epochs trusted (each of their chunks
 * passed its cost gate and its exposure to waits), then epochs alternate between deferring and
 * not; eager wins only with a median time per op lower by a margin, and the winner runs for a
 * while (longer each time the same mode wins again), then both are measured again: a job's
 * phases change. A standing decision is overturned by a clear difference, or by two full probes
 * in a row, never by a few noisy epochs; the trusted graphs, by a clear difference or one full
 * probe. */
#include <string.h>
#include "policy/assert.h"
#include "policy/control.h"

/* Tuning constants, one line each (the measurements behind each value are in the commit
 * messages that set it). */
#define CG_CONTROL_NOPERIOD 16           /* intervals per epoch while no period is known */
#define CG_CONTROL_MIN_EPOCH_NS 3000000u /* shortest epoch, ns (probing costs whole epochs) */
#define CG_CONTROL_MAX_PERIODS 64        /* longest epoch, in loop periods */
#define CG_CONTROL_PERIOD_CHECK 6        /* intervals a period must repeat over to be believed */
/* Eager must beat deferral by this share of the time per op to win; in a tie the graphs stay
 * (they spare the host its launch calls, and the decision then does not follow the noise). */
#define CG_CONTROL_MARGIN 0.02
#define CG_CONTROL_CLEAR 0.67            /* graphed/eager: a win on 2 graphed, 1 eager epoch */
#define CG_CONTROL_CLEAR_EAGER 0.8       /* eager/graphed: a win on 2 epochs of each */
/* Medians closer than this share are a close call: CG_CONTROL_CLOSE_SAMPLES of each mode confirm
 * the standing decision, CG_CONTROL_SAMPLES overturn it (control.h). */
#define CG_CONTROL_CLOSE 0.03
#define CG_CONTROL_STAND_FIRST 16         /* epochs a decision stands at first, */
#define CG_CONTROL_STAND_CLEAR 64         /* after a clear win, */
#define CG_CONTROL_STAND_MAX 1024         /* and at most (doubling while the same mode wins) */
#define CG_CONTROL_PROBE_SHARE 0.01      /* the next probe's losing epochs, share of a stand */
#define CG_CONTROL_PROBE_EPOCHS 0.01     /* its eager epochs, share of the epochs held */
/* Settled graphed epochs run unmeasured before the first probe (and CG_CONTROL_TRUST_NS at
 * least): the graphs passed their chunks' tests already, and a short job never earns back a
 * probe's eager epochs. CG_CONTROL_TRUST_SLOW graphed epochs in a row, each slower than every
 * eager epoch before the graphs by CG_CONTROL_CLEAR_EAGER, end the trust at once (one alone is
 * noise in a short multi-stream program). */
#define CG_CONTROL_TRUST 16
#define CG_CONTROL_TRUST_SLOW 2
#define CG_CONTROL_UNSETTLED_MAX 3       /* epochs in a row skipped for graph builds or timing */
/* Before the first decision, CG_CONTROL_TRUST_SLOW epochs in a row in which the deferred ops
 * that ran eagerly anyway (divergences, boundaries before their chunk was complete) outnumber
 * this share of the ops replayed end the trust, or the wait for settled graphs, at once: the
 * probe measures whether deferring still pays. A run too short for the trust's time (a decode of
 * a few hundred tokens whose kernels change with the sequence's length) is then protected too.
 * A training loop whose graphs are learned wastes next to nothing (a PyTorch transformer on the
 * H100: 36 ops of 61911). */
#define CG_CONTROL_WASTE 0.125

void cg_control_init(struct cg_control *c)
{
	memset(c, 0, sizeof(*c));
	c->defer = true;
	c->window = CG_CONTROL_WINDOW;
}

void cg_control_summarize(const struct cg_control *c, struct cg_control_summary *out)
{
	*out = (struct cg_control_summary){ .defer = c->defer, .phase = c->phase,
	                                    .decisions = c->decisions, .flips = c->flips,
	                                    .last = c->last,
	                                    .trust_cut = c->slow >= CG_CONTROL_TRUST_SLOW,
	                                    .trust_cut_ns = c->slow_ns,
	                                    .eager_ref_ns = c->eager_ref,
	                                    .waste_cut = c->waste_cut };
}

/* Smallest p whose repetition explains the latest intervals, or 0. */
static uint32_t find_period(const struct cg_control *c)
{
	for (uint32_t p = 1; p <= CG_CONTROL_RING / 2; p++) {
		uint32_t span = p > CG_CONTROL_PERIOD_CHECK ? p : CG_CONTROL_PERIOD_CHECK;
		if (c->nring < (uint64_t)span + p)
			return 0;  /* longer periods need even more history */
		uint32_t i = 0;
		while (i < span && c->ring[(c->nring - 1 - i) % CG_CONTROL_RING] ==
		                   c->ring[(c->nring - 1 - i - p) % CG_CONTROL_RING])
			i++;
		if (i == span)
			return p;
	}
	return 0;
}

static void note_interval(struct cg_control *c, uint32_t ops)
{
	c->ring[c->nring % CG_CONTROL_RING] = ops;
	c->nring++;
	if (c->period && ops != c->ring[(c->nring - 1 - c->period) % CG_CONTROL_RING])
		c->period = 0;  /* the loop changed: find it again */
	if (!c->period)
		c->period = find_period(c);
	CG_ASSERT(c->period <= CG_CONTROL_RING / 2);
}

static bool epoch_complete(const struct cg_control *c, uint64_t end_ns)
{
	uint32_t p = c->period ? c->period : CG_CONTROL_NOPERIOD;
	if (c->epoch_intervals % p)
		return false;
	return c->epoch_intervals >= CG_CONTROL_MAX_PERIODS * p ||
	       end_ns - c->epoch_ns >= CG_CONTROL_MIN_EPOCH_NS;
}

static double median(const double *v, uint32_t n)
{
	double s[CG_CONTROL_SAMPLES];
	memcpy(s, v, n * sizeof(*s));
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && s[j - 1] > s[j]; j--) {
			double t = s[j];
			s[j] = s[j - 1];
			s[j - 1] = t;
		}
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double extreme(const double *v, uint32_t n, bool largest)
{
	double x = v[0];
	for (uint32_t i = 1; i < n; i++)
		if (largest ? v[i] > x : v[i] < x)
			x = v[i];
	return x;
}

static void start_probe(struct cg_control *c)
{
	CG_ASSERT(c->phase == CG_CTL_TRUST || c->phase == CG_CTL_STAND);
	c->phase = CG_CTL_PROBE;
	c->nsample[0] = c->nsample[1] = 0;
}

static void add_sample(struct cg_control *c, double per_op, uint64_t epoch_ns)
{
	uint32_t m = c->defer;
	CG_ASSERT(c->phase == CG_CTL_PROBE);
	if (c->nsample[m] < CG_CONTROL_SAMPLES) {
		c->sample[m][c->nsample[m]] = per_op;
		c->sample_ns[m][c->nsample[m]++] = epoch_ns;
	}
}

/* Epochs the winning mode must stand so that the next probe, if it goes as this one did, costs
 * at most CG_CONTROL_PROBE_SHARE of the time held: the losing epochs' time beyond what the
 * winner would have taken for their work, over the winner's time per epoch. */
static uint32_t stand_for_cost(const struct cg_control *c, bool defer)
{
	uint32_t w = defer, l = !defer;
	double win = median(c->sample[w], c->nsample[w]), excess = 0, held = 0;
	for (uint32_t i = 0; i < c->nsample[l]; i++)
		if (c->sample[l][i] > win)
			excess += (double)c->sample_ns[l][i] * (1 - win / c->sample[l][i]);
	for (uint32_t i = 0; i < c->nsample[w]; i++)
		held += (double)c->sample_ns[w][i];
	held /= c->nsample[w];
	if (held <= 0)
		return 0;
	double h = excess / (CG_CONTROL_PROBE_SHARE * held);
	return h >= CG_CONTROL_STAND_MAX ? CG_CONTROL_STAND_MAX : (uint32_t)h + 1;
}

/* May a probe that has not seen CG_CONTROL_SAMPLES epochs of each mode settle on `defer`? Only
 * where that confirms the mode in force: the last decision's, and before the first, the graphs
 * the trust ran. Deferral seen wasting brought the first probe forward and put no mode in
 * force: that probe decides on full samples either way (a growing-context decode on the H100,
 * its deferral wasting as its kernels changed with the length: in 6 runs of 300 tokens, two
 * first probes of 3+3 epochs found the graphs 6.6-7.8% slower, while 10 of the 11 probes of
 * 5+5 and 7+7 found them faster, by 1.8-9.1%; four early verdicts for eager, on 3+3 or 5+5
 * epochs, kept their runs eager for half their tokens). */
static bool confirms(const struct cg_control *c, bool defer)
{
	return c->decisions ? defer == c->last.defer : defer && !c->waste_cut;
}

/* Has the probe seen enough? Sets *defer and *clear when it has. */
static bool probe_done(const struct cg_control *c, bool *defer, bool *clear)
{
	const double *e = c->sample[0], *g = c->sample[1];
	uint32_t ne = c->nsample[0], ng = c->nsample[1];
	if (ne < 1 || ng < 2)
		return false;
	*clear = true;
	if (extreme(g, ng, true) < CG_CONTROL_CLEAR * extreme(e, ne, false)) {
		*defer = true;
		return true;
	}
	if (ne >= 2 && extreme(e, ne, true) < CG_CONTROL_CLEAR_EAGER * extreme(g, ng, false)) {
		*defer = false;
		return true;
	}
	*clear = false;
	if (ne < 3 || ng < 3)
		return false;
	double me = median(e, ne), mg = median(g, ng);
	bool full = ne >= CG_CONTROL_SAMPLES && ng >= CG_CONTROL_SAMPLES;
	bool close = mg > me * (1 - CG_CONTROL_CLOSE) && mg < me * (1 + CG_CONTROL_CLOSE);
	if (close && (ne < CG_CONTROL_CLOSE_SAMPLES || ng < CG_CONTROL_CLOSE_SAMPLES))
		return false;
	/* In a tie the graphs stay, unless deferral was seen wasting: then they must win by the
	 * margin (a growing-context decode on the H100, its graphs measured 1.1% faster per op,
	 * ran 2% slower than eager by the program's own time per token). */
	bool d = c->waste_cut ? mg < me * (1 - CG_CONTROL_MARGIN) : !(me < mg * (1 - CG_CONTROL_MARGIN));
	/* A few epochs of each mode may confirm the mode in force, not overturn it: a real job's
	 * epochs differ by 10-20% from one to the next. */
	if (!full && !confirms(c, d))
		return false;
	*defer = d;
	return true;
}

static void decide(struct cg_control *c, bool defer, bool clear, struct cg_control_decision *out)
{
	/* Even a full probe picks the slower mode now and then (medians of 7 noisy epochs a few
	 * percent apart): the mode changes on a clear difference, or when the next probe, soon,
	 * agrees. */
	CG_ASSERT(c->phase == CG_CTL_PROBE && c->nsample[0] >= 1 && c->nsample[1] >= 2);
	bool doubted = c->decisions && defer != c->last.defer && !clear && !c->last.doubted;
	if (doubted)
		defer = c->last.defer;
	bool flipped = c->decisions && defer != c->last.defer;
	if (doubted)
		c->stand_len = CG_CONTROL_STAND_FIRST / 2;  /* the next probe, soon, confirms or clears it */
	else if (!c->decisions || flipped)
		c->stand_len = clear ? CG_CONTROL_STAND_CLEAR : CG_CONTROL_STAND_FIRST;
	else if (c->stand_len < CG_CONTROL_STAND_MAX)
		c->stand_len *= 2;
	c->decisions++;
	c->flips += flipped;
	uint32_t cost = stand_for_cost(c, defer);
	if (defer && !doubted) {
		double h = c->nsample[0] / CG_CONTROL_PROBE_EPOCHS;
		uint32_t replay = h >= CG_CONTROL_STAND_MAX ? CG_CONTROL_STAND_MAX : (uint32_t)h;
		cost = cost > replay ? cost : replay;
	}
	c->stand = c->stand_len > cost ? c->stand_len : cost;
	c->phase = CG_CTL_STAND;
	c->defer = defer;
	c->last = (struct cg_control_decision){
		.defer = defer, .flipped = flipped,
		.eager_ns = median(c->sample[0], c->nsample[0]),
		.graph_ns = median(c->sample[1], c->nsample[1]),
		.eager_samples = c->nsample[0], .graph_samples = c->nsample[1],
		.period = c->period,
		.epoch_intervals = c->epoch_len,
		.stand = c->stand,
		.doubted = doubted,
	};
	*out = c->last;
}

/* What an epoch's end means for the mode of the next: the same, the other one (a probe goes on),
 * or a probe's decision (c->defer is set already). */
enum next { STAY, FLIP, DECIDED };

/* Before graphs: what eager costs, as far as warm-up lets it show, from epochs of whole
 * periods only (16 intervals of a 5-interval step hold other work than the next 16, at another
 * time per op), and with no graph in use: those in which graphs are launched, built and timed
 * are neither mode (a PyTorch MLP's came out 14-35% under the eager time per op its probe
 * measured later, and under the graphed one too, and ended the trust in 7 runs of 9 on graphs
 * the probe found faster than eager). True: graphs are settled, the trust begins with this
 * epoch. */
static bool wait_epoch(struct cg_control *c, double per_op, bool graphed, bool eager)
{
	if (!graphed) {
		if (eager && c->period && c->epoch_len % c->period == 0 &&
		    (!c->eager_ref || per_op < c->eager_ref))
			c->eager_ref = per_op;
		return false;
	}
	c->phase = CG_CTL_TRUST;
	c->stand = CG_CONTROL_TRUST;
	c->trusted_ns = 0;
	c->slow = 0;
	return true;
}

/* Counted in settled epochs and their time; CG_CONTROL_TRUST_SLOW in a row clearly slower than
 * the eager epochs before the graphs end the trust. */
static enum next trust_epoch(struct cg_control *c, double per_op, uint64_t epoch_ns,
                             bool graphed)
{
	if (!graphed)
		return STAY;
	if (c->eager_ref && per_op * CG_CONTROL_CLEAR_EAGER > c->eager_ref) {
		c->slow++;
		c->slow_ns = per_op;
	} else {
		c->slow = 0;
	}
	c->trusted_ns += epoch_ns;
	if (c->stand)
		c->stand--;
	if (c->slow < CG_CONTROL_TRUST_SLOW && (c->stand || c->trusted_ns < CG_CONTROL_TRUST_NS))
		return STAY;
	c->stand = 0;
	start_probe(c);
	add_sample(c, per_op, epoch_ns);
	return FLIP;
}

/* Graph builds or cost-gate timings slowed this epoch: its mode is measured again (up to
 * CG_CONTROL_UNSETTLED_MAX epochs in a row). */
static bool unsettled(struct cg_control *c, bool graphed)
{
	if (!graphed && c->unsettled < CG_CONTROL_UNSETTLED_MAX) {
		c->unsettled++;
		return true;
	}
	c->unsettled = 0;
	return false;
}

static enum next stand_epoch(struct cg_control *c, double per_op, uint64_t epoch_ns,
                             bool graphed)
{
	CG_ASSERT(c->stand >= 1);
	if (c->stand > 1 && --c->stand)
		return STAY;
	/* The probe's first sample is the last epoch stood: one that built graphs or timed them
	 * stands one epoch more. */
	if (unsettled(c, graphed))
		return STAY;
	c->stand = 0;
	start_probe(c);
	add_sample(c, per_op, epoch_ns);
	return FLIP;
}

static enum next probe_epoch(struct cg_control *c, double per_op, uint64_t epoch_ns,
                             bool graphed, struct cg_control_decision *out)
{
	if (unsettled(c, graphed))
		return STAY;
	add_sample(c, per_op, epoch_ns);
	bool defer = true, clear = false;
	if (!probe_done(c, &defer, &clear))
		return FLIP;
	decide(c, defer, clear, out);
	return DECIDED;
}

/* Before the first decision, a deferring epoch's work (`w`: since the epoch began): true once
 * CG_CONTROL_TRUST_SLOW epochs in a row wasted more than CG_CONTROL_WASTE of what they replayed. */
static bool wasteful(struct cg_control *c, const struct cg_control_work *w)
{
	if (c->decisions || !c->defer || (c->phase != CG_CTL_WAIT && c->phase != CG_CTL_TRUST))
		return false;
	if (w->replayed + w->wasted == 0 || (double)w->wasted <= CG_CONTROL_WASTE * (double)w->replayed)
		c->wasteful = 0;
	else
		c->wasteful++;
	return c->wasteful >= CG_CONTROL_TRUST_SLOW;
}

/* The evidence is in before the trust's time (wasteful): the probe starts now, this epoch
 * its first sample. */
static enum next probe_early(struct cg_control *c, double per_op, uint64_t epoch_ns)
{
	c->phase = CG_CTL_TRUST;  /* (from the wait: the probe follows the trust) */
	c->stand = 0;
	c->waste_cut = true;
	start_probe(c);
	add_sample(c, per_op, epoch_ns);
	return FLIP;
}

/* An epoch of c->defer's mode ended in the current phase: what comes next. */
static enum next phase_epoch(struct cg_control *c, double per_op, uint64_t epoch_ns,
                             bool graphed, bool eager, struct cg_control_decision *out)
{
	switch (c->phase) {
	case CG_CTL_WAIT:
		if (wait_epoch(c, per_op, graphed, eager))
			return trust_epoch(c, per_op, epoch_ns, graphed);
		return STAY;
	case CG_CTL_TRUST:
		return trust_epoch(c, per_op, epoch_ns, graphed);
	case CG_CTL_STAND:
		return stand_epoch(c, per_op, epoch_ns, graphed);
	case CG_CTL_PROBE:
		return probe_epoch(c, per_op, epoch_ns, graphed, out);
	}
	return STAY;
}

/* An epoch of c->defer's mode ended, `per_op` ns per op over `epoch_ns`; `graphed`: settled
 * throughout, `eager`: no graph in use in it, `w`: its work (control.h). */
static bool epoch_end(struct cg_control *c, double per_op, uint64_t epoch_ns, bool graphed,
                      bool eager, const struct cg_control_work *w,
                      struct cg_control_decision *out)
{
	enum next n = wasteful(c, w) ? probe_early(c, per_op, epoch_ns)
	                             : phase_epoch(c, per_op, epoch_ns, graphed, eager, out);
	if (n == FLIP)
		c->defer = !c->defer;
	return n == DECIDED;
}

bool cg_control_interval(struct cg_control *c, uint32_t ops, uint64_t end, bool waited,
                         enum cg_control_graphs graphs, const struct cg_control_work *work,
                         struct cg_control_decision *out)
{
	if (!c->epoch_ns) {
		c->epoch_ns = end;  /* the first interval only marks where measuring starts */
		c->epoch_graphed = c->epoch_eager = true;
		c->epoch_work = *work;
		return false;
	}
	if (waited) {
		uint64_t w = (uint64_t)ops * 8;
		if (w > c->window)
			c->window = w < (1u << 20) ? (uint32_t)w : (1u << 20);
	}
	note_interval(c, ops);
	c->epoch_ops += ops;
	c->epoch_graphed &= graphs == CG_CTL_SETTLED;
	c->epoch_eager &= graphs == CG_CTL_NO_GRAPHS;
	c->epoch_intervals++;
	if (!epoch_complete(c, end))
		return false;
	uint64_t epoch_ns = end - c->epoch_ns;
	double per_op = (double)epoch_ns / (double)(c->epoch_ops ? c->epoch_ops : 1);
	bool settled = c->epoch_graphed, eager = c->epoch_eager;
	c->epoch_len = c->epoch_intervals;
	c->epoch_ns = end;
	c->epoch_ops = 0;
	c->epoch_intervals = 0;
	c->epoch_graphed = c->epoch_eager = true;
	struct cg_control_work w = { work->replayed - c->epoch_work.replayed,
	                             work->wasted - c->epoch_work.wasted };
	c->epoch_work = *work;
	return epoch_end(c, per_op, epoch_ns, settled, eager, &w, out);
}
