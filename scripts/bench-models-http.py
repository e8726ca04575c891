#!/usr/bin/env python3
"""Query latency and memory of each embedding model at N memories, through the HTTP API.

What an agent sees: `cairn serve` with the model, N memories with a vector each, and searches
with queries it has never seen (cairn-bench's generated questions), so every query is embedded.

Embedding 100,000 memories takes hours on 2 cores, so the stored vectors are random unit
vectors of the model's width: the scan over every vector, the fusion and the re-ranking cost
what they cost with real vectors; the query is embedded for real by the model. (Random
vectors give no semantic hit above the model's floor, so the pool is lexical hits; the
re-ranking still scores the whole pool.)

Steps: one `cairn serve` without a model loads the memories (cairn-bench's load phase); per
model, a copy of that store gets the random vectors, a daemon with the model loads them, and
cairn-bench times hybrid searches, then (a fresh daemon, so no query is cached) semantic
ones; the daemon's VmRSS is read after them.

    python3 scripts/bench-models-http.py --cairn target/release/cairn \
        --bench target/release/cairn-bench --size 100000 --searches 300 \
        --model multilingual-e5-small=target/test-deps/multilingual-e5-small \
        --model all-MiniLM-L6-v2=target/test-deps/all-MiniLM-L6-v2 \
        --model nomic-embed-text-v1.5=DATA/models/nomic-embed-text-v1.5
"""

import argparse
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(port, path, timeout=30):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return json.load(r)


class Daemon:
    def __init__(self, cairn, data_dir, home, env_extra, log):
        self.port = free_port()
        env = dict(os.environ, HOME=home, CAIRN_DATA_DIR=data_dir, CAIRN_AUTOSTART="never", CAIRN_LOG="info")
        env.update(env_extra)
        self.log = open(log, "ab")
        self.proc = subprocess.Popen(
            [cairn, "serve", "--port", str(self.port), "--model-install", "never"],
            env=env,
            stdout=self.log,
            stderr=self.log,
        )
        deadline = time.time() + 120
        while True:
            try:
                get_json(self.port, "/health", timeout=2)
                return
            except Exception:
                if self.proc.poll() is not None or time.time() > deadline:
                    raise SystemExit(f"cairn serve did not start (see {log})")
                time.sleep(0.1)

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def model_width(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    return config.get("hidden_size") or config.get("n_embd") or config["dim"]


def store_random_vectors(db, model_id, dims, seed):
    """A random unit vector of `dims` for every live memory, under `model_id`."""
    rng = random.Random(seed)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM embeddings")
    ids = [r[0] for r in con.execute("SELECT id FROM observations WHERE deleted_at IS NULL")]
    now = "2026-11-28T00:00:00.000Z"
    rows = []
    for oid in ids:
        v = [rng.gauss(0.0, 1.0) for _ in range(dims)]
        norm = sum(x * x for x in v) ** 0.5
        blob = struct.pack(f"<{dims}f", *(x / norm for x in v))
        rows.append((oid, model_id, dims, blob, now))
        if len(rows) == 5000:
            con.executemany("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)
            rows.clear()
    con.executemany("INSERT INTO embeddings VALUES (?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    return len(ids)


def model_env(name, model_dir):
    return {"CAIRN_MODEL": name, "CAIRN_MODEL_DIR": os.path.abspath(model_dir)}


def wait_for_vectors(daemon, total, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        stats = get_json(daemon.port, "/stats")
        # "ready" once the model is loaded and the stored vectors are read into memory.
        if stats.get("embeddings_stored") == total and stats.get("semantic_search") == "ready":
            return stats
        time.sleep(1)
    raise SystemExit(f"the daemon did not take up the vectors: {stats}")


def bench(args, daemon, mode, out):
    cmd = [
        args.bench, "--url", daemon.url(), "--size", str(args.size), "--phases",
        "search-project,search-question", "--searches", str(args.searches), "--mode", mode,
        "--seed", str(args.seed), "--json", out,
    ]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def p50s(report):
    """phase → p50 ms, from cairn-bench's JSON report."""
    return {p["name"]: p["latency"]["p50"] for p in report["targets"][0]["phases"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--searches", type=int, default=300)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--model", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--work", help="keep the stores here (default: a temp dir)")
    args = ap.parse_args()
    args.cairn, args.bench = os.path.abspath(args.cairn), os.path.abspath(args.bench)
    work = args.work or tempfile.mkdtemp(prefix="cairn-models-")
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    base = os.path.join(work, "base")
    if not os.path.exists(os.path.join(base, "cairn.db")):
        os.makedirs(base, exist_ok=True)
        d = Daemon(args.cairn, base, home, {"CAIRN_EMBEDDER": "none"}, os.path.join(work, "base.log"))
        print(f"loading {args.size} memories ...", file=sys.stderr)
        subprocess.run(
            [args.bench, "--url", d.url(), "--size", str(args.size), "--phases", "load", "--seed", str(args.seed)],
            check=True, stdout=subprocess.DEVNULL,
        )
        d.stop()
    rows = []
    for spec in args.model:
        name, model_dir = spec.split("=", 1)
        data = os.path.join(work, name)
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(data)
        shutil.copy(os.path.join(base, "cairn.db"), os.path.join(data, "cairn.db"))
        # The model's own id, as the daemon stores vectors under it.
        probe = Daemon(args.cairn, data, home, model_env(name, model_dir),
                       os.path.join(work, f"{name}.log"))
        model_id = get_json(probe.port, "/stats").get("embedding_model")
        probe.stop()
        if not model_id:
            raise SystemExit(f"{name}: the daemon reports no model (see {work}/{name}.log)")
        dims = model_width(model_dir)
        n = store_random_vectors(os.path.join(data, "cairn.db"), model_id, dims, args.seed)
        print(f"{name}: {n} random vectors of {dims} dims under {model_id}", file=sys.stderr)
        results = {}
        for mode in ("hybrid", "semantic"):
            # A fresh daemon per mode: the same queries again would hit its query cache.
            d = Daemon(args.cairn, data, home, model_env(name, model_dir), os.path.join(work, f"{name}.log"))
            wait_for_vectors(d, n)
            results[mode] = p50s(bench(args, d, mode, os.path.join(work, f"{name}-{mode}.json")))
            rss = d.rss_kb()
            d.stop()
        hybrid, semantic = results["hybrid"], results["semantic"]
        rows.append((name, dims, hybrid, semantic, rss))
    print(f"\n{args.size} memories, {args.searches} unseen queries per phase, p50 ms through HTTP")
    print("| model | dims | hybrid, project | hybrid, question | semantic, project | semantic, question | daemon VmRSS |")
    print("|---|---|---|---|---|---|---|")
    for name, dims, hybrid, semantic, rss in rows:
        print(
            f"| {name} | {dims} | {hybrid.get('search-project', 0):.2f} | {hybrid.get('search-question', 0):.2f} "
            f"| {semantic.get('search-project', 0):.2f} | {semantic.get('search-question', 0):.2f} "
            f"| {rss / 1024:.0f} MiB |"
        )


if __name__ == "__main__":
    main()
