#!/usr/bin/env python3
"""The keep question measured on a recorded extraction run (crates/cairn-llm/examples/keep-probe.rs).

  prepare REPORT SPLIT_DIR OUT   sessions as the pipeline shows them (text and one-line tool notes)
                                 with the memories a `cairn-eval extraction --details --json` report
                                 saved, one JSON line a session, for the example to score
  score REPORT SCORES [THRESHOLD...]
                                 how well ln P(yes) - ln P(no) ranks right memories above wrong ones,
                                 and what dropping model-worded memories below each threshold does:
                                 wrong and right memories dropped, facts lost, precision before/after

REPORT is a replay report of the run (`--provider replay --replay A,B --details --json`), so its
verdicts and memories are the code's now (docs/benchmarks/llm.md's figures were read with the code
of 2eb993c; a later filter, such as 6da7ff3's, saves fewer memories and moves them a little).
Example (holdout36, whose answers are in eval/extraction-runs/3f9c7b2):

  target/release/cairn-eval extraction --provider replay --split holdout36 --summaries --details --json \\
      --replay eval/extraction-runs/3f9c7b2/holdout36-a.json,eval/extraction-runs/3f9c7b2/holdout36-b.json > r.json
  python3 scripts/keep-probe.py prepare r.json eval/extraction/holdout36 in.jsonl
  cargo run --release -p cairn-llm --features local --example keep-probe -- --sessions in.jsonl --out s.jsonl
  python3 scripts/keep-probe.py score r.json s.jsonl 0.75
"""
import glob
import json
import re
import sys

TOOL_NOTE_CHARS = 160  # cairn-history's extraction.rs
CANONICAL = {"Agent": "task", "Task": "task", "Write": "edit", "MultiEdit": "edit",
             "NotebookEdit": "edit", "AskUserQuestion": "question"}
FACT = re.compile(r'"content":\s*"((?:[^"\\]|\\.)*)"')


def said(message):
    pieces = [message["text"].strip()] if message["text"].strip() else []
    for call in message.get("tools", []):
        shown = " ".join(json.dumps(call["input"], ensure_ascii=False, separators=(",", ":")).split())
        cut = shown[:TOOL_NOTE_CHARS] + ("…" if len(shown) > TOOL_NOTE_CHARS else "")
        pieces.append("(ran %s: %s)" % (CANONICAL.get(call["tool"], call["tool"].lower()), cut))
    return "\n".join(pieces)


def norm(text):
    return re.sub(r"\s+", " ", text).strip().lower()


def prepare(report, split_dir, out):
    sessions = {}
    for path in glob.glob(split_dir + "/*.json"):
        session = json.load(open(path))
        sessions[session["id"]] = session
    with open(out, "w") as f:
        for run in json.load(open(report))["per_session"]:
            messages = [{"role": m["role"], "text": said(m)} for m in sessions[run["id"]]["messages"]]
            memories = [{"i": i, "content": m["content"]} for i, m in enumerate(run["memories"])]
            f.write(json.dumps({"sid": run["id"], "messages": [m for m in messages if m["text"]],
                                "memories": memories}, ensure_ascii=False) + "\n")


def model_worded(run, content):
    """Whether a memory is one of the model's facts (its words are in an answer), not a reader's."""
    answered = []
    for call in run["calls"]:
        for m in FACT.finditer(call["answer"]):
            try:
                answered.append(norm(json.loads('"' + m.group(1) + '"')))
            except ValueError:
                answered.append(norm(m.group(1)))
    c = norm(content)
    return any(c[:40] in a or a[:40] in c for a in answered)


def auc(rows):
    right = [r["score"] for r in rows if r["right"]]
    wrong = [r["score"] for r in rows if not r["right"]]
    pairs = [(p > n) + 0.5 * (p == n) for p in right for n in wrong]
    return sum(pairs) / len(pairs) if pairs else float("nan")


def score(report, scores, thresholds):
    scored = {}
    for line in open(scores):
        s = json.loads(line)
        scored[(s["sid"], s["i"])] = s["score"]
    sessions = {}
    for run in json.load(open(report))["per_session"]:
        rows = []
        for i, m in enumerate(run["memories"]):
            if (run["id"], i) not in scored:
                continue
            v = m["verdict"]
            rows.append({"score": scored[(run["id"], i)], "right": bool(v["states"]) or v["acceptable"],
                         "states": v["states"], "model": model_worded(run, m["content"])})
        if rows:
            sessions[run["id"]] = rows
    every = [r for rows in sessions.values() for r in rows]
    right = sum(r["right"] for r in every)
    print("memories %d in %d sessions, right %d; ranking (AUC) all %.3f, model-worded %.3f"
          % (len(every), len(sessions), right, auc(every), auc([r for r in every if r["model"]])))
    for t in thresholds:
        dropped_wrong = dropped_right = lost = kept = kept_right = 0
        for rows in sessions.values():
            # By the rule, not by membership: two memories may have equal rows.
            dropped = [r for r in rows if r["model"] and r["score"] < t]
            keep = [r for r in rows if not (r["model"] and r["score"] < t)]
            dropped_wrong += sum(not r["right"] for r in dropped)
            dropped_right += sum(r["right"] for r in dropped)
            lost += len({f for r in rows for f in r["states"]} - {f for r in keep for f in r["states"]})
            kept += len(keep)
            kept_right += sum(r["right"] for r in keep)
        print("below %.2f: %d wrong and %d right dropped, %d facts lost, precision %.3f -> %.3f"
              % (t, dropped_wrong, dropped_right, lost, right / len(every), kept_right / max(kept, 1)))


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "prepare":
        prepare(*sys.argv[2:5])
    elif len(sys.argv) >= 4 and sys.argv[1] == "score":
        score(sys.argv[2], sys.argv[3], [float(t) for t in sys.argv[4:]] or [0.75])
    else:
        sys.exit(__doc__)
