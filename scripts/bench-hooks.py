#!/usr/bin/env python3
"""Wall time of `cairn hook <event>` per Claude Code event with the daemon running (p50, p95),
optionally side by side with engram's Claude Code hook scripts against the same daemon.

Usage: scripts/bench-hooks.py [--bin target/release/cairn] [--runs 50] [--baseline-bin OTHER] [--decimals 1]
                              [--engram-scripts DIR] [--floor] [--host claude-code|codex|gemini] [--cold]

`--host codex|gemini`: the events `cairn setup codex|gemini` wires, run as `cairn hook
--host=<host> <Event>` with that host's payloads (Codex copies Claude Code's; Gemini CLI renames
the events). `--cold`: no daemon when each hook starts (the bench's is stopped before every
run, and one a hook started is stopped after it): what a hook costs on a cold start, where it
starts the daemon or keeps its write in the spool within its budget.

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

`--baseline-bin OTHER`: another build of cairn (the last landed one), with its own daemon on its
own data dir seeded the same way, run in the same rotation: one table, side by side.

Each run's CPU is the process's user + system time and its children's (bash's curl and jq), from
`getrusage(RUSAGE_CHILDREN)` around it; the daemon's share is not in it.

The hooks run with the autostart setting Claude Code users have (the default: a hook may start
the daemon, so it trusts `daemon.json` and keeps writes in the spool when no daemon answers);
the seeding and the daemons themselves run with `CAIRN_AUTOSTART=never`. A daemon that a hook
started all the same (the bench's own went away) is stopped at the end.

`--floor`: `/bin/true` joins the rotation (same subprocess call, same payload on stdin), so the
table shows what any process start costs through this harness on this machine at that time.
"""

import argparse
import resource
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


def host_rows(host):
    """The rows of `--host codex|gemini`: (label, event, payload fields, None)."""
    if host == "codex":
        return [
            ("SessionStart (startup)", "SessionStart", {"source": "startup"}, None),
            ("UserPromptSubmit", "UserPromptSubmit", {"prompt": "how does the payment worker retry failed charges?"},
             None),
            ("PreToolUse", "PreToolUse", {"tool_name": "mcp__cairn__mem_save", "tool_input": {"title": "t"}}, None),
            ("PostToolUse", "PostToolUse", {"tool_name": "shell", "tool_input": {"command": "ls"}}, None),
            ("Stop", "Stop", {"last_assistant_message": "All done."}, None),
            ("PreCompact", "PreCompact", {"trigger": "auto"}, None),
            ("SessionEnd", "SessionEnd", {"reason": "other"}, None),
        ]
    return [
        ("SessionStart (startup)", "SessionStart", {"source": "startup"}, None),
        ("BeforeAgent", "BeforeAgent", {"prompt": "how does the payment worker retry failed charges?"}, None),
        ("AfterAgent", "AfterAgent", {"prompt": "retry?", "prompt_response": "All done."}, None),
        ("PreCompress", "PreCompress", {"trigger": "auto"}, None),
        ("SessionEnd", "SessionEnd", {"reason": "exit"}, None),
    ]


def stop_daemon_of(data):
    """Stop whatever daemon runs on `data` and wait until it is gone (`--cold`)."""
    try:
        pid = json.loads((data / "daemon.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return
    try:
        os.kill(pid, 15)
    except OSError:
        pass
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.01)
    (data / "daemon.json").unlink(missing_ok=True)


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def children_cpu_ms():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def timed(cmd, payload, env, cwd, what):
    """(wall ms, CPU ms, stdout) of one run."""
    cpu0 = children_cpu_ms()
    t0 = time.perf_counter()
    out = subprocess.run(cmd, input=json.dumps(payload).encode(), env=env, cwd=cwd, capture_output=True)
    ms = (time.perf_counter() - t0) * 1000
    cpu = children_cpu_ms() - cpu0
    if out.returncode != 0 or out.stderr:
        sys.exit(f"{what}: exit {out.returncode}: {out.stderr.decode()}")
    return ms, cpu, out.stdout.decode()


def start_daemon(binary, env, data):
    """Start `binary serve` on a temp data dir, seeded with 20 memories; (process, port)."""
    daemon = subprocess.Popen([binary, "serve", "--port", "0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while not (data / "daemon.json").exists():
        if time.time() > deadline or daemon.poll() is not None:
            daemon.kill()
            sys.exit(f"the daemon of {binary} did not start")
        time.sleep(0.05)
    time.sleep(0.2)
    port = json.loads((data / "daemon.json").read_text())["addr"].rsplit(":", 1)[1]
    for i in range(20):
        subprocess.run([binary, "save", f"Payment worker note {i}", f"Retries and backoff, item {i}",
                        "--project", "shop-api"], env=env, check=True, capture_output=True)
    return daemon, port


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "cairn"))
    ap.add_argument("--baseline-bin", metavar="OTHER", help="another cairn build, timed side by side")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--only", metavar="LABEL", action="append",
                    help="time only the rows whose label starts with LABEL (repeatable)")
    ap.add_argument("--floor", action="store_true",
                    help="time /bin/true in the same rotation: the cost of any process start here")
    ap.add_argument("--host", choices=["claude-code", "codex", "gemini"], default="claude-code",
                    help="whose hooks: Claude Code's (default), Codex's or Gemini CLI's")
    ap.add_argument("--cold", action="store_true", help="no daemon running when each hook starts")
    ap.add_argument("--decimals", type=int, default=1,
                    help="digits after the point in the table (2 tells builds apart that 0.1 ms steps hide)")
    ap.add_argument("--engram-scripts", metavar="DIR",
                    help="engram's plugin/claude-code/scripts, timed side by side against the same daemon")
    args = ap.parse_args()
    args.bin = str(Path(args.bin).resolve())
    baseline = str(Path(args.baseline_bin).resolve()) if args.baseline_bin else None
    engram = Path(args.engram_scripts).resolve() if args.engram_scripts else None
    if engram:
        if not (engram / "session-start.sh").is_file():
            sys.exit(f"{engram} has no session-start.sh: give engram's plugin/claude-code/scripts")
        missing = [tool for tool in ("bash", "curl", "jq") if shutil.which(tool) is None]
        if missing:
            sys.exit(f"engram's scripts need {', '.join(missing)} on PATH")
    with tempfile.TemporaryDirectory(prefix="cairn-bench-hooks-") as tmp:
        project = Path(tmp, "shop-api")
        project.mkdir()
        transcript = Path(tmp, "t.jsonl")
        transcript.write_text(json.dumps({"type": "assistant", "message": {"role": "assistant", "model": "m",
                              "usage": {"input_tokens": 150000}}}) + "\n")
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "ENGRAM_"))}
        clean.update(CAIRN_AUTOSTART="never", CAIRN_EMBEDDER="none", NO_COLOR="1")
        env = dict(clean, CAIRN_DATA_DIR=str(Path(tmp, "data")))
        base_env = dict(clean, CAIRN_DATA_DIR=str(Path(tmp, "baseline-data")))
        # hooks as Claude Code runs them: the default autostart (no CAIRN_AUTOSTART)
        hook_env = {k: v for k, v in env.items() if k != "CAIRN_AUTOSTART"}
        base_hook_env = {k: v for k, v in base_env.items() if k != "CAIRN_AUTOSTART"}
        daemons = []
        try:
            daemon, port = start_daemon(args.bin, env, Path(env["CAIRN_DATA_DIR"]))
            daemons.append(daemon)
            if baseline:
                daemons.append(start_daemon(baseline, base_env, Path(base_env["CAIRN_DATA_DIR"]))[0])
            # engram's scripts read only ENGRAM_PORT (the host is fixed at 127.0.0.1).
            engram_env = dict(env, ENGRAM_PORT=port)
            base = {"transcript_path": str(transcript), "cwd": str(project)}
            table = []
            for label, event, extra, script in (rows() if args.host == "claude-code" else host_rows(args.host)):
                if args.only and not any(label.startswith(only) for only in args.only):
                    continue
                script_path = engram / script if engram and script and (engram / script).is_file() else None
                times = {"cairn": ([], []), "baseline": ([], []), "engram": ([], []), "floor": ([], [])}
                for run in range(args.runs):
                    # a new session each run and tool, so "first prompt" and "startup" are real firsts
                    payload = dict(base, **extra, hook_event_name=event)
                    host_flag = [] if args.host == "claude-code" else [f"--host={args.host}"]
                    jobs = [("cairn", [args.bin, "hook", *host_flag, event], hook_env)]
                    if baseline:
                        jobs.append(("baseline", [baseline, "hook", event], base_hook_env))
                    if args.floor:
                        jobs.append(("floor", ["/bin/true"], env))
                    if script_path:
                        jobs.append(("engram", ["bash", str(script_path)], engram_env))
                    # the order rotates, so no tool always runs right after another
                    jobs = jobs[run % len(jobs):] + jobs[:run % len(jobs)]
                    for who, cmd, job_env in jobs:
                        if args.cold and who == "cairn":
                            stop_daemon_of(Path(env["CAIRN_DATA_DIR"]))
                        ms, cpu, stdout = timed(cmd, dict(payload, session_id=str(uuid.uuid4())), job_env, project,
                                                f"{who} {label}")
                        times[who][0].append(ms)
                        times[who][1].append(cpu)
                        # engram's start scripts print the project's context: proof they reached
                        # this daemon (a script that cannot reach it starts `engram serve` instead)
                        if who == "engram" and run == 0 and script in ("session-start.sh", "post-compaction.sh") \
                                and "Payment worker note" not in stdout:
                            sys.exit(f"engram {script} did not get the context from the daemon:\n{stdout}")
                table.append((label, times, script if script_path else None))
            if engram and any(script == "subagent-stop.sh" for _, _, script in table):
                # the sub-agent capture went through engram's script too
                found = subprocess.run([args.bin, "search", "ledger service", "--project", "shop-api", "--json"],
                                       env=env, check=True, capture_output=True)
                if not json.loads(found.stdout)["hits"]:
                    sys.exit("engram subagent-stop.sh stored nothing")
            print_table(table, args, baseline, engram)
        finally:
            for daemon in daemons:
                daemon.terminate()
                daemon.wait(timeout=10)
            stop_started_daemons([Path(env["CAIRN_DATA_DIR"]), Path(base_env["CAIRN_DATA_DIR"])], daemons)


def stop_started_daemons(data_dirs, ours):
    """Stop a daemon a hook started on one of the bench's data dirs (its record names it)."""
    for data in data_dirs:
        try:
            pid = json.loads((data / "daemon.json").read_text())["pid"]
        except (OSError, ValueError, KeyError):
            continue
        if pid not in [d.pid for d in ours]:
            print(f"a hook started a daemon on {data} (pid {pid}); stopping it", file=sys.stderr)
            try:
                os.kill(pid, 15)
            except OSError:
                pass


def print_table(table, args, baseline, engram):
    host = "" if args.host == "claude-code" else f" --host={args.host}"
    state = "no daemon at each start (cold)" if args.cold else "daemon running"
    print(f"cairn hook{host}, {state}, {args.runs} runs each ({args.bin})")
    if baseline:
        print(f"baseline: {baseline}, its own daemon")
    if engram:
        print(f"engram's scripts from {engram}, same daemon and payloads")
    print("wall and CPU (user + system, with children) in ms; p50 unless said")
    head = ["event", "cairn wall", "cairn p95", "cairn CPU"]
    if baseline:
        head += ["baseline wall", "baseline CPU"]
    if engram:
        head += ["engram script", "engram wall", "engram CPU", "engram/cairn wall"]
    if args.floor:
        head += ["/bin/true wall", "/bin/true CPU"]
    print("| " + " | ".join(head) + " |")
    print("|---|" + "|".join("---" if h == "engram script" else "---:" for h in head[1:]) + "|")
    def ms(value):
        return f"{value:.{args.decimals}f}"

    for label, times, script in table:
        wall, cpu = times["cairn"]
        cells = [label, ms(statistics.median(wall)), ms(percentile(wall, 95)),
                 ms(statistics.median(cpu))]
        if baseline:
            bwall, bcpu = times["baseline"]
            cells += [ms(statistics.median(bwall)), ms(statistics.median(bcpu))]
        if engram:
            ewall, ecpu = times["engram"]
            if ewall:
                cells += [f"`{script}`", ms(statistics.median(ewall)), ms(statistics.median(ecpu)),
                          f"{statistics.median(ewall) / statistics.median(wall):.1f}×"]
            else:
                cells += ["—", "", "", ""]
        if args.floor:
            fwall, fcpu = times["floor"]
            cells += [ms(statistics.median(fwall)), ms(statistics.median(fcpu))]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
