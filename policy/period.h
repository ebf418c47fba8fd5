/* The period of a token sequence: the program's iteration, found in the sequence of its
 * boundaries (a token is a boundary kind and the launches since the previous boundary). Used by
 * `cugraft profile` so that an iteration with several host syncs counts once. */
#ifndef CG_POLICY_PERIOD_H
#define CG_POLICY_PERIOD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cg_period {
	size_t period;      /* tokens per iteration */
	size_t first;       /* t[first, first + tokens) is the loop: `iterations` iterations */
	size_t tokens;
	size_t iterations;
	size_t disturbances;  /* places in that stretch where the pattern broke (noise) */
};

/* Finds the program's iteration in t[0, n): the period p (1..max_period) of a stretch that
 * repeats at least three times, between a prologue and an epilogue (start-up and teardown
 * boundaries). weight[i] (NULL: all equal) is what token i stands for, the launches since the
 * previous boundary. The loop is the last stretch that carries at least an eighth of the
 * launches of the heaviest: a compile or autotuning phase before it may launch more (thousands
 * of tiny benchmark launches); a run of teardown frees after it carries too little, and so does
 * a final evaluation unless it launches more than that eighth (then it is taken for the loop). The pattern may break (a token inserted or changed) at most once per 5
 * iterations: a loop that reads its loss every 10 steps has a period of one step, while a run
 * of foreign tokens ends the stretch. The price: a step made of one token repeated 4 times or
 * more and another one (gradient accumulation with a sync per micro-step) counts its
 * micro-steps as iterations; per-iteration ratios, such as the floor, are the same either
 * way. The smallest period whose stretch carries nearly the most launches wins (twice the
 * period fits as well as the period itself). false: no period (or no memory). */
bool cg_period_find(const uint32_t *t, const uint32_t *weight, size_t n, size_t max_period,
                    struct cg_period *out);

#endif
