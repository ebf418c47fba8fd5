# one rank, ncclAllReduce called through dlsym on a libnccl handle as frameworks that load NCCL
# themselves do (ncclloop --dlsym): collectives are still boundaries, NCCL's launches uncounted

nccl_loop --dlsym
