# 8 threads on 8 streams, each recording an event after every launch, an observer thread polling
# those events (as a DDP watchdog does): the result and work exact

eager e "$progs/threads"
shim s "$progs/threads"
same_result e s; same_work e s
