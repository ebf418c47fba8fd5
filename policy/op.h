/* An op: one stream-ordered request (kernel launch, async memset, async device copy) as the
 * policy engine sees it. The engine never interprets the bytes: the shim packs whatever must be
 * equal for a graph node to be reused into `sig`, and the parameter bytes into `args`. */
#ifndef CG_POLICY_OP_H
#define CG_POLICY_OP_H

#include <stdint.h>
#include <stddef.h>

struct cg_op {
	const void *sig;   /* signature bytes: function, attributes, layout, kind. Equal
	                      signatures are confirmed with memcmp. */
	const void *args;  /* argument bytes (a kernel's launch shape and packed parameters, memset
	                      value, ...) */
	uint32_t sig_len;
	uint32_t args_len;
	uint64_t hash;     /* never 0 when given; equal sigs must have equal hashes. Chunks are cut
	                      where it says, so the shim hashes what is the same in every process
	                      (a kernel's name, not its handle). When 0 the engine computes
	                      cg_sig_hash(sig, sig_len). */
	const char *name;  /* kernel name for the report, or NULL (borrowed: the engine keeps it in
	                      its templates, so it must stay valid while the stream lives) */
};

/* 64-bit hash of signature bytes; never 0. Fast for 32..256 byte inputs. */
uint64_t cg_sig_hash(const void *bytes, size_t len);

#endif
