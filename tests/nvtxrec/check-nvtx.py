#!/usr/bin/env python3
"""Checks what libnvtxrec recorded of a run under CUGRAFT_NVTX=1 against the run's report.

usage: check-nvtx.py TRACE REPORT REASON_H [--only-cugraft]
cugraft's ranges nest (every pop closes a push of its domain on the same thread; none is left
open), with --only-cugraft nothing else is recorded (a program's own NVTX, NCCL's, is otherwise
left alone), replay ranges name a chunk key and flush ranges a reason
of policy/reason.h, the replay ranges are as many as the summary's graph_launches and the
"eager <reason> ops=N" marks add up to the summary's fallbacks, reason by reason."""
import collections
import json
import re
import sys

def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)

trace, report, reason_h = sys.argv[1:4]
only_cugraft = '--only-cugraft' in sys.argv[4:]
reasons = set(re.findall(r'^\s*X\(\w+,\s*"([a-z_]+)"', open(reason_h).read(), re.M))
if len(reasons) < 20:
    fail('only %d reason names read from %s' % (len(reasons), reason_h))
summary = None
for line in open(report):
    rec = json.loads(line)
    if rec.get('event') == 'summary':
        summary = rec
if summary is None:
    fail('no summary in the report')

lines = open(trace).read().splitlines()
if not lines or lines[0] != 'init':
    fail('the injection library was not initialised')
stacks = collections.defaultdict(list)
replays, flushes = 0, collections.Counter()
eager = collections.Counter()
built = set()
replay_re = re.compile(r'replay chunk=(0x[0-9a-f]+) ops=(\d+) patches=(\d+)$')
for n, line in enumerate(lines[1:], 2):
    kind, rest = line.split(' ', 1)
    if kind == 'domain':
        if rest != 'cugraft' and only_cugraft:
            fail('line %d: domain %r' % (n, rest))
        continue
    parts = rest.split(' ', 2)
    tid, domain, name = parts[0], parts[1], parts[2] if len(parts) > 2 else ''
    if domain != 'cugraft':
        if only_cugraft:
            fail('line %d: outside the cugraft domain: %s' % (n, line))
        continue
    if kind == 'push':
        stacks[tid].append(name)
        if name.startswith('replay '):
            m = replay_re.match(name)
            if not m:
                fail('line %d: replay range without a chunk key, ops and patches: %r' % (n, name))
            if int(m.group(3)) > int(m.group(2)):
                fail('line %d: more patches than ops: %r' % (n, name))
            replays += 1
        elif name.startswith('flush '):
            if name[6:] not in reasons:
                fail('line %d: flush reason %r is not a report reason' % (n, name[6:]))
            flushes[name[6:]] += 1
        elif not name.startswith('learn build ops='):
            fail('line %d: unknown range %r' % (n, name))
        if len(stacks[tid]) > 3:
            fail('line %d: ranges nested %d deep: %s' % (n, len(stacks[tid]), stacks[tid]))
    elif kind == 'pop':
        if not stacks[tid]:
            fail('line %d: pop without a push on thread %s' % (n, tid))
        stacks[tid].pop()
    elif kind == 'mark':
        m = re.match(r'eager ([a-z_]+) ops=(\d+)$', name)
        if m:
            if m.group(1) not in reasons:
                fail('line %d: %r is not a report reason' % (n, m.group(1)))
            eager[m.group(1)] += int(m.group(2))
        m = re.match(r'graph built chunk=(0x[0-9a-f]+) ', name)
        if m:
            built.add(m.group(1))
    else:
        fail('line %d: unexpected record %r' % (n, line))
for tid, st in stacks.items():
    if st:
        fail('thread %s ended with ranges open: %s' % (tid, st))

if replays != summary['graph_launches']:
    fail('%d replay ranges, the summary has %d graph launches' % (replays, summary['graph_launches']))
want = {k: v for k, v in summary.get('fallbacks', {}).items() if v}
if dict(eager) != want:
    fail('eager marks %s, the summary has fallbacks %s' % (dict(eager), want))
print('ok: %d replay ranges = graph_launches; flushes %s; eager ops by reason %s = fallbacks'
      % (replays, dict(flushes), dict(eager)))
