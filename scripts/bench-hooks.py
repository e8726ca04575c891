#!/usr/bin/env python3
"""Wall time of `cairn hook <event>` per Claude Code event with the daemon running (p50, p95).

Usage: scripts/bench-hooks.py [--bin target/release/cairn] [--runs 50]

Starts `cairn serve --port 0` on a temp data dir (stopped by its pid at the end), seeds a few
memories, then runs each hook `--runs` times as Claude Code would: a new process, the payload
on stdin, the answer read from stdout. Each run is one process start, the connection to the
daemon and the event's round trips. Numbers only; nothing is asserted.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def payloads(project: str, transcript: str, session: str):
    base = {"session_id": session, "transcript_path": transcript, "cwd": project}
    learn = "Done.\n\n## Key Learnings:\n1. The payment worker retries three times with backoff\n"
    return [
        ("SessionStart", {"source": "startup"}),
        ("SessionStart", {"source": "resume"}),
        ("UserPromptSubmit", {"prompt": "how does the payment worker retry failed charges?"}),
        ("PreToolUse", {"tool_name": "mcp__cairn__mem_save", "tool_input": {"title": "t", "content": "c"}}),
        ("PostToolUse", {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": ""}}),
        ("Stop", {"last_assistant_message": "All done."}),
        ("Stop", {"last_assistant_message": learn}),
        ("PostCompact", {"trigger": "auto", "compact_summary": "We reworked the payment worker."}),
        ("SessionEnd", {"reason": "other"}),
    ], base


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "cairn"))
    ap.add_argument("--runs", type=int, default=50)
    args = ap.parse_args()
    args.bin = str(Path(args.bin).resolve())
    with tempfile.TemporaryDirectory(prefix="cairn-bench-hooks-") as tmp:
        data, project = Path(tmp, "data"), Path(tmp, "shop-api")
        project.mkdir()
        transcript = Path(tmp, "t.jsonl")
        transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "model": "m",
                              "usage": {"input_tokens": 150000}}}) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "ENGRAM_"))}
        env.update(CAIRN_DATA_DIR=str(data), CAIRN_AUTOSTART="never", CAIRN_EMBEDDER="none", NO_COLOR="1")
        daemon = subprocess.Popen([args.bin, "serve", "--port", "0"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 20
            while not (data / "daemon.json").exists():
                if time.time() > deadline or daemon.poll() is not None:
                    sys.exit("the daemon did not start")
                time.sleep(0.05)
            time.sleep(0.2)
            for i in range(20):
                subprocess.run([args.bin, "save", f"Payment worker note {i}", f"Retries and backoff, item {i}",
                                "--project", "shop-api"], env=env, check=True, capture_output=True)
            steps, base = payloads(str(project), str(transcript), "")
            print(f"cairn hook, daemon running, {args.runs} runs each ({args.bin})")
            print(f"{'event':<28} {'p50 ms':>8} {'p95 ms':>8}")
            for event, extra in steps:
                times = []
                for _ in range(args.runs):
                    # a new session each run, so "first prompt" and "startup" are real firsts
                    payload = dict(base, **extra, session_id=str(uuid.uuid4()), hook_event_name=event)
                    t0 = time.perf_counter()
                    out = subprocess.run([args.bin, "hook", event], input=json.dumps(payload).encode(),
                                         env=env, cwd=project, capture_output=True)
                    times.append((time.perf_counter() - t0) * 1000)
                    if out.returncode != 0 or out.stderr:
                        sys.exit(f"{event}: exit {out.returncode}: {out.stderr.decode()}")
                label = f"{event} ({extra.get('source') or ('learnings' if 'Key' in str(extra) else '')})".replace(" ()", "")
                print(f"{label:<28} {statistics.median(times):>8.1f} {percentile(times, 95):>8.1f}")
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)


if __name__ == "__main__":
    main()
