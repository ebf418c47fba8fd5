/* Communicators of the fake NCCL: unique ids naming a POSIX shared-memory segment, ranks (one
 * process each) attaching to it in any order, the exchange every collective and split is built
 * on, splits, abort and the queries. The segment is unlinked as soon as every rank has mapped
 * it, so a killed rank (the stall tests) leaves nothing behind in /dev/shm. */
#define _GNU_SOURCE
#include "fakenccl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ID_PREFIX "/fakenccl-"
#define CONFIG_MAGIC 0xcafebeef /* NCCL_CONFIG_INITIALIZER's */

struct fn_seg {
	atomic_int nranks;   /* set by the first rank to attach */
	atomic_int attached;
	atomic_int aborted;  /* some rank aborted: the others' calls fail with ncclRemoteError */
};

/* Per rank: the last sequence number posted (+1) and, per parity of the sequence number, the
 * shape and the data. Two buffers suffice: a rank posts n+2 only after finishing n+1, which
 * needs every rank's post of n+1, which each makes after reading everything of n. */
struct fn_slot {
	atomic_ullong posted;
	atomic_int joined;
	struct fn_post post[2];
};

#define ALIGN64(n) (((n) + 63) & ~(size_t)63)
#define SLOT_STRIDE (ALIGN64(sizeof(struct fn_slot)) + 2 * FN_SLOT_BYTES)

static struct fn_slot *slot(const struct ncclComm *c, int r)
{
	return (struct fn_slot *)((char *)c->seg + ALIGN64(sizeof(struct fn_seg)) + r * SLOT_STRIDE);
}

static char *slot_data(const struct ncclComm *c, int r, unsigned long long seq)
{
	return (char *)slot(c, r) + ALIGN64(sizeof(struct fn_slot)) + (seq & 1) * FN_SLOT_BYTES;
}

static atomic_int first_rank = -1;

int fn_process_rank(void)
{
	const char *e = getenv("RANK");
	return e && *e ? atoi(e) : atomic_load(&first_rank);
}

static long timeout_ms(void)
{
	const char *e = getenv("FAKENCCL_TIMEOUT_MS");
	long v = e && *e ? strtol(e, NULL, 10) : 0;
	return v > 0 ? v : 20000;
}

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Polls with growing sleeps (20 us to 1 ms): waits are short when peers are there. */
static void nap(long *ns)
{
	nanosleep(&(struct timespec){ 0, *ns }, NULL);
	if (*ns < 1000000)
		*ns *= 2;
}

ncclResult_t fn_fail(struct ncclComm *c, ncclResult_t r, const char *why)
{
	int none = ncclSuccess;
	if (atomic_compare_exchange_strong(&c->error, &none, (int)r))
		fprintf(stderr, "fakenccl: rank %d of %d (%s): %s\n", c->rank, c->nranks,
		        c->name[0] ? c->name : "one rank", why);
	return r;
}

ncclResult_t fn_exchange(struct ncclComm *c, const struct fn_post *p, const void *data,
                         const void *in[])
{
	if (atomic_load(&c->error) != ncclSuccess)
		return (ncclResult_t)atomic_load(&c->error);
	unsigned long long seq = atomic_fetch_add(&c->seq, 1);
	struct fn_slot *me = slot(c, c->rank);
	me->post[seq & 1] = *p;
	if (p->bytes)
		memcpy(slot_data(c, c->rank, seq), data, p->bytes);
	atomic_store_explicit(&me->posted, seq + 1, memory_order_release);

	double deadline = now_ms() + timeout_ms();
	long ns = 20000;
	char why[160];
	for (int r = 0; r < c->nranks;) {
		/* An abort anywhere fails the exchange even if every rank has posted: a rank that
		 * gave up on it must not be counted as having taken part. */
		if (atomic_load(&c->aborted))
			return fn_fail(c, ncclSystemError, "aborted while waiting for peers");
		if (atomic_load(&c->seg->aborted))
			return fn_fail(c, ncclRemoteError, "a peer aborted the communicator");
		struct fn_slot *s = slot(c, r);
		if (atomic_load_explicit(&s->posted, memory_order_acquire) > seq) {
			const struct fn_post *q = &s->post[seq & 1];
			if (q->kind != p->kind || q->dtype != p->dtype || q->op != p->op ||
			    q->root != p->root || q->count != p->count) {
				snprintf(why, sizeof(why), "exchange %llu differs on rank %d (kind %d/%d, count %zu/%zu)",
				         seq, r, p->kind, q->kind, p->count, q->count);
				return fn_fail(c, ncclInvalidUsage, why);
			}
			in[r] = slot_data(c, r, seq);
			r++;
			continue;
		}
		if (now_ms() > deadline) {
			snprintf(why, sizeof(why), "rank %d did not join exchange %llu within FAKENCCL_TIMEOUT_MS=%ld",
			         r, seq, timeout_ms());
			return fn_fail(c, ncclSystemError, why);
		}
		nap(&ns);
	}
	return ncclSuccess;
}

/* --- communicators ------------------------------------------------------------------------- */
static ncclResult_t comm_new(struct ncclComm **out, int nranks, int rank)
{
	if (!out || nranks < 1 || nranks > FN_MAX_RANKS || rank < 0 || rank >= nranks)
		return ncclInvalidArgument;
	ncclResult_t r = fn_driver_ready();
	if (r != ncclSuccess)
		return r;
	fn_read_settings();
	if (!(*out = calloc(1, sizeof(**out))))
		return ncclSystemError;
	(*out)->rank = rank;
	(*out)->nranks = nranks;
	return ncclSuccess;
}

static void comm_free(struct ncclComm *c)
{
	if (c->seg)
		munmap(c->seg, c->seg_bytes);
	fn_calls_free(c);
	free(c);
}

/* Maps the segment `name` (created by whichever rank comes first), claims the rank's slot and
 * waits for all ranks, as NCCL's init does. */
static ncclResult_t attach(struct ncclComm *c, const char *name)
{
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->seg_bytes = ALIGN64(sizeof(struct fn_seg)) + (size_t)c->nranks * SLOT_STRIDE;
	int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 ||
	    (st.st_size == 0 && ftruncate(fd, (off_t)c->seg_bytes) != 0)) {
		if (fd >= 0)
			close(fd);
		return fn_fail(c, ncclSystemError, strerror(errno));
	}
	if (st.st_size != 0 && (size_t)st.st_size != c->seg_bytes) {
		close(fd);
		return fn_fail(c, ncclInvalidArgument, "nranks differs from the other ranks'");
	}
	void *m = mmap(NULL, c->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return fn_fail(c, ncclSystemError, strerror(errno));
	c->seg = m;
	int seen = 0, unclaimed = 0;
	if (!atomic_compare_exchange_strong(&c->seg->nranks, &seen, c->nranks) && seen != c->nranks)
		return fn_fail(c, ncclInvalidArgument, "nranks differs from the other ranks'");
	if (!atomic_compare_exchange_strong(&slot(c, c->rank)->joined, &unclaimed, 1))
		return fn_fail(c, ncclInvalidUsage, "another process already has this rank");
	atomic_fetch_add(&c->seg->attached, 1);
	double deadline = now_ms() + timeout_ms();
	long ns = 20000;
	while (atomic_load(&c->seg->attached) < c->nranks) {
		if (now_ms() > deadline) {
			shm_unlink(name);
			return fn_fail(c, ncclSystemError, "not all ranks joined within FAKENCCL_TIMEOUT_MS");
		}
		nap(&ns);
	}
	shm_unlink(name); /* every rank has it mapped; the first unlink wins, later ones fail */
	return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *comm, int nranks, const ncclUniqueId *id, int rank)
{
	if (!comm || memchr(id->internal, 0, sizeof(id->internal)) == NULL ||
	    strncmp(id->internal, ID_PREFIX, strlen(ID_PREFIX)) != 0)
		return ncclInvalidArgument;
	struct ncclComm *c;
	ncclResult_t r = comm_new(&c, nranks, rank);
	if (r != ncclSuccess)
		return r;
	if (nranks > 1 && (r = attach(c, id->internal)) != ncclSuccess) {
		comm_free(c);
		return r;
	}
	if (nranks > 1) {
		int none = -1;
		atomic_compare_exchange_strong(&first_rank, &none, rank);
	}
	*comm = c;
	return ncclSuccess;
}

static int config_ok(const ncclConfig_t *config)
{
	return !config || config->magic == CONFIG_MAGIC;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
	static atomic_uint counter;
	if (!uniqueId)
		return ncclInvalidArgument;
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	memset(uniqueId, 0, sizeof(*uniqueId));
	snprintf(uniqueId->internal, sizeof(uniqueId->internal), ID_PREFIX "%d-%u-%llx", (int)getpid(),
	         atomic_fetch_add(&counter, 1), (unsigned long long)t.tv_sec * 1000000000ULL + t.tv_nsec);
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
	return init_rank(comm, nranks, &commId, rank);
}

/* config->blocking is accepted but every call blocks (ncclInProgress is never returned). */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
	return config_ok(config) ? init_rank(comm, nranks, &commId, rank) : ncclInvalidArgument;
}

/* One process drives one device here, so only one device. */
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist)
{
	if (ndev != 1 || (devlist && devlist[0] != 0))
		return ncclInvalidArgument;
	return comm_new(comm, 1, 0);
}

/* Collective over comm: every rank posts (color, key); the ranks of one color form a new
 * communicator ordered by (key, old rank), in a segment named after the parent's. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
	if (!comm || !newcomm || (color < 0 && color != NCCL_SPLIT_NOCOLOR) || !config_ok(config))
		return ncclInvalidArgument;
	*newcomm = NULL;
	unsigned split = comm->splits++;
	if (comm->nranks == 1)
		return color == NCCL_SPLIT_NOCOLOR ? ncclSuccess : comm_new(newcomm, 1, 0);
	atomic_fetch_add(&comm->busy, 1);
	int mine[2] = { color, key };
	const void *in[FN_MAX_RANKS];
	struct fn_post p = { .kind = FN_SPLIT, .count = 2, .bytes = sizeof(mine) };
	ncclResult_t r = fn_exchange(comm, &p, mine, in);
	int n = 0, rank = 0;
	for (int i = 0; r == ncclSuccess && i < comm->nranks; i++) {
		const int *o = in[i];
		if (o[0] != color)
			continue;
		n++;
		if (o[1] < key || (o[1] == key && i < comm->rank))
			rank++;
	}
	atomic_fetch_sub(&comm->busy, 1);
	if (r != ncclSuccess || color == NCCL_SPLIT_NOCOLOR)
		return r;
	struct ncclComm *c;
	if ((r = comm_new(&c, n, rank)) != ncclSuccess)
		return r;
	char name[sizeof(c->name)];
	if (n > 1) {
		if (snprintf(name, sizeof(name), "%s.%u.%d", comm->name, split, color) >= (int)sizeof(name))
			r = fn_fail(c, ncclInternalError, "split nested too deep for a segment name");
		else
			r = attach(c, name);
	}
	if (r != ncclSuccess) {
		comm_free(c);
		return r;
	}
	*newcomm = c;
	return ncclSuccess;
}

/* Marks the comm aborted here and for the peers, waits until no thread of this process is
 * still inside a call on it (the aborted flag makes blocked ones return), then frees it. */
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	if (!comm)
		return ncclSuccess;
	atomic_store(&comm->aborted, 1);
	if (comm->seg)
		atomic_store(&comm->seg->aborted, 1);
	long ns = 20000;
	while (atomic_load(&comm->busy) > 0)
		nap(&ns);
	comm_free(comm);
	return ncclSuccess;
}

/* Every collective has completed when its call returns: nothing to flush. */
ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
	return comm ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	if (comm)
		comm_free(comm);
	return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
	if (!comm || !asyncError)
		return ncclInvalidArgument;
	*asyncError = (ncclResult_t)atomic_load(&comm->error);
	return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
	if (!comm || !count)
		return ncclInvalidArgument;
	*count = comm->nranks;
	return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
	if (!comm || !rank)
		return ncclInvalidArgument;
	*rank = comm->rank;
	return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device)
{
	if (!comm || !device)
		return ncclInvalidArgument;
	*device = 0;
	return ncclSuccess;
}
