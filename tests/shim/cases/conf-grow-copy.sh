# a device copy that grows by one block's elements every token, summed by a kernel whose grid
# grows with it (conf_grow --copy): the copy's size is patched into the graph like the kernel's
# shape, so the token replays with no divergence, and every copy moves the bytes asked for
# (same checksum, same work)

conf_grow 380 --copy  # the copy and the sum, every token
