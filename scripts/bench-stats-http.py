#!/usr/bin/env python3
"""Time `GET /stats`, the dashboard `GET /ui` and each op the dashboard reads, through a running
daemon over loopback (one keep-alive connection): the first call, then the median of RUNS.

    python3 scripts/bench-stats-http.py PORT [RUNS]

Start the daemon on the store to measure first, e.g. the one the stats bench kept
(`CAIRN_BENCH_DB=FILE cargo bench -p cairn-core --bench stats -- --count 1000000`, FILE moved to
DIR/cairn.db): `HOME=EMPTY CLAUDE_CONFIG_DIR=EMPTY CAIRN_EMBEDDER=none target/release/cairn serve
--data-dir DIR --port PORT --model-install never`. See docs/benchmarks/server.md.
"""
import http.client
import json
import statistics
import sys
import time

PORT = int(sys.argv[1])
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 11
CONN = http.client.HTTPConnection("127.0.0.1", PORT, timeout=600)


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json"} if data else {}
    started = time.perf_counter()
    CONN.request(method, path, body=data, headers=headers)
    response = CONN.getresponse()
    payload = response.read()
    return (time.perf_counter() - started) * 1e3, response.status, len(payload)


def op(name, **args):
    return ("POST", "/v1/op", {"op": name, "args": args})


CASES = [
    ("GET /stats", ("GET", "/stats", None)),
    ("POST /v1/op stats", op("stats")),
    ("GET /ui (dashboard)", ("GET", "/ui", None)),
    ("op memories_per_day", op("memories_per_day", days=30)),
    ("op list 10", op("list", limit=10, all_projects=True)),
    ("op recent_prompts", op("recent_prompts", limit=5)),
    ("op history_stats", op("history_stats")),
    ("op sync_status", op("sync_status")),
    ("op extraction_status", op("extraction_status")),
]

for name, (method, path, body) in CASES:
    first = call(method, path, body)
    times = [call(method, path, body) for _ in range(RUNS)]
    ms = sorted(t[0] for t in times)
    print(
        f"{name:<24} first {first[0]:9.2f} ms  median {statistics.median(ms):8.2f} ms"
        f"  min {ms[0]:.2f} max {ms[-1]:.2f}  status {times[0][1]}  bytes {times[0][2]}"
    )
