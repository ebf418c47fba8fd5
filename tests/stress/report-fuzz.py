#!/usr/bin/env python3
"""Report fuzzer: mutates valid cugraft reports and feeds them to `cugraft report`.

Runs only on demand (not part of `meson test`; tests/tools/report-fuzz.sh runs 200 seeded
mutations of it in the cpu suite):

    python3 tests/stress/report-fuzz.py build/tools/cugraft [--count 10000] [--seed N]
                                        [--max-seconds 600] [--timeout 20] [--keep DIR]

Bounded: at most --count mutations and --max-seconds of wall time (whichever comes first),
each `cugraft report` run killed after --timeout seconds. For the memory checks build the
command with `meson setup -Db_sanitize=address,undefined` and point the script at it (a
sanitizer report on stderr counts as a crash).

Each mutation (one category, see MUTATORS) is rendered both as text and with --json, and fails
on: a crash (killed by a signal, or a sanitizer report), a hang (--timeout), an exit status
other than 0 or 1, --json output that is not exactly one line of strict JSON (UTF-8, no NaN or
Infinity), or a wrong result: where both parsers read every line alike (a line neither can read
is skipped by both), the merged "files", "processes", "processes_without_summary" and "ops"
must equal Python's. Failing inputs are copied to --keep (default: a fresh directory named on
stderr). Exit status 1 on any failure; it ends with a table per category: inputs tried, those
whose totals were compared with Python's (checked), crashes, hangs, bad JSON and wrong results.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "tools", "data")


def seed_reports():
    """The valid reports mutations start from: the repo's test data and a few made here."""
    seeds = []
    for name in sorted(os.listdir(DATA)):
        if name.endswith(".jsonl"):
            with open(os.path.join(DATA, name), "rb") as f:
                seeds.append(f.read().splitlines())
    header = {"event": "header", "t": 0, "version": "0.1.0", "pid": 7, "rank": 0,
              "options": {"CUGRAFT_WARMUP": 11}, "driver_version": 13000,
              "cuda_version": 13000, "nccl_version": 22703, "device": "NVIDIA H200",
              "startup_checks": []}
    summary = {"event": "summary", "t": 3.5, "ops": 500, "launches": 480, "graph_launches": 9,
               "ops_replayed": 400, "ops_eager": 100, "replayed_share": 0.8, "patches": 12,
               "patches_per_graph_launch": 1.33, "fallbacks": {"sync": 3}, "graphs_built": 4,
               "host_time_saved_us": 1200.5, "entry_points": {"cuLaunchKernel": 480},
               "streams": [{"id": 1, "launches": 480}],
               "kernels": [{"name": "k%d" % i, "launches": 10 * i} for i in range(25)],
               "devices": [{"ordinal": 0, "name": "NVIDIA H200"}], "nccl_version": 22703,
               "boundaries": {"sync": 3}, "collectives": {"ncclAllReduce": 4},
               "votes": {"held": 2, "agreed": 1, "declined": 1, "timed_out": 0}}
    fallback = {"event": "fallback", "t": 1, "reason": "sync", "hint": "h", "api": "cuStreamSynchronize",
                "stream": 1, "op_index": 3, "kernel": "k1", "expected": {"grid": [1, 1, 1]},
                "got": {"grid": [2, 1, 1]}, "backtrace": ["main+0x1 (p)"], "where": ["/bin/p+0x1"]}
    vote = {"event": "vote", "t": 2, "comm": 0, "rank": 0, "nranks": 2, "vote": 4, "api": "ncclAllReduce",
            "outcome": "declined", "local": 3, "max": 3, "min": 0, "reason": "vote_declined", "hint": "h"}
    other = [{"event": "suppressed", "t": 3, "kind": "fallback", "key": "0x4", "count": 5},
             {"event": "signal", "t": 3, "signal": 6, "name": "ABRT", "work_pending": True},
             {"event": "note", "t": 1, "text": "managed memory"}]
    lines = [header, fallback, vote] + other + [summary]
    seeds.append([json.dumps(r, separators=(",", ":")).encode() for r in lines])
    seeds.append([json.dumps(r, separators=(",", ":")).encode() for r in (header, fallback, fallback)])
    return seeds


# --- mutations: each takes (rng, list of files, each a list of byte lines) and changes them ---

EXTREME_NUMBERS = [b"1e308", b"-1e308", b"1e999", b"-1e999", b"1e-999", b"-0", b"0", b"4.9e-324",
                   b"18446744073709551616", b"9007199254740993", b"-9223372036854775809",
                   b"123456789012345678901234567890123456789012345678901234567890123",
                   b"1.7976931348623157e308", b"0.1", b"2.5e-5"]
BAD_STRINGS = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\x80",
               b"\\ud800", b"\\udfff\\ud800", b"\\u0000", b"\\u00e9", b"\xf0\x9f\x98\x80",
               b"\\\"", b"%s%n%p", b"\x1b[31m", b"a" * 5000]


def pick_line(rng, files):
    f = rng.choice(files)
    if not f:
        f.append(b"{}")
    return f, rng.randrange(len(f))


def mut_bytes(rng, files):
    """Random bytes flipped, inserted or deleted in one line."""
    f, i = pick_line(rng, files)
    line = bytearray(f[i])
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(3)
        pos = rng.randrange(len(line) + 1)
        if op == 0 and line:
            line[min(pos, len(line) - 1)] = rng.randrange(256)
        elif op == 1:
            line[pos:pos] = bytes([rng.choice([0, 0x22, 0x5c, 0x7b, 0x7d, 0x5b, 0x5d, 0x2c, 0x3a,
                                                0xff, 0xc3, 0x80, 0x0a, rng.randrange(256)])])
        elif line:
            del line[pos:pos + rng.randint(1, 16)]
    f[i] = bytes(line).replace(b"\n", b" ") if rng.random() < 0.8 else bytes(line)


def mut_cut(rng, files):
    """A line cut short (a process killed mid-write), or the file ending without a newline."""
    f, i = pick_line(rng, files)
    f[i] = f[i][:rng.randrange(len(f[i]) + 1)]
    if rng.random() < 0.5:
        del f[i + 1:]


def mut_lines(rng, files):
    """Lines dropped, repeated, swapped, or blank; files emptied or duplicated."""
    f = rng.choice(files)
    op = rng.randrange(6)
    if op == 0 and f:
        del f[rng.randrange(len(f))]
    elif op == 1 and f:
        line = rng.choice(f)
        f[rng.randrange(len(f) + 1):0] = [line] * rng.randint(1, 50)
    elif op == 2:
        rng.shuffle(f)
    elif op == 3:
        f.insert(rng.randrange(len(f) + 1), rng.choice([b"", b" ", b"\t", b"\r", b"{}", b"[]", b"null"]))
    elif op == 4:
        f.clear()
    else:
        files.append(list(f))


def walk(v, path=()):
    yield path, v
    if isinstance(v, dict):
        for k, x in v.items():
            yield from walk(x, path + (k,))
    elif isinstance(v, list):
        for k, x in enumerate(v):
            yield from walk(x, path + (k,))


def set_at(root, path, value):
    if not path:
        return value
    parent = root
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return root


def json_line(rng, files):
    """A line of the files that parses, as (file, index, value); None when there is none."""
    for _ in range(10):
        f, i = pick_line(rng, files)
        try:
            return f, i, json.loads(f[i])
        except (ValueError, UnicodeDecodeError):
            continue
    return None


def mut_values(rng, files):
    """A value of a parsed record replaced by another type, an extreme or a bad string."""
    got = json_line(rng, files)
    if got is None:
        return mut_bytes(rng, files)
    f, i, rec = got
    path, _ = rng.choice(list(walk(rec)))
    kind = rng.randrange(4)
    if kind == 0:
        mark = "@@NUM@@"
        rec = set_at(rec, path, mark)
        f[i] = json.dumps(rec, separators=(",", ":")).encode().replace(b'"' + mark.encode() + b'"',
                                                                          rng.choice(EXTREME_NUMBERS))
        return
    if kind == 1:
        mark = "@@STR@@"
        rec = set_at(rec, path, mark)
        f[i] = json.dumps(rec, separators=(",", ":")).encode().replace(
            mark.encode(), b"x" + rng.choice(BAD_STRINGS) + b"y")
        return
    if kind == 2:
        rec = set_at(rec, path, rng.choice([None, True, False, "", "str", [], {}, [1, "a"],
                                            {"a": 1}, -1, 0.5, {"event": "summary"}]))
    else:
        if isinstance(rec, dict) and rec:   # drop a key, or rename "event"
            k = rng.choice(list(rec))
            if rng.random() < 0.5:
                del rec[k]
            else:
                rec["event"] = rng.choice(["summary", "header", "fallback", "vote", "signal",
                                           "suppressed", "Summary", ""])
    f[i] = json.dumps(rec, separators=(",", ":"), ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def mut_keys(rng, files):
    """Keys that are not UTF-8, duplicated, or many new ones (kernels, maps, totals)."""
    got = json_line(rng, files)
    if got is None:
        return mut_bytes(rng, files)
    f, i, rec = got
    if not isinstance(rec, dict):
        return mut_bytes(rng, files)
    line = json.dumps(rec, separators=(",", ":")).encode()
    op = rng.randrange(4)
    if op == 0:    # a duplicated key
        k = rng.choice(list(rec) or ["event"])
        line = line[:-1] + b"," + json.dumps(k).encode() + b":" + rng.choice(EXTREME_NUMBERS + [b'"x"', b"{}"]) + b"}"
    elif op == 1:  # an invalid UTF-8 key in a map
        line = line[:-1] + b',"fallbacks":{"' + rng.choice(BAD_STRINGS) + b'":3}}'
    elif op == 2:  # many distinct names
        n = rng.choice([100, 1000, 20000])
        rec["kernels"] = [{"name": "k%d" % rng.randrange(n), "launches": rng.randrange(100)} for _ in range(n)]
        rec["entry_points"] = {"e%d" % j: j for j in range(n)}
        line = json.dumps(rec, separators=(",", ":")).encode()
    else:          # a version per rank, conflicting
        rec["nccl_version"] = rng.choice([22703, 22805, "2.27.3", None, 1e999, [], {}])
        line = json.dumps(rec, separators=(",", ":"), allow_nan=True).encode().replace(b"Infinity", b"1e999")
    f[i] = line


def mut_nesting(rng, files):
    """Deep nesting around the parser's limit (64) and long lines."""
    f, i = pick_line(rng, files)
    depth = rng.choice([10, 63, 64, 65, 100, 5000])
    inner = b"[" * depth + b"1" + b"]" * depth if rng.random() < 0.5 else b'{"a":' * depth + b"1" + b"}" * depth
    if rng.random() < 0.3:
        inner = inner[:-rng.randint(1, depth)]   # unbalanced
    line = f[i]
    if line.endswith(b"}"):
        f[i] = line[:-1] + b',"deep":' + inner + b"}"
    else:
        f[i] = inner


def mut_numbers(rng, files):
    """Numbers that the merge sums set to extremes in every file's summary (1e308 twice
    overflows; 1e999 is already beyond a double)."""
    big = rng.choice([b"1e308", b"1e308", b"1e999", b"-1e308", b"1.7976931348623157e308", b"9007199254740993"])
    if len(files) == 1:
        files.append(list(files[0]))
    for f in files:
        for i, line in enumerate(f):
            try:
                rec = json.loads(line)
            except (ValueError, UnicodeDecodeError):
                continue
            if not (isinstance(rec, dict) and rec.get("event") == "summary"):
                continue
            nums = [p for p, v in walk(rec) if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if not nums:
                continue
            mark = "@@NUM@@"
            top = [p for p in nums if len(p) == 1]   # totals, mostly: the same in every file
            for p in rng.sample(nums, min(len(nums), rng.randint(1, 4))) + top[:rng.randint(0, 3)]:
                rec = set_at(rec, p, mark)
            f[i] = json.dumps(rec, separators=(",", ":")).encode().replace(b'"' + mark.encode() + b'"', big)


MUTATORS = {
    "bytes": mut_bytes,
    "cut": mut_cut,
    "lines": mut_lines,
    "values": mut_values,
    "keys": mut_keys,
    "nesting": mut_nesting,
    "numbers": mut_numbers,
}


# --- the reference for wrong results ---

def strict_records(data):
    """The records of a file's bytes as `cugraft report` reads them (lines split as getline
    does, a line that is not JSON or has no "event" string skipped), or None when a line is one
    where the two parsers may differ (bytes that are not UTF-8, duplicate keys, long numbers,
    deep nesting, \\u0000 which ends a string in C)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records = []
    for raw in lines:
        if len(raw) > 1 << 20 or b"\\u0000" in raw:
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if any(len(n) > 60 for n in re.findall(r"[-+.eE\d]+", text)) or text.count("[") + text.count("{") > 60:
            return None
        dup = []

        def pairs(items):
            keys = [k for k, _ in items]
            if len(set(keys)) != len(keys):
                dup.append(1)
            return dict(items)

        def const(c):
            raise ValueError(c)
        try:
            v = json.loads(text, object_pairs_hook=pairs, parse_constant=const)
        except ValueError:
            continue      # a bad line for both: named on stderr, skipped
        except RecursionError:
            return None
        if dup:
            return None
        if isinstance(v, dict) and isinstance(v.get("event"), str):
            records.append(v)
    return records


def pid_key(v):
    """A record's pid as the command keys it (a double, -0 as 0), or None when not a number."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    try:
        return float(v) + 0.0
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def processes(records):
    """The records' processes as the command separates them: a header opens one; a record with
    a pid goes to the last one opened with it (or opens one); one without, to the last opened.
    Each process as its last summary or None."""
    procs, by_pid = [], {}
    for r in records:
        header = r["event"] == "header"
        key = pid_key(r.get("pid"))
        if key is None:
            if header or not procs:
                procs.append(None)
            k = len(procs) - 1
        elif not header and key in by_pid:
            k = by_pid[key]
        else:
            procs.append(None)
            k = by_pid[key] = len(procs) - 1
        if r["event"] == "summary":
            procs[k] = r
    return procs


def expected(datas):
    """files, processes, processes_without_summary and ops as the merge computes them; None if
    unsure. A file without records is refused, not merged."""
    want = {"files": 0, "processes": 0, "processes_without_summary": 0}
    ops = None
    for data in datas:
        recs = strict_records(data)
        if recs is None:
            return None
        if recs:
            want["files"] += 1
        for summary in processes(recs):
            want["processes"] += 1
            if summary is None:
                want["processes_without_summary"] += 1
                continue
            v = summary.get("ops")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                ops = float(v) if ops is None else ops + float(v)
    if ops is not None:
        want["ops"] = ops if math.isfinite(ops) else None
    return want


# --- running ---

def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return p


def sanitizer_said(err):
    return b"ERROR: AddressSanitizer" in err or b"runtime error:" in err or b"ERROR: LeakSanitizer" in err


def check(cugraft, paths, timeout, stats):
    """'' when fine, else (kind, why) with kind one of crash, hang, json, wrong. Counts in
    stats["checked"] the inputs whose totals were compared with Python's."""
    for args in ([cugraft, "report"] + paths, [cugraft, "report", "--json"] + paths):
        p = run(args, timeout)
        if p is None:
            return "hang", " ".join(args[1:3]) + ": no answer in %ss" % timeout
        if p.returncode < 0 or p.returncode >= 128 or sanitizer_said(p.stderr):
            return "crash", "%s: exit %d: %s" % (" ".join(args[1:3]), p.returncode, p.stderr[-300:])
        if p.returncode not in (0, 1):
            return "crash", "%s: exit %d" % (" ".join(args[1:3]), p.returncode)
    out = p.stdout
    try:
        if out.count(b"\n") != 1 or not out.endswith(b"\n"):
            raise ValueError("not one line")

        def const(c):
            raise ValueError("bare " + c)
        got = json.loads(out.decode("utf-8"), parse_constant=const)
    except (ValueError, UnicodeDecodeError) as e:
        return "json", "--json: %s: %r" % (e, out[:300])
    datas = []
    for path in paths:
        with open(path, "rb") as f:
            datas.append(f.read())
    want = expected(datas)
    if want is not None:
        stats["checked"] += 1
        for k, v in want.items():
            g = got.get(k, "absent")
            if k == "ops" and v is not None and isinstance(g, (int, float)):
                if g != v and abs(g - v) > 1e-9 * abs(v):
                    return "wrong", "%s: got %r, want %r" % (k, g, v)
            elif g != v:
                return "wrong", "%s: got %r, want %r" % (k, g, v)
        if "ops" not in want and isinstance(got.get("ops"), (int, float)):   # ({}: a map "ops")
            return "wrong", "ops: got %r, no summary has one" % got["ops"]
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cugraft")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-seconds", type=float, default=600)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--keep", default=None, help="where failing inputs are copied")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    seeds = seed_reports()
    names = sorted(MUTATORS)
    cols = ("tried", "checked", "crash", "hang", "json", "wrong")
    stats = {n: dict.fromkeys(cols, 0) for n in names}
    work = tempfile.mkdtemp(prefix="cugraft-fuzz-")
    keep = a.keep
    failures = 0
    start = time.monotonic()
    try:
        for it in range(a.count):
            if time.monotonic() - start > a.max_seconds:
                print("stopped after %d inputs: --max-seconds %g reached" % (it, a.max_seconds))
                break
            files = [list(rng.choice(seeds)) for _ in range(rng.choice([1, 1, 2, 3]))]
            cat = names[it % len(names)]
            for _ in range(rng.choice([1, 1, 1, 2, 4])):
                MUTATORS[cat](rng, files)
            paths = []
            for n, lines in enumerate(files):
                path = os.path.join(work, "r%d.jsonl" % n)
                with open(path, "wb") as f:
                    f.write(b"\n".join(lines) + (b"\n" if rng.random() < 0.9 else b""))
                paths.append(path)
            stats[cat]["tried"] += 1
            bad = check(a.cugraft, paths, a.timeout, stats[cat])
            if bad:
                failures += 1
                stats[cat][bad[0]] += 1
                if keep is None:
                    keep = tempfile.mkdtemp(prefix="cugraft-fuzz-failed-")
                dest = os.path.join(keep, "%05d-%s-%s" % (it, cat, bad[0]))
                os.makedirs(dest)
                for p in paths:
                    shutil.copy(p, dest)
                print("FAIL %s (%s) input %d: %s [kept in %s]" % (bad[0], cat, it, bad[1], dest), file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = {k: sum(s[k] for s in stats.values()) for k in cols}
    print("seed %d, %.1f s; checked: totals compared with Python's" % (seed, time.monotonic() - start))
    print("%-8s %6s %8s %6s %6s %9s %6s" % ("category", "tried", "checked", "crash", "hang", "bad-json", "wrong"))
    for n in names + ["total"]:
        s = total if n == "total" else stats[n]
        print("%-8s %6d %8d %6d %6d %9d %6d" % ((n,) + tuple(s[k] for k in cols)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
