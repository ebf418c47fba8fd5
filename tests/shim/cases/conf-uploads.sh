# a data loader and a loss read (conf_uploads.c): uploads from pageable memory overwritten as
# soon as the call returns, results read after a sync or mid-step; deferring the pageable copy,
# reordering a copy or reading stale memory changes the checksum. Results and work exact.

eager e "$progs/conf_uploads"
shim s "$progs/conf_uploads"
same_result e s; same_work e s
