#!/usr/bin/env python3
"""Write one results file of bench/table: RESULTS/<date>-<gpu>-<commit>.md and the CSV beside it.

Input: the runs bench/sweep appended to SWEEP_CSV (workload,setting,round,figure,replayed_share,
mode,in-process), the floor lines bench/table printed ("NAME: the floor  busy bound at most
1.23x (GPU-bound) · launch-gap bound at most 1.05x"; an older one, "NAME: the floor ... at most
1.23x", gives the busy bound alone), and the machine and command. The markdown holds the table
(each setting's median against eager's, the median of the rounds' own ratios, the replayed
shares, both bounds and the share of each bound's gain the speedup reached), the machine, the
versions, the command that reproduces it and every run's figure. Standard library only."""
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
    """workload -> setting -> {round: (figure, share, mode, inproc)}, in first-seen order."""
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
            runs.setdefault(name, OrderedDict()).setdefault(setting, {})[rnd] = (
                value, share, mode, inproc)
    return runs


def read_floors(path):
    """workload -> (busy bound, launch-gap bound), floats or None, from bench/table's floor lines."""
    floors = {}
    if not path or not os.path.exists(path):
        return floors
    with open(path) as f:
        for line in f:
            m = re.match(r"^([\w.-]+): the floor (.*)", line)
            if not m:
                continue
            busy = re.search(r"busy bound at most ([0-9.]+)x", m.group(2))
            gap = re.search(r"launch-gap bound at most ([0-9.]+)x", m.group(2))
            if not busy:  # an older floor line: its one bound is the busy bound
                busy = re.search(r"at most ([0-9.]+)x", m.group(2))
            floors[m.group(1)] = (float(busy.group(1)) if busy else None,
                                  float(gap.group(1)) if gap else None)
    return floors


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
    out = ["| workload | setting | eager (%s) | cugraft (%s) | speedup | paired | replayed, each run "
           "| busy bound | launch-gap bound | gain reached (busy · launch-gap) |" % (unit, unit),
           "|---|---|---|---|---|---|---|---|---|---|"]
    for name, settings in runs.items():
        eager = settings.get("eager", {})
        e_med = statistics.median(v[0] for v in eager.values()) if eager else None
        busy, gap = floors.get(name, (None, None))
        for setting, rounds in settings.items():
            if setting == "eager" and len(settings) > 1:
                continue
            med = statistics.median(v[0] for v in rounds.values())
            if setting == "eager":  # a row run alone (a hand-made graph): its own median only
                out.append("| %s | (alone) | %s | | | | | %s | %s | |" % (
                    name, fmt(med), bound(busy), bound(gap)))
                continue
            speedup = e_med / med if e_med and med else None
            ratio = "%.3fx" % speedup if speedup else "-"
            pairs = [eager[r][0] / v[0] for r, v in rounds.items() if r in eager and v[0]]
            paired = "%.3fx" % statistics.median(pairs) if pairs else "-"
            shares = ", ".join(v[1] for v in rounds.values())
            gains = "%s · %s" % (reached(speedup, busy), reached(speedup, gap)) if busy or gap else ""
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                name, setting, fmt(e_med) if e_med else "-", fmt(med), ratio, paired, shares,
                bound(busy), bound(gap), gains))
    return out


def every_run(runs):
    out = ["| workload | setting | round | figure | replayed | mode | in-process eager/graphed |",
           "|---|---|---|---|---|---|---|"]
    for name, settings in runs.items():
        for setting, rounds in settings.items():
            for rnd, (value, share, mode, inproc) in rounds.items():
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
        "- every run: [`%s`](%s) (workload,setting,round,figure,replayed_share,mode,in-process)"
        % (os.path.basename(base + ".csv"), os.path.basename(base + ".csv")),
        "",
        "Each workload runs eagerly and under each setting, interleaved round after round (in",
        "reverse order every other round). *eager*, *cugraft*: the medians of the runs' figures,",
        "%s. *speedup*: eager median over cugraft median; *paired*: the" % a.unit,
        "median of each round's own ratio. *replayed*: the share of ops each cugraft run replayed",
        "from graphs. *busy bound*, *launch-gap bound*: the most a launch-side tool can gain by",
        "`cugraft profile`: no shorter than the GPU busy time nor than the wall time less the",
        "launch calls; only the GPU's idle time inside launch calls removed (the host's own work",
        "between syncs stays). *gain reached*: (speedup - 1) / (bound - 1) for each.",
        "",
    ]
    lines += table(runs, read_floors(a.floors), "median")
    lines += ["", "## Every run", ""] + every_run(runs)
    with open(base + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("results: %s.md" % base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
