#!/usr/bin/env python3
"""Turn the runs of bench/run into one table (stdout), results.csv and results.png.

Input: a manifest (one line per run: workload, mode, exit status, seconds, iterations, whether
the hand-made run must match) and the runs' files <workload>.<mode>.{out,losses} plus the
cugraft run's report <workload>.report and the profile run's <workload>.profile (the floor
column). Standard library only; the chart needs matplotlib."""
import argparse
import csv
import json
import os
import sys

MODES = ["eager", "disable", "record", "profile", "cugraft", "hand"]
EXACT_MODES = ["eager", "disable", "record", "profile", "cugraft"]  # must be bit-identical to eager


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def parse_out(text):
    """iter_us and the fingerprint lines (checksum, per-step losses) of a program's stdout."""
    iter_us, fingerprint = None, []
    for line in (text or "").splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "iter_us":
            iter_us = float(words[1])
        elif (len(words) == 2 and words[0] == "checksum") or (len(words) == 4 and words[0] == "step"):
            fingerprint.append(line.strip())
    return iter_us, fingerprint


def summary_event(path):
    """The report's summary: the last line that is JSON with "event": "summary"."""
    for line in reversed((read(path) or "").splitlines()):
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if isinstance(ev, dict) and ev.get("event") == "summary":
            return ev
    return None


def load(manifest, runs):
    workloads = {}
    for line in read(manifest).splitlines():
        name, mode, rc, secs, iters, hand_exact = line.split("\t")
        w = workloads.setdefault(name, {"iters": int(iters), "hand_exact": hand_exact == "1", "runs": {}})
        base = os.path.join(runs, "%s.%s" % (name, mode))
        iter_us, fp = parse_out(read(base + ".out"))
        losses = read(base + ".losses")
        if losses is not None:
            fp = losses.splitlines()
        w["runs"][mode] = {"rc": int(rc), "secs": float(secs), "iter_us": iter_us,
                           "fingerprint": fp if fp else None}
        if mode == "cugraft":
            w["summary"] = summary_event(os.path.join(runs, name + ".report"))
        if mode == "profile":
            w["profile"] = (summary_event(os.path.join(runs, name + ".profile")) or {}).get("profile")
    return workloads


def floor(p):
    """Per iteration of the profile run: (GPU busy us or None, iteration us, the most cugraft can
    gain). As `cugraft profile` computes it (tools/cmd-profile.c, where its assumptions are
    said): an iteration of wall W cannot get shorter than W - H (H: host time in launch calls,
    which graphs remove) nor than B (GPU busy), so the gain is at most min(W/(W-H), W/B)."""
    it = (p or {}).get("iterations") or 0
    if not it or not p.get("wall_us"):
        return None, None, None
    w, h = p["wall_us"] / it, (p.get("launch_host_us") or 0) / it
    b = p["gpu_busy_us"] / it if p.get("gpu_busy_us") is not None else None
    bounds = ([w / (w - h)] if h < w else []) + ([w / b] if b else [])
    return b, w, min(bounds) if bounds else None


def verdict(w):
    runs = w["runs"]
    ok = {m: r for m, r in runs.items() if r["rc"] == 0 and r["fingerprint"]}
    if "eager" not in ok:
        return "no eager result"
    ref = ok["eager"]["fingerprint"]
    checked = [m for m in EXACT_MODES if m in runs] + (["hand"] if w["hand_exact"] and "hand" in runs else [])
    bad = [m for m in checked if m not in ok or ok[m]["fingerprint"] != ref]
    return "yes" if not bad else "NO: " + ",".join(bad)


def row(name, w):
    t = {m: (r["iter_us"] if r["rc"] == 0 else None) for m, r in w["runs"].items()}
    eager, cg, hand = t.get("eager"), t.get("cugraft"), t.get("hand")
    ratio = cg / eager if eager and cg else None
    share = None
    if eager and cg and hand and eager / hand - 1 > 0.01:
        share = (eager / cg - 1) / (eager / hand - 1)
    s = w.get("summary") or {}
    ops = s.get("ops")
    busy, iter_us, most = floor(w.get("profile"))
    return {
        "workload": name,
        "eager_us": eager, "disable_us": t.get("disable"), "record_only_us": t.get("record"),
        "cugraft_us": cg, "hand_us": hand,
        "cugraft_over_eager": ratio, "share_of_hand_speedup": share,
        "launches_per_iter": ops / w["iters"] if ops is not None and w["iters"] else None,
        "share_replayed": s.get("ops_replayed", 0) / ops if ops else None,
        "graph_launches": s.get("graph_launches"), "ops_eager": s.get("ops_eager"),
        "patches_per_graph_launch": s.get("patches_per_graph_launch"),
        "profile_gpu_busy_us": busy, "profile_iter_us": iter_us, "floor": most,
        "fallbacks": s.get("fallbacks") or {},
        "identical": verdict(w),
        "failed": ",".join("%s(rc %d)" % (m, r["rc"]) for m, r in w["runs"].items() if r["rc"] != 0),
    }


def fmt(v, spec):
    return "-" if v is None else spec % v


def print_table(rows):
    head = ["workload", "eager us", "cugraft us", "hand us", "cg/eager", "hand share",
            "launch/it", "replayed", "patch/gl", "busy/it us", "floor", "identical?"]
    body = [[r["workload"], fmt(r["eager_us"], "%.1f"), fmt(r["cugraft_us"], "%.1f"),
             fmt(r["hand_us"], "%.1f"), fmt(r["cugraft_over_eager"], "%.3f"),
             fmt(r["share_of_hand_speedup"] and 100 * r["share_of_hand_speedup"], "%.0f%%"),
             fmt(r["launches_per_iter"], "%.0f"),
             fmt(r["share_replayed"] and 100 * r["share_replayed"], "%.1f%%"),
             fmt(r["patches_per_graph_launch"], "%.1f"),
             "-" if r["profile_iter_us"] is None else
             "%s/%.0f" % (fmt(r["profile_gpu_busy_us"], "%.0f"), r["profile_iter_us"]),
             fmt(r["floor"], "%.2fx"), r["identical"]]
            for r in rows]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    for line in [head, ["-" * n for n in widths]] + body:
        print("  ".join(c.ljust(n) if i == 0 else c.rjust(n) for i, (c, n) in enumerate(zip(line, widths))))
    for r in rows:
        if r["failed"]:
            print("%s: failed runs: %s (see the .err files)" % (r["workload"], r["failed"]))
        if r["fallbacks"]:
            top = sorted(r["fallbacks"].items(), key=lambda kv: -kv[1])[:4]
            print("%s: fallbacks: %s" % (r["workload"], ", ".join("%s=%s" % kv for kv in top)))
        if r["eager_us"] and r["disable_us"] and r["disable_us"] > 1.03 * r["eager_us"]:
            print("%s: CUGRAFT_DISABLE=1 took %.1f%% longer than eager in this single run "
                  "(bench/overhead measures it interleaved, best of several)"
                  % (r["workload"], 100 * (r["disable_us"] / r["eager_us"] - 1)))


def write_csv(rows, path):
    cols = [k for k in rows[0] if k != "fallbacks"] + ["fallbacks"]
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(cols)
        for r in rows:
            out.writerow([json.dumps(r[c], sort_keys=True) if c == "fallbacks" else
                          ("" if r[c] is None else r[c]) for c in cols])


def write_png(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib: %s not written" % path)
        return
    rows = [r for r in rows if r["eager_us"]]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(rows)), 4))
    width = 0.27
    for k, (key, label) in enumerate([("eager_us", "eager"), ("cugraft_us", "cugraft"), ("hand_us", "hand-made graph")]):
        speed = [r["eager_us"] / r[key] if r[key] else 0 for r in rows]
        ax.bar([i + (k - 1) * width for i in range(len(rows))], speed, width, label=label)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["workload"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel("speed relative to eager (higher is better)")
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print("wrote %s" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--runs", required=True, help="folder with the runs' files")
    ap.add_argument("--out", required=True, help="folder for results.csv and results.png")
    args = ap.parse_args()
    workloads = load(args.manifest, args.runs)
    if not workloads:
        sys.exit("summarize.py: the manifest lists no runs")
    rows = [row(name, w) for name, w in workloads.items()]
    print_table(rows)
    write_csv(rows, os.path.join(args.out, "results.csv"))
    print("wrote %s" % os.path.join(args.out, "results.csv"))
    write_png(rows, os.path.join(args.out, "results.png"))
    if any(not r["identical"].startswith("yes") for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
