/* What the shim records while the program runs (events.h): engine events as report lines (first
 * occurrences, rate-limited), boundaries and bypassed ops by reason, the devices in use. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shim/base/backtrace.h"
#include "shim/loader/counts.h"
#include "shim/loader/driver.h"
#include "events.h"
#include "shim/observers/floor.h"
#include "shim/base/json.h"
#include "nvtx.h"
#include "shim/base/options.h"
#include "shim/base/report.h"
#include "shim/base/shim.h"
#include "shim/base/sig.h"
#include "policy/control.h"

static const char *kind_name(uint32_t k)
{
	switch (k) {
	case CG_K_KERNEL: return "kernel";
	case CG_K_MEMSET8: return "memset8";
	case CG_K_MEMSET32: return "memset32";
	case CG_K_COPY: return "copy";
	}
	return "?";
}

static void json_op(struct cg_json *j, const char *key, const struct cg_op *op)
{
	if (!op || op->sig_len < offsetof(struct cg_sig, attrs))
		return;
	struct cg_sig copy;
	const struct cg_sig *s = cg_sig_read(&copy, op->sig, op->sig_len);
	cg_json_obj(j, key);
	cg_json_str(j, "kind", kind_name(s->kind));
	if (op->name)
		cg_json_str(j, "kernel", op->name);
	if (s->kind == CG_K_KERNEL && op->args_len >= CG_ARGS_PARAMS) {
		struct cg_launch_shape sh = cg_op_shape(op->args);
		char dims[96];
		snprintf(dims, sizeof(dims), "(%u,%u,%u)x(%u,%u,%u)", sh.grid[0], sh.grid[1], sh.grid[2],
		         sh.block[0], sh.block[1], sh.block[2]);
		cg_json_str(j, "launch", dims);
		cg_json_uint(j, "shared_mem", sh.shmem);
		cg_json_uint(j, "attributes", s->nattrs);
		cg_json_uint(j, "param_bytes", op->args_len - CG_ARGS_PARAMS);
	} else {
		cg_json_uint(j, s->kind == CG_K_COPY ? "bytes" : "count", cg_memop_count(op->args));
	}
	cg_json_obj_end(j);
}

/* A controller decision: one line per probe, so a user sees when and why a stream went eager
 * or back to graphs. */
static void json_decision(const struct cg_event *ev)
{
	const struct cg_control_decision *d = ev->decision;
	if (!cg_report_first("decision", 0, 64))
		return;
	struct cg_json *j = cg_json_take();
	cg_json_begin(j, "decision");
	cg_json_uint(j, "stream", ev->stream_id);  /* whose op ended the probe */
	cg_json_uint(j, "op_index", ev->op_index);
	cg_json_str(j, "decision", d->defer ? "graphs" : "eager");
	cg_json_bool(j, "changed", d->flipped);
	/* the probe favoured the other mode, not clearly: kept until the next probe agrees */
	cg_json_bool(j, "doubted", d->doubted);
	cg_json_double(j, "eager_ns_per_op", d->eager_ns);
	cg_json_double(j, "graphed_ns_per_op", d->graph_ns);
	cg_json_uint(j, "eager_epochs", d->eager_samples);
	cg_json_uint(j, "graphed_epochs", d->graph_samples);
	cg_json_uint(j, "period_intervals", d->period);
	cg_json_uint(j, "epoch_intervals", d->epoch_intervals);
	cg_json_uint(j, "stand_epochs", d->stand);
	if (cg_json_end(j))
		cg_report_emit(j);
	cg_json_give(j);
}

/* What the cost gate measured of a chunk's graph (an event's "timing_us"). */
static void json_timing(struct cg_json *j, const struct cg_chunk_cost *cost, enum cg_reason why)
{
	cg_json_obj(j, "timing_us");
	cg_json_double(j, "graph", cost->graph_us);
	if (cost->eager_us > 0)
		cg_json_double(j, "eager", cost->eager_us);
	cg_json_double(j, "launch_saved", cost->saved_us);
	cg_json_double(j, "submit_span", cost->span_us);
	if (why == CG_R_EXPOSED) {
		cg_json_double(j, "exposure", cost->exposure_us);
		cg_json_double(j, "waited_share", cost->waited_share);
	}
	cg_json_obj_end(j);
}

void cg_events_engine(void *be, const struct cg_event *ev)
{
	if (cg_nvtx_on())
		cg_nvtx_event(ev);
	if (!cg_report_active())
		return;
	if (ev->kind == CG_EV_DECISION) {
		json_decision(ev);
		return;
	}
	static const char *const names[] = {
		[CG_EV_CHUNK_ARMED] = "region", [CG_EV_GRAPH_BUILT] = "graph_built",
		[CG_EV_CHUNK_DISABLED] = "chunk_disabled", [CG_EV_FALLBACK] = "fallback",
		[CG_EV_EVICTED] = "evicted", [CG_EV_BUILD_FAILED] = "graph_failed",
	};
	const char *name = names[ev->kind];
	/* Keep long jobs' reports small: the first few of each (kind, reason) in full. */
	if (!cg_report_first(name, ev->kind == CG_EV_FALLBACK ? (uint64_t)ev->reason : 0,
	                     ev->kind == CG_EV_FALLBACK ? 4 : 64))
		return;
	struct cg_json *j = cg_json_take();
	cg_json_begin(j, name);
	cg_json_uint(j, "stream", ev->stream_id);
	cg_json_uint(j, "op_index", ev->op_index);
	if (ev->kind != CG_EV_FALLBACK) {
		cg_json_hex(j, "chunk_key", ev->chunk_key);
		cg_json_uint(j, "ops", ev->chunk_ops);
	}
	if (ev->reason != CG_R_NONE) {
		cg_json_str(j, "reason", cg_reason_name(ev->reason));
		cg_json_str(j, "hint", cg_reason_hint(ev->reason));
	}
	if (ev->detail)
		cg_json_str(j, "detail", ev->detail);
	if (ev->kind == CG_EV_GRAPH_BUILT) {  /* built on this thread just now (cuda_backend.c) */
		cg_json_double(j, "build_us", (double)cg_tls.build.ns / 1e3);
		cg_json_double(j, "capture_us", (double)cg_tls.build.capture_ns / 1e3);
	}
	if (ev->cost)
		json_timing(j, ev->cost, ev->reason);
	/* The program's call that made the engine decide; a timeout comes from the flusher. */
	if (ev->kind == CG_EV_FALLBACK && ev->reason != CG_R_TIMEOUT && cg_tls.api)
		cg_json_str(j, "api", cg_tls.api);
	if (ev->got && ev->got->name)
		cg_json_str(j, "kernel", ev->got->name);
	json_op(j, "expected", ev->expected);
	json_op(j, "got", ev->got);
	int depth = (int)cg_opt_int(CG_OPT_BACKTRACE);
	if (ev->kind == CG_EV_FALLBACK && depth > 0) {
		void *pcs[64];
		int n = cg_backtrace_capture(pcs, depth < 64 ? depth : 64, 2);
		if (n > 0) {
			cg_json_backtrace(j, "backtrace", pcs, n);
			cg_json_backtrace_where(j, "where", pcs, n);
		}
	}
	if (cg_json_end(j))
		cg_report_emit(j);
	cg_json_give(j);
}

/* The devices the program's streams live on (a process may use several: one per rank is the
 * rule, device switching happens). Written under `devices_lock`, read at exit. */
enum { MAX_DEVICES = 16 };
static struct { int ordinal; char name[96]; } devices[MAX_DEVICES];
static int n_devices;
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;

void cg_events_device(CUcontext ctx)
{
	CUdevice dev;
	cg_tls.internal++;
	/* Drivers before CUDA 13 lack the _v2: the current context's device (usually the same) */
	bool known = ctx && cg_real[CG_E_cuCtxGetDevice_v2] ?
	             CG_REAL(cuCtxGetDevice_v2)(&dev, ctx) == CUDA_SUCCESS :
	             cg_real[CG_E_cuCtxGetDevice] && CG_REAL(cuCtxGetDevice)(&dev) == CUDA_SUCCESS;
	cg_tls.internal--;
	if (!known)
		return;
	pthread_mutex_lock(&devices_lock);
	bool seen = false;
	for (int i = 0; i < n_devices; i++)
		seen = seen || devices[i].ordinal == (int)dev;
	if (!seen && n_devices < MAX_DEVICES) {
		devices[n_devices].ordinal = (int)dev;
		cg_tls.internal++;
		if (!cg_real[CG_E_cuDeviceGetName] ||
		    CG_REAL(cuDeviceGetName)(devices[n_devices].name, sizeof(devices[0].name), dev) != CUDA_SUCCESS)
			devices[n_devices].name[0] = '\0';
		cg_tls.internal--;
		n_devices++;
	}
	pthread_mutex_unlock(&devices_lock);
}

void cg_events_json_devices(struct cg_json *j)
{
	pthread_mutex_lock(&devices_lock);
	cg_json_arr(j, "devices");
	for (int i = 0; i < n_devices; i++) {
		cg_json_obj(j, NULL);
		cg_json_int(j, "ordinal", devices[i].ordinal);
		cg_json_str(j, "name", devices[i].name[0] ? devices[i].name : NULL);
		cg_json_obj_end(j);
	}
	cg_json_arr_end(j);
	pthread_mutex_unlock(&devices_lock);
}
