# 8 threads on 8 streams, an observer thread polling events

eager e "$progs/threads"
shim s "$progs/threads"
same_result e s; same_work e s
