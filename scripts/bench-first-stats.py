#!/usr/bin/env python3
"""The first `GET /stats` of a restarted daemon, with the data dir's kept disk measure
(`disk-split.json`) and without it (the daemon then measures in the background and the request
counts `cairn.db` whole, `method` "pending…"; before, it walked every page).

Loads SIZE memories with cairn-bench into a temporary data dir, then restarts the daemon six
times, alternating with and without the kept file, and prints each first request's time.

    python3 scripts/bench-first-stats.py target/release/cairn target/release/cairn-bench 100000

stdlib only, like the other scripts/bench-*.py.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cairn, env, cwd):
    port = free_port()
    daemon = subprocess.Popen([cairn, "serve", "--port", str(port)], env=env, cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return daemon, port
        except OSError:
            time.sleep(0.05)
    daemon.kill()
    raise SystemExit("the daemon did not answer /health")


def first_stats(port):
    """Milliseconds of one GET /stats, and how its disk split was measured."""
    started = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=120) as r:
        body = json.load(r)
    return (time.perf_counter() - started) * 1000, body.get("disk", {}).get("method", "")


def stop(daemon):
    daemon.terminate()
    daemon.wait(timeout=30)


def main():
    cairn, bench, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    work = tempfile.mkdtemp(prefix="cairn-first-stats-")
    data = os.path.join(work, "data")
    os.makedirs(data)
    env = dict(os.environ, CAIRN_DATA_DIR=data, HOME=work, CAIRN_EMBEDDER="none",
               CAIRN_AUTOSTART="never", CAIRN_MODEL_INSTALL="never")
    kept, aside = os.path.join(data, "disk-split.json"), os.path.join(work, "disk-split.json")
    try:
        daemon, port = start(cairn, env, work)
        subprocess.run([bench, "--url", f"http://127.0.0.1:{port}", "--size", str(size), "--phases", "load",
                        "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
        first_stats(port)  # measures, and keeps the measure in the data dir
        stop(daemon)
        print(f"cairn.db: {os.path.getsize(os.path.join(data, 'cairn.db')) / 1e6:.0f} MB, {size} memories")
        for run in range(1, 4):
            for with_kept in (True, False):
                if with_kept and os.path.exists(aside):
                    os.rename(aside, kept)
                if not with_kept and os.path.exists(kept):
                    os.rename(kept, aside)
                daemon, port = start(cairn, env, work)
                ms, method = first_stats(port)
                stop(daemon)
                label = "kept measure" if with_kept else "no kept measure"
                print(f"restart {run}, {label}: first GET /stats {ms:.1f} ms ({method})", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
