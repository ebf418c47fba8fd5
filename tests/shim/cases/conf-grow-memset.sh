# a memset that fills one block's elements more every token, summed (and one block past it) by a
# kernel whose grid grows with it (conf_grow --memset): the memset's width is patched into the
# graph like the kernel's shape, so the token replays with no divergence, and every memset sets
# the elements asked for (same checksum, same work)

conf_grow 380 --memset  # the memset and the sum, every token
