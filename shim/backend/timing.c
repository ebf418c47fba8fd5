/* GPU timing of chunk runs, for the cost gate (timing.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "shim/context/context.h"
#include "shim/loader/driver.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/context/sstate.h"
#include "timing.h"

/* A sample is two events recorded on the program's stream around one run of a chunk. They are
 * never waited for: cuEventQuery at the stream's later boundaries and flushes and from the
 * flusher, and each sample read goes to the engine. An
 * event API failing stops all timing for good (a nicety must not cost the program anything);
 * with a program capture in progress nothing is recorded or queried (its global mode could
 * take our calls for unsafe ones). */
#define TIMING_SLOTS 16

struct timing_slot {
	CUevent ev[2];  /* begin, end: created on first use, kept for the stream's life */
	uint64_t key;
	bool graph;
};

struct cg_timing {
	struct timing_slot slot[TIMING_SLOTS]; /* a ring: one stream's events complete in order */
	uint32_t head, n;                      /* oldest sample in flight; samples in flight */
};

static atomic_bool timing_off;
static atomic_int timing_in_flight; /* over all streams: the flusher's cheap check */

/* Samples taken (+) or read or dropped (-): counted here and in cg_unsettled (shim.h), so that
 * while any is in flight a boundary after a timed chunk's launch takes the full path, which
 * reads the samples that completed, as before forwarded boundaries had a short path. */
static void in_flight(int d)
{
	atomic_fetch_add(&timing_in_flight, d);
	atomic_fetch_add(&cg_unsettled, (unsigned)d);
}

bool cg_timing_due(void)
{
	return atomic_load_explicit(&timing_in_flight, memory_order_relaxed) > 0 &&
	       !atomic_load_explicit(&timing_off, memory_order_relaxed);
}

static void timing_failed(const char *api, CUresult r)
{
	static int once;
	atomic_store(&timing_off, true);
	const char *name = cg_driver_error_name(r);
	char text[160];
	snprintf(text, sizeof(text), "%s failed (%s): GPU timing of chunks for the cost gate is off",
	         api, name);
	cg_note_once(&once, text);
}

static bool timing_possible(struct cg_sstate *s)
{
	return !atomic_load_explicit(&timing_off, memory_order_relaxed) &&
	       atomic_load(&cg_shim.captures) == 0 && !cg_ctx_dead(s->ctx);
}

bool cg_timing_begin(void *be, void *stream, uint64_t key, bool graph)
{
	struct cg_sstate *s = stream;
	/* Samples are recorded on the program's stream: a per-thread one only by its own thread. */
	if (!timing_possible(s) || (s->per_thread && !cg_stream_mine(s)))
		return false;
	if (!cg_real[CG_E_cuEventElapsedTime_v2]) { /* a driver older than CUDA 12.8 */
		atomic_store(&timing_off, true);
		return false;
	}
	if (!s->timing && !(s->timing = calloc(1, sizeof(*s->timing))))
		return false;
	struct cg_timing *t = s->timing;
	if (t->n == TIMING_SLOTS)
		return false;  /* read at the next boundary or flusher round */
	struct timing_slot *sl = &t->slot[(t->head + t->n) % TIMING_SLOTS];
	int in = cg_backend_enter(s->ctx);
	CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
	const char *api = "cuEventCreate";
	for (int i = 0; i < 2 && r == CUDA_SUCCESS; i++)
		if (!sl->ev[i])
			r = CG_REAL(cuEventCreate)(&sl->ev[i], CU_EVENT_DEFAULT);
	if (r == CUDA_SUCCESS) {
		api = "cuEventRecord";
		r = CG_REAL(cuEventRecord)(sl->ev[0], s->handle);
	}
	cg_backend_leave(in);
	if (in == CG_CTX_FAILED)
		return false;
	if (r != CUDA_SUCCESS) {
		timing_failed(api, r);
		return false;
	}
	sl->key = key;
	sl->graph = graph;
	t->n++;
	in_flight(1);
	return true;
}

void cg_timing_end(void *be, void *stream, bool ok)
{
	struct cg_sstate *s = stream;
	struct cg_timing *t = s->timing;
	struct timing_slot *sl = &t->slot[(t->head + t->n - 1) % TIMING_SLOTS];
	if (ok && timing_possible(s)) {
		int in = cg_backend_enter(s->ctx);
		CUresult r = in == CG_CTX_FAILED ? CUDA_ERROR_INVALID_CONTEXT
		           : CG_REAL(cuEventRecord)(sl->ev[1], s->handle);
		cg_backend_leave(in);
		if (r == CUDA_SUCCESS)
			return;
		if (in != CG_CTX_FAILED)
			timing_failed("cuEventRecord", r);
	}
	t->n--;  /* the newest sample: dropped */
	in_flight(-1);
}

void cg_timing_read(struct cg_sstate *s)
{
	struct cg_timing *t = s->timing;
	if (!t || !t->n || !s->eng || !timing_possible(s))
		return;
	int in = cg_backend_enter(s->ctx);
	while (in != CG_CTX_FAILED && t->n) {
		struct timing_slot *sl = &t->slot[t->head];
		/* The end event complete means the begin event is too: same stream, recorded first. */
		CUresult r = CG_REAL(cuEventQuery)(sl->ev[1]);
		if (r == CUDA_ERROR_NOT_READY)
			break;
		const char *api = "cuEventQuery";
		float ms = 0;
		if (r == CUDA_SUCCESS) {
			api = "cuEventElapsedTime";
			r = CG_REAL(cuEventElapsedTime_v2)(&ms, sl->ev[0], sl->ev[1]);
		}
		t->head = (t->head + 1) % TIMING_SLOTS;
		t->n--;
		in_flight(-1);
		if (r != CUDA_SUCCESS) {
			timing_failed(api, r);
			break;
		}
		cg_stream_timing(s->eng, sl->key, sl->graph, (double)ms * 1000.0);
	}
	cg_backend_leave(in);
}

void cg_timing_free(struct cg_sstate *s)
{
	struct cg_timing *t = s->timing;
	if (!t)
		return;
	if (!cg_ctx_dead(s->ctx)) {
		int in = cg_backend_enter(s->ctx);
		for (int i = 0; in != CG_CTX_FAILED && i < TIMING_SLOTS; i++)
			for (int j = 0; j < 2; j++)
				if (t->slot[i].ev[j])
					CG_REAL(cuEventDestroy_v2)(t->slot[i].ev[j]);
		cg_backend_leave(in);
	}
	in_flight(-(int)t->n);
	free(t);
	s->timing = NULL;
}
