#!/usr/bin/env python3
"""Wall time of `cairn hook <event>` per Claude Code event with the daemon running (p50, p95),
optionally side by side with engram's Claude Code hook scripts against the same daemon.

Usage: scripts/bench-hooks.py [--bin target/release/cairn] [--runs 50] [--engram-scripts DIR]

Starts `cairn serve --port 0` on a temp data dir (stopped by its pid at the end), seeds a few
memories, then runs each hook `--runs` times as Claude Code would: a new process, the payload
on stdin, the answer read from stdout. Each run is one process start, the connection to the
daemon and the event's round trips. Numbers only; nothing is asserted.

`--engram-scripts DIR`: DIR holds engram's `plugin/claude-code/scripts` (bash + curl + jq).
cairn's daemon speaks engram's HTTP API, so each script runs against the same daemon
(`ENGRAM_PORT` is its port), with the same payload as the cairn hook of its row, interleaved
with it run by run (the order alternates), and the table gets engram's p50, p95 and the ratio.
A script runs where engram's `hooks/hooks.json` runs it: `session-start.sh` on SessionStart
`startup`, `post-compaction.sh` on SessionStart `compact`, `subagent-stop.sh` on SubagentStop,
`session-stop.sh` on Stop, `user-prompt-submit.sh` (when the checkout has one) on
UserPromptSubmit. Each tool gets its own session ids, so a "first" is a first for both.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def rows():
    """(label, cairn event, payload fields, engram script or None), in table order."""
    learn = "Done.\n\n## Key Learnings:\n1. The payment worker retries three times with backoff\n"
    sub = "Checked.\n\n## Key Learnings:\n1. Refunds go through the ledger service, never the gateway\n"
    return [
        ("SessionStart (startup)", "SessionStart", {"source": "startup"}, "session-start.sh"),
        ("SessionStart (resume)", "SessionStart", {"source": "resume"}, None),
        ("SessionStart (compact)", "SessionStart", {"source": "compact"}, "post-compaction.sh"),
        ("UserPromptSubmit", "UserPromptSubmit", {"prompt": "how does the payment worker retry failed charges?"},
         "user-prompt-submit.sh"),
        ("PreToolUse", "PreToolUse", {"tool_name": "mcp__cairn__mem_save", "tool_input": {"title": "t", "content": "c"}},
         None),
        ("PostToolUse", "PostToolUse",
         {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_response": {"stdout": ""}}, None),
        ("SubagentStart", "SubagentStart", {"agent_id": "a1", "agent_type": "general-purpose"}, None),
        # engram's script reads the sub-agent's output from `stdout`, a field Claude Code does
        # not send (it sends `last_assistant_message`); both carry the text so both capture it.
        ("SubagentStop (learnings)", "SubagentStop",
         {"agent_id": "a1", "agent_type": "general-purpose", "last_assistant_message": sub, "stdout": sub},
         "subagent-stop.sh"),
        ("Stop", "Stop", {"last_assistant_message": "All done."}, "session-stop.sh"),
        ("Stop (learnings)", "Stop", {"last_assistant_message": learn}, "session-stop.sh"),
        ("PostCompact", "PostCompact", {"trigger": "auto", "compact_summary": "We reworked the payment worker."}, None),
        ("SessionEnd", "SessionEnd", {"reason": "other"}, None),
    ]


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def timed(cmd, payload, env, cwd, what):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, input=json.dumps(payload).encode(), env=env, cwd=cwd, capture_output=True)
    ms = (time.perf_counter() - t0) * 1000
    if out.returncode != 0 or out.stderr:
        sys.exit(f"{what}: exit {out.returncode}: {out.stderr.decode()}")
    return ms, out.stdout.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "cairn"))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--engram-scripts", metavar="DIR",
                    help="engram's plugin/claude-code/scripts, timed side by side against the same daemon")
    args = ap.parse_args()
    args.bin = str(Path(args.bin).resolve())
    engram = Path(args.engram_scripts).resolve() if args.engram_scripts else None
    if engram:
        if not (engram / "session-start.sh").is_file():
            sys.exit(f"{engram} has no session-start.sh: give engram's plugin/claude-code/scripts")
        missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
        if missing:
            sys.exit(f"engram's scripts need {', '.join(missing)} on PATH")
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
            port = json.loads((data / "daemon.json").read_text())["addr"].rsplit(":", 1)[1]
            # engram's scripts read only ENGRAM_PORT (the host is fixed at 127.0.0.1).
            engram_env = dict(env, ENGRAM_PORT=port)
            for i in range(20):
                subprocess.run([args.bin, "save", f"Payment worker note {i}", f"Retries and backoff, item {i}",
                                "--project", "shop-api"], env=env, check=True, capture_output=True)
            base = {"transcript_path": str(transcript), "cwd": str(project)}
            table = []
            for label, event, extra, script in rows():
                script_path = engram / script if engram and script and (engram / script).is_file() else None
                cairn_ms, engram_ms = [], []
                for run in range(args.runs):
                    # a new session each run and tool, so "first prompt" and "startup" are real firsts
                    payload = dict(base, **extra, hook_event_name=event)
                    jobs = [("cairn", [args.bin, "hook", event], env, cairn_ms)]
                    if script_path:
                        jobs.append(("engram", ["bash", str(script_path)], engram_env, engram_ms))
                        if run % 2:
                            jobs.reverse()
                    for who, cmd, job_env, times in jobs:
                        ms, stdout = timed(cmd, dict(payload, session_id=str(uuid.uuid4())), job_env, project,
                                           f"{who} {label}")
                        times.append(ms)
                        # engram's start scripts print the project's context: proof they reached
                        # this daemon (a script that cannot reach it starts `engram serve` instead)
                        if who == "engram" and run == 0 and script in ("session-start.sh", "post-compaction.sh") \
                                and "Payment worker note" not in stdout:
                            sys.exit(f"engram {script} did not get the context from the daemon:\n{stdout}")
                table.append((label, cairn_ms, engram_ms, script if script_path else None))
            if engram:
                # the sub-agent capture went through engram's script too
                found = subprocess.run([args.bin, "search", "ledger service", "--project", "shop-api", "--json"],
                                       env=env, check=True, capture_output=True)
                if not json.loads(found.stdout)["hits"]:
                    sys.exit("engram subagent-stop.sh stored nothing")
            print_table(table, args, engram)
        finally:
            daemon.terminate()
            daemon.wait(timeout=10)


def print_table(table, args, engram):
    print(f"cairn hook, daemon running, {args.runs} runs each ({args.bin})")
    if not engram:
        print(f"{'event':<28} {'p50 ms':>8} {'p95 ms':>8}")
        for label, cairn_ms, _, _ in table:
            print(f"{label:<28} {statistics.median(cairn_ms):>8.1f} {percentile(cairn_ms, 95):>8.1f}")
        return
    print(f"engram's scripts from {engram}, interleaved, same daemon and payloads")
    print("| event | cairn p50 ms | cairn p95 ms | engram script | engram p50 ms | engram p95 ms | engram/cairn p50 |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for label, cairn_ms, engram_ms, script in table:
        c50, c95 = statistics.median(cairn_ms), percentile(cairn_ms, 95)
        if engram_ms:
            e50, e95 = statistics.median(engram_ms), percentile(engram_ms, 95)
            print(f"| {label} | {c50:.1f} | {c95:.1f} | `{script}` | {e50:.1f} | {e95:.1f} | {e50 / c50:.1f}× |")
        else:
            print(f"| {label} | {c50:.1f} | {c95:.1f} | — | | | |")


if __name__ == "__main__":
    main()
