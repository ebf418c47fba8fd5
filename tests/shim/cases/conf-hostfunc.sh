# a host function reads what the kernel before it wrote and the kernel after it overwrites
# (conf_hostfunc.c): run before deferred work or after later work, it changes the checksum.
# Results and work exact.

eager e "$progs/conf_hostfunc"
shim s "$progs/conf_hostfunc"
same_result e s; same_work e s
