#!/usr/bin/env python3
"""The daemon's save and search latency while its local model extracts sessions (issue 41's
target: no more than 10 % slower), with seconds per 20-turn session, tokens/s and the daemon's
peak RSS.

One release daemon on a temporary data dir with the local model selected (`cairn llm use
local`), a store of --memories memories (cairn-bench's load phase). Rounds alternate A B A B …:
A measures saves and searches through HTTP with nothing to extract; B writes --per-round
20-turn Claude Code sessions (four sessions of eval/extraction back to back, just written,
so the worker waits its 15 s cooldown as for a real session) where the host writes them, pokes
the daemon to archive them, and measures the same saves and searches until the daemon's own extraction
worker has extracted them all (`extraction_status`) and written each one's session summary (the
last model call of a conversation, ~35 s after its facts; read from the data dir's cairn.db,
read-only). Drift of a shared machine shows as A
moving between rounds.

The saves' titles and contents are words no other memory has, so the judge of arrivals should
find no neighbour of them to ask the model about; a B round lasts until the judge has also
looked at the facts the round's extraction wrote. The store is loaded before the model is chosen,
and the model is chosen (`cairn llm use local`, taken up by the running daemon) only once the
judge of arrivals has looked at every loaded memory: with no model it judges by rules and leaves
the rest pending, which a later arrival pass never asks the model about again. Otherwise the
judge would spend the A rounds asking the model about the loaded memories' neighbours (the
2026-12-03 08:52 run: 2,295 and 3,490 tokens in A1 and A2). The ledger's tokens during A rounds
are printed: they should be 0.

Prints a markdown table: save and search p50/p95 per round, B/A of the medians, seconds per
session, tokens/s, VmHWM.

    cargo build --release -p cairn -p cairn-bench
    bash scripts/install-test-deps.sh llm-qwen
    python3 scripts/bench-extraction-load.py \\
        --model-file target/test-deps/llm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf

stdlib only, like the other scripts/bench-*.py.
"""

import argparse
import json
import os
import pathlib
import random
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, method, path, body=None, timeout=3600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def vm_hwm_mb(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_transcripts(claude_dir, project_dir, count, first):
    """`count` 20-turn sessions (sessions `first`… of eval/extraction, four back to back) where
    Claude Code keeps them, their last message just written; their ids and files."""
    files = sorted((ROOT / "eval/extraction").glob("*/*.json"))
    slug = str(project_dir).replace("/", "-").replace(".", "-")
    out = claude_dir / "projects" / slug
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i in range(first, first + count):
        session = str(uuid.uuid4())
        messages = [m for k in range(4) for m in json.loads(files[(4 * i + k) % len(files)].read_text())["messages"]]
        # Written as the host writes a session that just went idle: the daemon's worker waits
        # its cooldown (15 s) from the last message, as it would for a real one.
        at = time.time() - 2
        lines = []
        for n, m in enumerate(messages):
            content = m["text"] if m["role"] == "user" else [{"type": "text", "text": m["text"]}]
            t = at + n / 100
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
            lines.append({"type": m["role"], "uuid": str(uuid.uuid4()), "parentUuid": None,
                          "isSidechain": False, "timestamp": stamp, "sessionId": session,
                          "cwd": str(project_dir), "version": "2.1.330",
                          "message": {"role": m["role"], "content": content, "id": str(uuid.uuid4()),
                                      "model": "claude-bench"}})
        path = out / f"{session}.jsonl"
        path.write_text("".join(json.dumps(l) + "\n" for l in lines))
        written.append((session, path))
    return written


def unique_words(rng, n):
    """Words no memory shares: the judge finds no neighbour among them."""
    return " ".join(f"w{rng.getrandbits(40):010x}" for _ in range(n))


def measure(port, ops, rng, keep_going=None, pause=0.0):
    """Alternating saves and searches; at least `ops` of each, and on while `keep_going()`,
    `pause` seconds apart (an agent's pace: a B round lasts minutes, and the store must not grow
    tenfold while it does)."""
    saves, searches = [], []
    while len(saves) < ops or (keep_going is not None and keep_going()):
        title = unique_words(rng, 4)
        body = {"session_id": "bench-load", "project": "bench", "type": "decision",
                "title": title, "content": f"{title} {unique_words(rng, 12)}"}
        t = time.perf_counter()
        status, _ = http(port, "POST", "/observations", body)
        saves.append((time.perf_counter() - t) * 1000)
        assert status in (200, 201), status
        # A word the load phase wrote into many memories: a search with real work.
        q = rng.choice(["cache", "deploy", "schema", "retry", "index", "queue", "token", "migration"])
        t = time.perf_counter()
        status, _ = http(port, "GET", f"/search?q={q}&project=bench")
        searches.append((time.perf_counter() - t) * 1000)
        assert status == 200, status
        time.sleep(pause)
    return saves, searches


def op(port, name, args):
    return http(port, "POST", "/v1/op", {"op": name, "args": args})


def extracted(port):
    """How many conversations the daemon has extracted, and those failing."""
    status, body = op(port, "extraction_status", {})
    assert status == 200, body
    return body.get("sessions", 0), body.get("failing", [])


def summaries(data):
    """How many session summaries a model has written (the worker's last call for a session)."""
    with sqlite3.connect(f"file:{data / 'cairn.db'}?mode=ro", uri=True, timeout=10) as db:
        return db.execute("SELECT count(*) FROM memory_provenance WHERE origin = 'summary'").fetchone()[0]


def judge_caught_up(data):
    """Whether the judge of arrivals has looked at every memory stored (its mark in cairn.db,
    read-only, at or past the newest memory's id)."""
    with sqlite3.connect(f"file:{data / 'cairn.db'}?mode=ro", uri=True, timeout=10) as db:
        mark = db.execute("SELECT last_memory_id FROM judge_mark WHERE id = 1").fetchone()
        newest = db.execute("SELECT max(id) FROM observations").fetchone()[0] or 0
    return mark is not None and mark[0] >= newest


def wait_for_the_judge(data, deadline):
    """Seconds until the judge of arrivals has caught up with the store."""
    started = time.time()
    while not judge_caught_up(data):
        assert time.time() < deadline, "the judge did not catch up with the store"
        time.sleep(1)
    return time.time() - started


def llm_tokens(cairn, env):
    """Today's tokens (in + out) the ledger counted, whatever the JSON's nesting."""
    out = subprocess.run([cairn, "llm", "status", "--json"], env=env, capture_output=True, text=True)
    total = 0

    def walk(v, key=""):
        nonlocal total
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, (int, float)) and key in ("tokens_in", "tokens_out", "input_tokens", "output_tokens"):
            total += v

    try:
        walk(json.loads(out.stdout))
    except json.JSONDecodeError:
        return float("nan")
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", default=str(ROOT / "target/release/cairn"))
    ap.add_argument("--bench", default=str(ROOT / "target/release/cairn-bench"))
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--model-file", required=True, help="the model's GGUF (cairn llm use local --from)")
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2, help="A B pairs")
    ap.add_argument("--per-round", type=int, default=2, help="sessions extracted in each B round")
    ap.add_argument("--ops", type=int, default=200, help="saves (and searches) in each A round, at least")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between two save+search pairs")
    ap.add_argument("--timeout", type=float, default=3600, help="longest a B round may take")
    ap.add_argument("--work", help="keep the data dir here")
    args = ap.parse_args()

    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="cairn-extract-load-"))
    data, home, project = work / "data", work / "home", work / "benchproject"
    for d in (data, home / ".claude", project):
        d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CAIRN_DATA_DIR=str(data), HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"),
               CAIRN_EMBEDDER="none", CAIRN_MODEL_INSTALL="never", CAIRN_AUTOSTART="never")
    port = free_port()
    daemon = subprocess.Popen([args.cairn, "serve", "--port", str(port)], env=env, cwd=project,
                              stdout=subprocess.DEVNULL, stderr=open(work / "daemon.log", "w"))
    try:
        deadline = time.time() + 60
        while http_ok(port) is False:
            assert time.time() < deadline and daemon.poll() is None, "the daemon did not start"
            time.sleep(0.2)
        http(port, "POST", "/sessions", {"id": "bench-load", "project": "bench"})
        rng = random.Random(7)
        if pathlib.Path(args.bench).is_file():
            subprocess.run([args.bench, "--url", f"http://127.0.0.1:{port}", "--size", str(args.memories),
                            "--phases", "load", "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
        else:  # no cairn-bench built: the same number of saves through HTTP
            measure(port, args.memories, rng)
        measure(port, 50, rng)  # warm-up
        waited = wait_for_the_judge(data, time.time() + 1800)
        print(f"the judge looked at every loaded memory {waited:.0f} s after the load", file=sys.stderr)
        subprocess.run([args.cairn, "llm", "use", "local", "--model", args.model, "--from", args.model_file],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        # The worker extracts conversations newer than its first pass with the model loaded
        # (`since`): the sessions are written after it.
        deadline = time.time() + 600
        while op(port, "extraction_status", {})[1].get("since") is None:
            assert time.time() < deadline, "the extraction worker never took up the model"
            time.sleep(0.5)
        rows, per_session, tokens_s, idle_tokens, failed = [], [], [], [], {}
        for r in range(args.rounds):
            tokens_before = llm_tokens(args.cairn, env)
            saves, searches = measure(port, args.ops, rng, pause=args.pause)
            idle_tokens.append(llm_tokens(args.cairn, env) - tokens_before)
            rows.append(("A", r + 1, saves, searches))
            before, _ = extracted(port)
            failed_before = len(failed)
            tokens_before = llm_tokens(args.cairn, env)
            started = time.time()
            for session, path in write_transcripts(home / ".claude", project, args.per_round, r * args.per_round):
                status, body = op(port, "history_ingest", {"host": "claude-code", "path": str(path)})
                assert status == 200, body

            def extracting():
                # A session the model failed on counts as finished for the round (the model did
                # its work; greedy decoding would fail it the same way again): it is reported,
                # not waited for.
                done, failing = extracted(port)
                for f in failing:
                    failed.setdefault(f["session_id"], f["last_error"])
                assert time.time() - started < args.timeout, "extraction did not finish in --timeout"
                written = summaries(data) + len(failed)
                # The round also lasts while the judge asks the model about the facts it wrote
                # (their neighbours among the earlier facts): work the extraction brought.
                return (done + len(failed) - failed_before < before + args.per_round
                        or written < (r + 1) * args.per_round or not judge_caught_up(data))

            saves, searches = measure(port, args.ops, rng, keep_going=extracting, pause=args.pause)
            spent = time.time() - started
            per_session.append(spent / args.per_round)
            tokens_s.append((llm_tokens(args.cairn, env) - tokens_before) / spent)
            rows.append(("B", r + 1, saves, searches))
            for kind, n, saves, searches in rows[-2:]:  # as they come: a long run keeps what it measured
                print(f"[{kind}{n}] {len(saves)} saves p50 {pct(saves, 50):.2f} ms, searches p50 "
                      f"{pct(searches, 50):.2f} ms; {per_session[-1]:.0f} s a session", file=sys.stderr, flush=True)
        hwm = vm_hwm_mb(daemon.pid)
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
    report(rows, per_session, tokens_s, idle_tokens, hwm, args)
    for session, error in failed.items():
        print(f"extraction failed: session {session}: {error}")


def http_ok(port):
    try:
        return http(port, "GET", "/health", timeout=1)[0] == 200
    except OSError:
        return False


def report(rows, per_session, tokens_s, idle_tokens, hwm, args):
    print(f"\n{args.memories} memories, model {args.model}, {args.per_round} sessions per B round\n")
    print("| round | saves | save p50 ms | save p95 ms | search p50 ms | search p95 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind, n, saves, searches in rows:
        print(f"| {kind}{n} | {len(saves)} | {pct(saves, 50):.2f} | {pct(saves, 95):.2f} | "
              f"{pct(searches, 50):.2f} | {pct(searches, 95):.2f} |")

    def median_of(kind, index):
        return statistics.median(pct(row[index], 50) for row in rows if row[0] == kind)

    print(f"\nB/A (medians of the rounds' p50): save {median_of('B', 2) / median_of('A', 2):.2f}, "
          f"search {median_of('B', 3) / median_of('A', 3):.2f} (target <= 1.10)")
    print(f"model tokens during the A rounds (should be 0): {idle_tokens}")
    print(f"seconds per session: p50 {statistics.median(per_session):.0f} s, max {max(per_session):.0f} s")
    print(f"tokens/s during B (ledger, in + out): {statistics.median(tokens_s):.1f}")
    print(f"daemon peak RSS (VmHWM): {hwm:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
