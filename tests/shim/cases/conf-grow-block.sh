# block dimensions and dynamic shared memory changing every token (conf_grow --block): the shapes
# are patched into the graphs, replayed after warmup, every launch run with its own shape
# (same_work), no divergence; a launch the driver refuses returns the same error

conf_grow 190 --block
