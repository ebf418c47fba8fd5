# shapes only cg_grid_sum refuses (1024 threads of its 512; 56 KiB of shared memory before its
# attribute is raised and after it is lowered again), launched through a CUkernel (conf_grow
# --kernel) once its loop is replayed: the same calls fail with the same errors as without the
# shim, no refused launch runs, and the rest is still replayed

conf_grow_limit --kernel
