# one rank on the fake NCCL (ncclloop): collectives are boundaries and NCCL's own launches pass
# through uncounted; the result exact, every launch of the program counted, replays in between

nccl_loop
