/* Internal interface of the CPU fake NCCL: communicators whose ranks are processes meeting in a
 * shared-memory segment (comm.c), and the collectives that run on them (fakenccl.c). One process
 * per rank, as with one GPU per process; a one-rank communicator has no segment. */
#pragma once
#include <stdatomic.h>
#include <stddef.h>

/* nccl.h declares ncclGroupStart() and ncclGroupEnd() without a prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

#define FN_MAX_RANKS 64
/* Bytes one rank can contribute to one collective (the segment is sparse: only what is written
 * takes memory). */
#define FN_SLOT_BYTES ((size_t)4 << 20)

enum fn_kind { FN_ALLREDUCE, FN_BROADCAST, FN_REDUCE, FN_ALLGATHER, FN_REDUCESCATTER, FN_SPLIT };

/* The shape of one rank's contribution to an exchange: everything but `bytes` must be equal
 * on all ranks (NCCL requires the same calls in the same order; a difference is a program bug
 * that the fake reports instead of computing garbage). */
struct fn_post {
	int kind, dtype, op, root;
	size_t count, bytes;
};

struct fn_seg;
struct fn_call;

struct ncclComm {
	int rank, nranks;
	struct fn_seg *seg; /* NULL for one rank */
	size_t seg_bytes;
	char name[NCCL_UNIQUE_ID_BYTES]; /* the segment's shm name; split names derive from it */
	atomic_ullong seq;               /* exchanges done: the same number on every rank */
	unsigned splits;                 /* ncclCommSplit calls, for the children's names */
	atomic_int aborted;              /* ncclCommAbort in this process: blocked calls return */
	atomic_int busy;                 /* threads inside a call or an execution on this comm */
	atomic_int error;                /* first failure (ncclResult_t): the comm is broken */
	struct fn_call *calls;           /* interned collectives (fakenccl.c) */
};

/* Posts this rank's contribution `data` (p->bytes) to the comm's next exchange and waits, at
 * most FAKENCCL_TIMEOUT_MS, for every rank's; in[r] then points at rank r's data until this
 * rank's next exchange on the comm. A failure breaks the comm (comm->error). */
ncclResult_t fn_exchange(struct ncclComm *c, const struct fn_post *p, const void *data,
                         const void *in[]);
/* Records the first failure of the comm and says why on stderr; returns r. */
ncclResult_t fn_fail(struct ncclComm *c, ncclResult_t r, const char *why);

/* The collectives' half (fakenccl.c): the driver as NCCL reaches it, and a comm's records. */
ncclResult_t fn_driver_ready(void);
/* At each communicator's creation, where NCCL reads its settings: notes NCCL_GRAPH_REGISTER. */
void fn_read_settings(void);
void fn_calls_free(struct ncclComm *c);

/* This process's rank for the fault knobs and the stats file: $RANK, else its rank in the
 * first multi-rank communicator it joined, else -1. */
int fn_process_rank(void);
