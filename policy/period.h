/* The program's step, found in the sequence of what it asks of the driver: each launch (its
 * kernel) and each boundary (its kind) is an event, weighed by the launches it stands for. Used
 * by `cugraft profile` so that a step with several syncs, with none, or made of layers that
 * repeat inside it, counts once. */
#ifndef CG_POLICY_PERIOD_H
#define CG_POLICY_PERIOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cg_period {
	size_t period;        /* events per iteration */
	size_t first;         /* t[first, first + tokens) is `iterations` whole iterations */
	size_t tokens;
	size_t iterations;
	size_t last;          /* where the last of them starts */
	size_t disturbances;  /* places in that stretch where the pattern broke (noise) */
	uint64_t launches;    /* the weight of one iteration */
};

/* Finds the program's step in t[0, n): the period p (1..max_period) of stretches that repeat
 * at least three times, between a prologue and an epilogue. weight[i] (NULL: all 0) is what
 * event i stands for, the launches it made.
 *
 * Noise is a place where the pattern breaks that carries at most 2 launches more or less, or
 * a sixteenth of one iteration's (a kernel another shape picks, a loss read every 10 steps),
 * at most once per 5 iterations where it inserts or leaves out launches. At any rate: where it
 * inserts or leaves out boundaries alone (copies and event records a timing decides), and
 * where it replaces events by as many of their kind, a launch by a launch, as long as an
 * iteration's replaced launches are within noise (a kernel that data or an address's alignment
 * picks is a variant of the step; halves of a step that really differ differ in more). A
 * break that carries more is structure: layers that repeat 12 times in a decoding step are no
 * step, since the head's launches break them every token.
 *
 * Where several periods describe the same stretches of the sequence, the smallest whose
 * pattern explains (matches) nearly the launches of the one that explains the most wins, and
 * the launches it leaves unexplained per iteration of the other must be noise: twice the
 * period fits as well as the period itself; a step's sub-period (a parameter's gradient, a
 * layer) leaves the rest of the step unexplained. Stretches of one pattern (the training steps
 * between validations) count together. Among patterns of other stretches, the one explaining
 * the most launches is the loop, unless a pattern that starts after it ends carries at least
 * an eighth of that (a compile or autotuning phase before the loop can launch more: the loop
 * is what runs until the program stops); among patterns taking turns with it (training and
 * validation), the one whose iteration launches the most. Returns false: no period (or no
 * memory). */
bool cg_period_find(const uint32_t *t, const uint32_t *weight, size_t n, size_t max_period,
                    struct cg_period *out);

/* Folds runs of equal events in t[0, n) into one event each, in place: a run of m > 1 events
 * becomes one event of a key made of the event and m, weighing their sum (1000 launches of one
 * kernel and a sync are an iteration of two events, not 1000 iterations of one launch). Where
 * start is not NULL, start[k] is the index in the original sequence of run k's first event.
 * Returns the new length. */
size_t cg_period_runs(uint32_t *t, uint32_t *weight, size_t n, uint32_t *start);

#endif
