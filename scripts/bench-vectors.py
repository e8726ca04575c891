#!/usr/bin/env python3
"""The daemon with N memories and a vector each: resident memory, hybrid search with unseen
queries through HTTP, and cold start to a first answer (issue 44's "1M memories with vectors").

Embedding a million memories takes days on 2 cores, so the stored vectors are synthetic: unit
vectors of the model's width built like a sentence model's (one direction every text shares,
1,000 topics around it, each memory near its topic), written straight into the `embeddings`
table under the model's id. The query is embedded for real. The scan, the shortlist's exact
re-score from the table, the fusion and the re-ranking cost what they cost with real vectors.

Steps: one `cairn serve` without a model loads the memories (cairn-bench's load phase; kept in
--work and reused); per build (--cairn, and --compare for a second one, side by side), a copy
of the store with the vectors gets a daemon with the model: the time from its start to its
first /health, to its first hybrid search answered (lexical while the vectors load), and to
"semantic index ready" in its log (every vector in memory), then, once the lexical index is
built too ("search index ready"), cairn-bench's hybrid searches, then VmRSS and VmHWM.

Each copy starts with the judge's mark at its newest memory: a store whose memories were judged
as they arrived, as a year of use leaves it. `--judge-backlog` starts it unjudged instead, so the
judge works through a million arrivals on one core while the searches are measured (a bulk
import's first hours).

    python3 scripts/bench-vectors.py --cairn target/release/cairn \\
        --bench target/release/cairn-bench --size 1000000 --searches 300 \\
        --model multilingual-e5-small=target/test-deps/multilingual-e5-small --work /tmp/vectors-1m

Two builds side by side: `--compare OTHER --rounds 3` measures them alternated (A B, B A, A B,
each daemon started afresh on its own copy of the store) and prints the medians.
"""

import argparse
import array
import importlib.util
import json
import os
import random
import shutil
import statistics
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_models_http", os.path.join(HERE, "bench-models-http.py"))
models = importlib.util.module_from_spec(spec)
spec.loader.exec_module(models)


def store_clustered_vectors(db, model_id, dims, seed, topics=1000):
    """A synthetic sentence-model vector for every live memory, under `model_id`."""
    rng = random.Random(seed)
    shared = [0.5 + abs(rng.uniform(-1, 1)) for _ in range(dims)]
    bases = [[0.8 * s + 0.5 * rng.uniform(-1, 1) for s in shared] for _ in range(topics)]
    noise_scale = 0.6 / 128.0
    con = sqlite3.connect(db)
    con.execute("DELETE FROM embeddings")
    ids = [r[0] for r in con.execute("SELECT id FROM observations WHERE deleted_at IS NULL")]
    rows = []
    for oid in ids:
        base = bases[rng.randrange(topics)]
        noise = rng.randbytes(dims)
        v = [b + (n - 128) * noise_scale for b, n in zip(base, noise)]
        norm = sum(x * x for x in v) ** 0.5
        blob = array.array("f", [x / norm for x in v]).tobytes()
        rows.append((oid, model_id, dims, blob, "2026-12-02T00:00:00.000Z"))
        if len(rows) == 20000:
            con.executemany("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)
            rows.clear()
    con.executemany("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return len(ids)


def vm_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cold_start(cairn, data, home, env, log):
    """Seconds from spawn to the first /health, to the first hybrid search answered, and to
    semantic search "ready"; the running daemon."""
    log_start = os.path.getsize(log) if os.path.exists(log) else 0
    started = time.time()
    d = models.Daemon(cairn, data, home, env, log)
    health = time.time() - started
    q = urllib.parse.quote("why did the deploy of the billing service fail last week")
    models.get_json(d.port, f"/search?q={q}&limit=10&mode=hybrid", timeout=60)
    first = time.time() - started
    # The daemon logs when every vector is in memory (polling /stats instead would count
    # pending embeddings over the whole table, at a million memories a load of its own).
    wait_for_log(log, "semantic index ready", log_start)
    ready = time.time() - started
    return d, health, first, ready


def wait_for_log(log, line, offset):
    """Until `line` is in the daemon's log past `offset` (each daemon appends to it)."""
    while line not in open(log, errors="replace").read()[offset:]:
        time.sleep(0.2)


def mark_judged(db):
    """The judge's mark at the newest memory: every memory judged already."""
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE judge_mark SET last_memory_id = (SELECT COALESCE(MAX(id), 0) FROM observations)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--compare", help="a second cairn binary, measured on the same store")
    ap.add_argument("--bench", required=True)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--searches", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", required=True, help="NAME=DIR")
    ap.add_argument("--work", required=True, help="the stores are kept here")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure the builds this many times, alternated (A B, B A, ...), and print the medians")
    ap.add_argument("--judge-backlog", action="store_true",
                    help="leave every memory unjudged: the judge's backlog runs during the searches")
    ap.add_argument("--timing", action="store_true",
                    help="log each search's phases (cairn_core::search::timing) and print their medians")
    args = ap.parse_args()
    bench = os.path.abspath(args.bench)
    builds = [("this", os.path.abspath(args.cairn))]
    if args.compare:
        builds.append(("compare", os.path.abspath(args.compare)))
    name, model_dir = args.model.split("=", 1)
    env = models.model_env(name, model_dir)
    if args.timing:
        env.update(CAIRN_LOG="info,cairn_core::search::timing=debug", NO_COLOR="1")
    work = os.path.abspath(args.work)
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    base = os.path.join(work, "base")
    if not os.path.exists(os.path.join(base, "cairn.db")):
        os.makedirs(base, exist_ok=True)
        d = models.Daemon(builds[0][1], base, home, {"CAIRN_EMBEDDER": "none"}, os.path.join(work, "base.log"))
        print(f"loading {args.size} memories ...", file=sys.stderr)
        subprocess.run(
            [bench, "--url", d.url(), "--size", str(args.size), "--phases", "load", "--seed", str(args.seed),
             "--load-secs", "3600"],
            check=True, stdout=subprocess.DEVNULL,
        )
        d.stop()
    vectors_db = os.path.join(work, "vectors.db")
    if not os.path.exists(vectors_db):
        probe_dir = os.path.join(work, "probe")
        shutil.rmtree(probe_dir, ignore_errors=True)
        os.makedirs(probe_dir)
        shutil.copy(os.path.join(base, "cairn.db"), os.path.join(probe_dir, "cairn.db"))
        probe = models.Daemon(builds[0][1], probe_dir, home, env, os.path.join(work, "probe.log"))
        model_id = models.get_json(probe.port, "/stats").get("embedding_model")
        probe.stop()
        dims = models.model_width(model_dir)
        started = time.time()
        n = store_clustered_vectors(os.path.join(probe_dir, "cairn.db"), model_id, dims, args.seed)
        print(f"{n} vectors of {dims} dims under {model_id} in {time.time() - started:.0f} s", file=sys.stderr)
        shutil.move(os.path.join(probe_dir, "cairn.db"), vectors_db)
    rows, phases = [], {}
    for round_no in range(args.rounds):
        # Alternated, and each build first every other round: drift in the machine's load
        # falls on both alike.
        order = builds if round_no % 2 == 0 else builds[::-1]
        for label, cairn in order:
            data = os.path.join(work, label)
            if round_no == 0:
                shutil.rmtree(data, ignore_errors=True)
                os.makedirs(data)
                shutil.copy(vectors_db, os.path.join(data, "cairn.db"))
                if not args.judge_backlog:
                    mark_judged(os.path.join(data, "cairn.db"))
            log = os.path.join(work, f"{label}.log")
            daemon_from = os.path.getsize(log) if os.path.exists(log) else 0
            d, health, first, ready = cold_start(cairn, data, home, env, log)
            wait_for_log(log, "search index ready", daemon_from)
            log_from = os.path.getsize(log)
            out = os.path.join(work, f"{label}-hybrid.json")
            cmd = [bench, "--url", d.url(), "--size", str(args.size), "--phases", "search-project,search-question",
                   "--searches", str(args.searches), "--mode", "hybrid", "--seed", str(args.seed), "--json", out]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            load = os.getloadavg()[0]
            with open(out) as f:
                p50 = models.p50s(json.load(f))
            rss, hwm = vm_kb(d.proc.pid, "VmRSS"), vm_kb(d.proc.pid, "VmHWM")
            d.stop()
            rows.append((round_no, label, cairn, health, first, ready, p50, rss, hwm, load))
            print(f"round {round_no + 1} {label}: project {p50.get('search-project', 0):.2f} ms, "
                  f"question {p50.get('search-question', 0):.2f} ms, load {load:.1f}", file=sys.stderr)
            if args.timing:
                for phase, values in phase_samples(log, log_from).items():
                    phases.setdefault(label, {}).setdefault(phase, []).extend(values)
    print(f"\n{args.size} memories with {name} vectors, {args.searches} unseen queries per phase")
    print("| round | build | first /health | first hybrid answer | vectors ready | hybrid p50, project | "
          "hybrid p50, question | VmRSS after | VmHWM | load (1 min) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for round_no, label, cairn, health, first, ready, p50, rss, hwm, load in rows:
        print(f"| {round_no + 1} | {label} ({cairn}) | {health * 1000:.0f} ms | {first * 1000:.0f} ms | {ready:.1f} s "
              f"| {p50.get('search-project', 0):.2f} ms | {p50.get('search-question', 0):.2f} ms "
              f"| {rss / 1024:.0f} MiB | {hwm / 1024:.0f} MiB | {load:.1f} |")
    if args.rounds > 1:
        print(f"\nmedians of {args.rounds} rounds")
        print("| build | hybrid p50, project | hybrid p50, question | vectors ready | VmRSS after | load |")
        print("|---|---|---|---|---|---|")
        for label, cairn in builds:
            mine = [r for r in rows if r[1] == label]
            med = lambda f: statistics.median(f(r) for r in mine)
            print(f"| {label} ({cairn}) | {med(lambda r: r[6].get('search-project', 0)):.2f} ms "
                  f"| {med(lambda r: r[6].get('search-question', 0)):.2f} ms | {med(lambda r: r[5]):.1f} s "
                  f"| {med(lambda r: r[7]) / 1024:.0f} MiB | {med(lambda r: r[9]):.1f} |")

    for label, samples in phases.items():
        print(f"\n{label}: median ms per phase of the hybrid searches (nested phases are inside their parent)")
        print("| phase | p50 ms |\n|---|---:|")
        for phase, values in sorted(samples.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"| {phase} | {statistics.median(values):.2f} |")


def phase_samples(log, offset):
    """Each phase's milliseconds per hybrid search, from the daemon's `search timing` lines
    logged after `offset`."""
    samples = {}
    with open(log, "rb") as f:
        f.seek(offset)
        for line in f.read().decode(errors="replace").splitlines():
            if "search timing" not in line or 'mode="hybrid"' not in line and "mode=hybrid" not in line:
                continue
            total = line.split("total_ms=", 1)[1].split()[0]
            samples.setdefault("total", []).append(float(total))
            per_search = {}  # a phase met more than once in a search (each filter check) adds up
            for pair in line.split("phases=", 1)[1].split():
                phase, _, ms = pair.partition("=")
                per_search[phase] = per_search.get(phase, 0.0) + float(ms.strip('"'))
            for phase, ms in per_search.items():
                samples.setdefault(phase, []).append(ms)
    return samples


if __name__ == "__main__":
    main()
