#!/usr/bin/env python3
"""Newest fact first, through the HTTP API: the knowledge-update set (eval/knowledge-updates.json).

A fresh `cairn serve` (temporary data dir and HOME, loopback, a free port) gets the set's
memories one by one in `seq` order, each in its own session (`POST /sessions`, then
`POST /observations`), the daemon is left to embed them (with `--model`) and to judge them (its
`cairn-judge` worker; rules only unless the daemon has an `[llm]` model), then each question is
asked as `GET /search?q=…&project=…&limit=10`. A question counts when its first hit is the newest
memory of its case; the rate is printed per split (dev, test) and, for the misses, which memory
came first.

    python3 scripts/eval-knowledge-updates.py --cairn target/debug/cairn \\
        [--model multilingual-e5-small=target/test-deps/multilingual-e5-small] [--json out.json]

Run it with an older binary for the figure before a change. Tune on `dev` only: `test` is held
out (eval/README.md).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def start_daemon(cairn, work, env_extra):
    port = free_port()
    env = dict(os.environ, HOME=os.path.join(work, "home"), CAIRN_DATA_DIR=os.path.join(work, "data"),
               CAIRN_AUTOSTART="never")
    env.update(env_extra)
    log = open(os.path.join(work, "serve.log"), "ab")
    proc = subprocess.Popen([cairn, "serve", "--port", str(port), "--model-install", "never"],
                            env=env, stdout=log, stderr=log)
    deadline = time.time() + 120
    while True:
        try:
            call(port, "GET", "/health", timeout=2)
            return proc, port
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"cairn serve did not start (see {work}/serve.log)")
            time.sleep(0.1)


def save(port, memories):
    ids = {}
    for m in sorted(memories, key=lambda m: m["seq"]):
        call(port, "POST", "/sessions", {"id": m["session"], "project": m["project"]})
        body = {k: m[k] for k in ("title", "content", "project", "scope", "type", "topic_key") if m.get(k) is not None}
        body["session_id"] = m["session"]
        ids[m["key"]] = call(port, "POST", "/observations", body)["id"]
    return ids


def settle(port, timeout, semantic):
    """Wait until every memory has a vector (when a model runs) and the judge has looked at all."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        stats = call(port, "GET", "/stats")
        ready = stats.get("semantic_search") == "ready"
        embedded = not semantic or (ready and stats.get("embeddings_stored") == stats.get("total_observations"))
        if embedded:
            # The judge wakes after each commit and polls every 5 s: two polls after the last vector.
            time.sleep(11)
            return stats
        time.sleep(1)
    raise SystemExit("the daemon did not settle in time")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--set", default="eval/knowledge-updates.json")
    ap.add_argument("--model", help="NAME=DIR (CAIRN_MODEL / CAIRN_MODEL_DIR); default: lexical only")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--show-test-misses", action="store_true", help="list the test half's misses too")
    args = ap.parse_args()
    with open(args.set) as f:
        doc = json.load(f)
    env = {"CAIRN_EMBEDDER": "none"}
    if args.model:
        name, model_dir = args.model.split("=", 1)
        env = {"CAIRN_MODEL": name, "CAIRN_MODEL_DIR": os.path.abspath(model_dir)}
    work = tempfile.mkdtemp(prefix="cairn-ku-")
    proc, port = start_daemon(os.path.abspath(args.cairn), work, env)
    try:
        ids = save(port, doc["memories"])
        by_id = {v: k for k, v in ids.items()}
        stats = settle(port, args.timeout, bool(args.model))
        relations = call(port, "GET", "/conflicts/stats")
        figures = {"semantic_search": stats.get("semantic_search"), "relations": relations, "splits": {}}
        misses = []
        for split in ("dev", "test"):
            qs = [q for q in doc["questions"] if q["split"] == split]
            first = 0
            for q in qs:
                params = urllib.parse.urlencode({"q": q["query"], "project": q["project"], "limit": "10"})
                hits = call(port, "GET", "/search?" + params)
                top = by_id.get(hits[0]["id"]) if hits else None
                if top in q["expected"]:
                    first += 1
                else:
                    misses.append((split, q["id"], q["query"], top, q["expected"][0]))
            figures["splits"][split] = {"questions": len(qs), "first_hit_newest": first, "rate": first / len(qs)}
            print(f"{split:>4}: first hit from the newest memory {first}/{len(qs)} = {first / len(qs):.3f}")
        # The test half's misses stay unseen unless asked for: nobody tunes on them by accident.
        for split, qid, query, top, want in misses:
            if split == "dev" or args.show_test_misses:
                print(f"  miss {split} {qid} {query!r}: first {top}, newest {want}")
        print(f"relations: {json.dumps(relations)}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(figures, f, indent=1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
