#!/usr/bin/env python3
"""Write one results file of bench/table: RESULTS/<date>-<gpu>-<commit>.md and the CSV beside it.

Input: the runs bench/sweep appended to SWEEP_CSV (workload,setting,round,figure,replayed_share,
mode,in-process and, from newer sweeps, ops_replayed,graph_launch_us,patch_us,graph_build_us,
launch_call_us,launch_call_count,wait_call_us,wait_call_count,launch_forward_us,
launch_forward_count,launch_replay_us,launch_flush_us),
the floor lines bench/table printed ("NAME: the floor  busy bound at most 1.23x (GPU-bound) ·
launch-gap bound at most 1.05x"; an older one, "NAME: the floor ... at most 1.23x", gives the
busy bound alone; "NAME: per iteration  3.86 ms wall · 63.0 launches · 1.0 syncs · 423.4 us in
launch calls"), and the machine and command. The markdown holds the table (each setting's
median against eager's, the median of the rounds' own ratios, the replayed shares, both bounds
and the share of each bound's gain the speedup reached), what the replays cost the host against
the launch calls they spared, the machine, the versions, the command that reproduces it and
every run's figure. Standard library only."""
import argparse
import csv
import os
import re
import shutil
import statistics
import sys
from collections import OrderedDict


def slug(text):
    """'NVIDIA H200' -> 'h200', 'FakeCUDA CPU' -> 'fakecuda-cpu'."""
    text = re.sub(r"^nvidia\s+", "", text.strip(), flags=re.I).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-") or "unknown"


def read_runs(path):
    """workload -> setting -> {round: (figure, share, mode, inproc, cost)}, in first-seen order;
    cost: (ops replayed, graph launch us, patch us, build us, launch call us, launch calls, wait
    us, waits, forward us, forwards, replay us in the launch calls) as floats (those after the
    builds None from sweeps before them), or None."""
    runs = OrderedDict()
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) < 7:
                continue
            name, setting, rnd, figure, share, mode, inproc = row[:7]
            try:
                value = float(figure)
            except ValueError:
                continue
            try:
                cost = tuple(float(x) for x in row[7:11]) if len(row) >= 11 else None
            except ValueError:
                cost = None
            calls = []
            for k in (11, 13, 15):  # launch calls, waits, the forwards: each (us, count)
                try:
                    calls += [float(x) for x in row[k:k + 2]] if len(row) >= k + 2 else [None, None]
                except ValueError:
                    calls += [None, None]
            for k in (17, 18):  # the replays' and the deferred ops' eagerly, in the calls
                try:
                    calls.append(float(row[k]) if len(row) >= k + 1 else None)
                except ValueError:
                    calls.append(None)
            cost = cost + tuple(calls) if cost else None
            runs.setdefault(name, OrderedDict()).setdefault(setting, {})[rnd] = (
                value, share, mode, inproc, cost)
    return runs


def matches(path, pattern):
    """The matches of `pattern` at the start of the lines of bench/table's output (none without
    it)."""
    if not path or not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            m = re.match(pattern, line)
            if m:
                yield m


def us(value, unit):
    """`cugraft profile` prints times of 1 ms and more in ms, shorter ones in us."""
    return float(value) * (1000 if unit == "ms" else 1)


def read_floors(path):
    """workload -> (busy bound, launch-gap bound), floats or None, from bench/table's floor lines."""
    floors = {}
    for m in matches(path, r"^([\w.-]+): the floor (.*)"):
        busy = re.search(r"busy bound at most ([0-9.]+)x", m.group(2))
        gap = re.search(r"launch-gap bound at most ([0-9.]+)x", m.group(2))
        if not busy:  # an older floor line: its one bound is the busy bound
            busy = re.search(r"at most ([0-9.]+)x", m.group(2))
        floors[m.group(1)] = (float(busy.group(1)) if busy else None,
                              float(gap.group(1)) if gap else None)
    return floors


def read_iterations(path):
    """workload -> (wall us, launches, us in launch calls) per iteration, from bench/table's
    "NAME: per iteration" lines (`cugraft profile` of the eager program)."""
    return {m.group(1): (us(m.group(2), m.group(3)), float(m.group(4)), us(m.group(5), m.group(6)))
            for m in matches(path, r"^([\w.-]+): per iteration\s+([0-9.]+) (us|ms) wall · "
                             r"([0-9.]+) launches.* · [0-9.]+ syncs · ([0-9.]+) (us|ms) in launch calls")}


def read_waits(path):
    """workload -> (waits per iteration, us a wait over the run), from bench/table's "NAME: waits"
    lines (`cugraft profile` of the eager program)."""
    return {m.group(1): (float(m.group(2)), us(m.group(3), m.group(4)))
            for m in matches(path, r"^([\w.-]+): waits\s+([0-9.]+) per iteration .*?, ([0-9.]+) (us|ms) each")}


def bound(v):
    return "%.2fx" % v if v else ""


def reached(speedup, b):
    """The share of a bound's gain the speedup reached: (speedup - 1) / (bound - 1)."""
    if not speedup or not b or b <= 1.0:
        return "-"
    return "%.0f%%" % (100 * (speedup - 1) / (b - 1))


def fmt(v):
    return "%.4g" % v if v < 1000 else "%.1f" % v


def table(runs, floors, unit):
    out = ["| workload | setting | eager (%s) | cugraft (%s) | speedup | paired | in-process "
           "| replayed, each run | busy bound | launch-gap bound | gain reached (busy · launch-gap) |"
           % (unit, unit), "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, settings in runs.items():
        eager = settings.get("eager", {})
        e_med = statistics.median(v[0] for v in eager.values()) if eager else None
        busy, gap = floors.get(name, (None, None))
        for setting, rounds in settings.items():
            if setting == "eager" and len(settings) > 1:
                continue
            med = statistics.median(v[0] for v in rounds.values())
            if setting == "eager":  # a row run alone (a hand-made graph): its own median only
                out.append("| %s | (alone) | %s | | | | | | %s | %s | |" % (
                    name, fmt(med), bound(busy), bound(gap)))
                continue
            speedup = e_med / med if e_med and med else None
            ratio = "%.3fx" % speedup if speedup else "-"
            pairs = [eager[r][0] / v[0] for r, v in rounds.items() if r in eager and v[0]]
            paired = "%.3fx (%.2f-%.2f)" % (statistics.median(pairs), min(pairs), max(pairs)) \
                if pairs else "-"
            inprocs = [float(v[3]) for v in rounds.values() if v[3] not in ("", "-")]
            inproc = "%.3fx" % statistics.median(inprocs) if inprocs else "-"
            shares = ", ".join(v[1] for v in rounds.values())
            gains = "%s · %s" % (reached(speedup, busy), reached(speedup, gap)) if busy or gap else ""
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, setting, fmt(e_med) if e_med else "-", fmt(med), ratio, paired, inproc,
                shares, bound(busy), bound(gap), gains))
    return out


def per_call(costs, us, calls):
    """The median over runs' costs of cost[us] / cost[calls] (None where no run has them)."""
    v = [c[us] / c[calls] for c in costs if len(c) > calls and c[us] is not None and c[calls]]
    return statistics.median(v) if v else None


def eager_call(settings, it):
    """What an eager launch call takes the driver (us): the median over the row's
    CUGRAFT_RECORD_ONLY=1 runs of the forwards' time per call (every call forwarded, with no
    profiler attached); without such runs, over its cugraft runs (the calls they ran eagerly,
    a sample of the ops cugraft did not defer); else the `cugraft profile` run's launch calls per
    launch, whose activity tracing slows every launch; None without any."""
    def forwards(pick):
        return per_call([v[4] for s, rounds in settings.items() if pick(s)
                         for v in rounds.values() if v[4]], 8, 9)
    fwd = forwards(lambda s: "CUGRAFT_RECORD_ONLY=1" in s.split())
    if fwd is None:
        fwd = forwards(lambda s: s != "eager")
    if fwd is not None:
        return fwd
    return it[2] / it[1] if it and it[1] > 0 and it[0] > 0 else None


def own_work(costs):
    """The median over runs of cugraft's own work a launch call (us): the launch calls' time less
    the driver's in the calls forwarded and in the deferred ops they submitted eagerly, and the
    replays' in them, over the calls (a sweep before launch_replay_us: less all the replays'
    host time, some of which ran in waits or the flusher; before launch_flush_us, those ops'
    time stays in); None where no run has the forwards."""
    v = [(c[4] - c[8] - (c[10] if c[10] is not None else c[1] + c[2] + c[3]) -
          (c[11] if len(c) > 11 and c[11] is not None else 0)) / c[5] for c in costs
         if len(c) > 10 and None not in (c[4], c[5], c[8]) and c[5]]
    return statistics.median(v) if v else None


TOKEN_COLUMNS = 10


def token_times(path, runs):
    """Where in a run the time goes, per workload and setting: each run's token times (bench/sweep's
    SWEEP_TOKENS files, listed by setting in NAME.settings) cut into TOKEN_COLUMNS columns of
    equal tokens, each the run's median; the row is the median over the setting's runs of each
    column (µs). Rows for the workloads of `runs` that have such files."""
    if not path or not os.path.isdir(path):
        return []
    out = []
    for name in runs:
        try:
            with open(os.path.join(path, name + ".settings")) as f:
                settings = [line.rstrip("\n").split(" ", 1) for line in f if " " in line]
        except OSError:
            continue
        for index, setting in settings:
            cols = []
            for fn in sorted(os.listdir(path)):
                m = re.match(re.escape(name) + r"\.(\d+)\.(\d+)\.txt$", fn)
                if not m or m.group(1) != index:
                    continue
                try:
                    with open(os.path.join(path, fn)) as f:
                        v = [float(x) for x in f if x.strip()]
                except (OSError, ValueError):
                    continue
                k = len(v) // TOKEN_COLUMNS
                if k:
                    cols.append([statistics.median(v[c * k:(c + 1) * k])
                                 for c in range(TOKEN_COLUMNS)])
            if cols:
                med = [statistics.median(c[i] for c in cols) for i in range(TOKEN_COLUMNS)]
                out.append("| %s | %s | %d | %s |" % (name, setting, len(cols),
                                                      " | ".join("%.0f" % x for x in med)))
    if not out:
        return []
    return ["| workload | setting | runs | " + " | ".join(str(i + 1) for i in range(TOKEN_COLUMNS)) + " |",
            "|---|---|---|" + "---|" * TOKEN_COLUMNS] + out


def replay_cost(runs, its):
    """Per workload and setting, the medians over its runs of the host time the replays took per
    op replayed, beside what the eager program's launch calls took per launch (its floor run),
    and what the difference makes of the eager wall time per iteration; then the launch calls
    under cugraft, the driver's share of those it forwarded and cugraft's own work."""
    out = ["| workload | setting | ops replayed | graph launches | patches | builds | replay | "
           "eager launch call | saved | of the wall | launch call under cugraft | saved a call | "
           "of the wall | driver, a call forwarded | cugraft's own, a call |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = 0
    for name, settings in runs.items():
        it = its.get(name)
        for setting, rounds in settings.items():
            every = [(v[4], v[1]) for v in rounds.values() if v[4]]
            costs = [(c, sh) for c, sh in every if c[0] > 0]  # the runs that replayed
            if setting == "eager" or not every:
                continue
            call = per_call([c for c, _ in every], 4, 5)
            cells, eager = [], eager_call(settings, it) if it and it[1] > 0 and it[0] > 0 else None
            if costs:
                per = [[c[i] / c[0] for c, _ in costs] for i in (1, 2, 3)]
                launch, patch, build = (statistics.median(p) for p in per)
                replay = launch + patch + build
                cells = ["%.0f" % statistics.median(c[0] for c, _ in costs)] + [
                    "%.2f" % x for x in (launch, patch, build, replay)]
            else:  # nothing replayed (CUGRAFT_RECORD_ONLY=1): the launch calls alone
                cells = ["0", "", "", "", ""]
            if eager is not None and costs:
                shares = [float(sh) for _, sh in costs if sh not in ("", "-")]
                share = statistics.median(shares) if shares else 0
                wall = (eager - replay) * it[1] * share / it[0]
                cells += ["%.2f" % eager, "%.2f" % (eager - replay), "%+.1f%%" % (100 * wall)]
            else:
                cells += ["%.2f" % eager if eager is not None else "", "", ""]
            if call is not None and eager is not None:
                cells += ["%.2f" % call, "%.2f" % (eager - call),
                          "%+.1f%%" % (100 * (eager - call) * it[1] / it[0])]
            else:
                cells += ["%.2f" % call if call is not None else "", "", ""]
            fwd, own = per_call([c for c, _ in every], 8, 9), own_work([c for c, _ in every])
            cells += ["%.2f" % fwd if fwd is not None else "", "%.2f" % own if own is not None else ""]
            out.append("| %s | %s | %s |" % (name, setting, " | ".join(cells)))
            rows += 1
    return out if rows else []


def wait_cost(runs, its, waits):
    """Per workload and setting, what a wait took under cugraft (the median over its runs of
    wait_call_us / wait_call_count) beside the eager program's (its floor run), what the
    difference makes of the eager wall time per iteration, the launch calls' saving beside it
    (launch_call_us, as in replay_cost), both together, and the wall time the runs saved."""
    out = ["| workload | setting | waits an iteration | eager wait | wait under cugraft | "
           "exposed a wait | of the wall | launch calls, of the wall | both | measured |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    rows = 0
    for name, settings in runs.items():
        it, wt = its.get(name), waits.get(name)
        if not it or not wt or it[0] <= 0 or it[1] <= 0:
            continue
        eager = settings.get("eager", {})
        e_med = statistics.median(v[0] for v in eager.values()) if eager else None
        for setting, rounds in settings.items():
            costs = [v[4] for v in rounds.values() if v[4]]
            wait = per_call(costs, 6, 7)
            if setting == "eager" or wait is None:
                continue
            exposed = wait - wt[1]
            of_wall = -exposed * wt[0] / it[0]
            call = per_call(costs, 4, 5)
            saved = (eager_call(settings, it) - call) * it[1] / it[0] if call is not None else None
            med = statistics.median(v[0] for v in rounds.values())
            measured = "%+.1f%%" % (100 * (1 - med / e_med)) if e_med and med else "-"
            out.append("| %s | %s | %.1f | %.1f | %.1f | %.1f | %+.1f%% | %s | %s | %s |" % (
                name, setting, wt[0], wt[1], wait, exposed, 100 * of_wall,
                "%+.1f%%" % (100 * saved) if saved is not None else "-",
                "%+.1f%%" % (100 * (saved + of_wall)) if saved is not None else "-", measured))
            rows += 1
    return out if rows else []


def every_run(runs):
    out = ["| workload | setting | round | figure | replayed | mode | in-process eager/graphed |",
           "|---|---|---|---|---|---|---|"]
    for name, settings in runs.items():
        for setting, rounds in settings.items():
            for rnd, (value, share, mode, inproc, _) in rounds.items():
                out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    name, setting, rnd, fmt(value), share, mode, inproc))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", required=True, help="bench/sweep's SWEEP_CSV")
    ap.add_argument("--floors", help="bench/table's output (its floor lines)")
    ap.add_argument("--dir", required=True, help="where the results files go")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--driver", default="-")
    ap.add_argument("--cuda", default="-")
    ap.add_argument("--torch", default="-")
    ap.add_argument("--token-times", help="bench/sweep's SWEEP_TOKENS folder (each run's token times)")
    ap.add_argument("--unit", default="time per iteration as the program prints it (µs, or ms for PyTorch)")
    a = ap.parse_args()

    runs = read_runs(a.runs)
    if not runs:
        print("bench/results.py: no runs in %s" % a.runs, file=sys.stderr)
        return 1
    base = os.path.join(a.dir, "%s-%s-%s" % (a.date, slug(a.gpu), a.commit))
    os.makedirs(a.dir, exist_ok=True)
    shutil.copyfile(a.runs, base + ".csv")
    lines = [
        "# cugraft on %s, %s, commit %s" % (a.gpu, a.date, a.commit),
        "",
        "Written by `bench/table` (generated: rerun the command to reproduce it; do not edit).",
        "",
        "- machine: %s; driver %s; CUDA %s; PyTorch %s" % (a.gpu, a.driver, a.cuda, a.torch),
        "- command: `%s`" % a.command,
        "- every run: [`%s`](%s) (workload,setting,round,figure,replayed_share,mode,in-process, then"
        " what the replays, launch calls and waits took: bench/sweep's SWEEP_CSV)"
        % (os.path.basename(base + ".csv"), os.path.basename(base + ".csv")),
        "",
        "Each workload runs eagerly and under each setting, interleaved round after round (in",
        "reverse order every other round). *eager*, *cugraft*: the medians of the runs' figures,",
        "%s. *speedup*: eager median over cugraft median; *paired*: the" % a.unit,
        "median of each round's own ratio, and in brackets the lowest and the highest of them (the",
        "spread of one call's rounds: two settings whose brackets overlap are not told apart by",
        "it); *in-process*: the median of the runs' own controller",
        "figures, the eager epochs' time per op over the graphed epochs' of the same process (a",
        "run's host speed moves both alike; eager epochs still pass through cugraft; \"-\": no probe",
        "ended). *replayed*: the share of ops each cugraft run replayed",
        "from graphs. *busy bound*, *launch-gap bound*: the most a launch-side tool can gain by",
        "`cugraft profile`: no shorter than the GPU busy time nor than the wall time less the",
        "launch calls; only the GPU's idle time inside launch calls removed (the host's own work",
        "between syncs stays). *gain reached*: (speedup - 1) / (bound - 1) for each.",
        "",
    ]
    lines += table(runs, read_floors(a.floors), "median")
    cost = replay_cost(runs, read_iterations(a.floors))
    if cost:
        lines += ["", "## What the replays cost the host", "",
                  "Medians over each setting's runs, µs per op replayed (the summary's",
                  "`graph_launch_us`, `patch_us`, `graph_build_us` over `ops_replayed`): launching",
                  "the graphs, patching the nodes whose arguments changed, building the graphs, and",
                  "their sum. *eager launch call*: what the driver takes for a launch call, the",
                  "median over the row's `CUGRAFT_RECORD_ONLY=1` runs of the calls they forwarded,",
                  "every one (`launch_forward_us` over `launch_forward_count`; without such runs,",
                  "over its cugraft runs, the ops they ran eagerly; where no run has them, the",
                  "row's `cugraft profile` run, whose activity tracing slows every launch). *saved*: the difference, per op",
                  "replayed; *of the wall*: that times the launches per iteration and the median",
                  "replayed share, over the eager wall time per iteration (an estimate: it leaves",
                  "out cugraft's own work on every op and the deferral's exposure after waits).",
                  "*launch call under cugraft*: what the program's launch calls took inside",
                  "cugraft, everything in, sampled (`launch_call_us` over `launch_call_count`);",
                  "*saved a call*: the eager launch call less that; *of the wall*: that times the",
                  "launches per iteration over the eager wall time (the exposure after waits",
                  "still left out). *driver, a call forwarded*: what the driver took in the launch",
                  "calls this setting's runs forwarded (the ops they ran eagerly), sampled alike",
                  "(`launch_forward_us` over `launch_forward_count`). *cugraft's own, a call*: the launch calls'",
                  "time less the driver's in the forwards and in the deferred ops they submitted",
                  "eagerly (`launch_flush_us`: a divergence, a cost sample) and the replays' in them",
                  "(`launch_replay_us`: graph launches, patches and builds), over the calls: what",
                  "cugraft's packing, matching and deferring cost each call.",
                  ""] + cost
    waits = wait_cost(runs, read_iterations(a.floors), read_waits(a.floors))
    if waits:
        lines += ["", "## What the waits cost", "",
                  "The program's waits (syncs, copies to or from the host) per iteration and what",
                  "one took over the eager run (µs, the row's `cugraft profile` run), beside what",
                  "one took under cugraft (the median over its runs of `wait_call_us` over",
                  "`wait_call_count`): a wait there submits the work deferred before it, which the",
                  "GPU has not started. *exposed a wait*: the difference; *of the wall*: that times",
                  "the waits per iteration over the eager wall time per iteration (a cost where",
                  "negative). *launch calls, of the wall*: the launch calls' saving of the section",
                  "above; *both*: their sum, what the two terms leave of the wall time per iteration;",
                  "*measured*: what the runs saved, 1 - cugraft median / eager median. What",
                  "*both* and *measured* differ by is the rest: cugraft's effect on the program's",
                  "own host work, and the machine's noise. (A loop that its launch calls no longer",
                  "bound waits for its GPU instead: that shows in the waits, as exposure.)",
                  ""] + waits
    tokens = token_times(a.token_times, runs)
    if tokens:
        lines += ["", "## Where in a run the time goes", "",
                  "Each run's time per token, as the program wrote it (`--token-times`), cut into",
                  "%d columns of equal tokens from the first (the program's warmup tokens come" % TOKEN_COLUMNS,
                  "first; so do cugraft's learning and graph builds), each column that run's median;",
                  "each cell the median over the setting's runs, µs. A cost that learning pays once",
                  "shows in the first columns, one that each token pays in all of them.",
                  ""] + tokens
    lines += ["", "## Every run", ""] + every_run(runs)
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("results: %s.md" % base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
