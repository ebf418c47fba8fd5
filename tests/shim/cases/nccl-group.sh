# one rank, the all-reduce in a group with one more kernel before ncclGroupEnd (ncclloop --group):
# collectives are boundaries and NCCL's own launches pass through uncounted; the result exact

nccl_loop --group
