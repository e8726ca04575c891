#!/usr/bin/env python3
"""Calibrate the [MEMORY] block's similarity_threshold on a cairn-eval `--dump` file.

Usage: cargo run --release -p cairn-eval -- --sets coding --dump rankings.jsonl
       python3 scripts/calibrate-threshold.py rankings.jsonl [max_relevant] [split]

For each threshold, over the top `max_relevant` (default 10) hits of each question: precision
(share of kept hits that are expected memories), recall (share of the expected memories found
in the top that are kept), F1, and the share of questions left with at least one expected hit.
Scores are the hybrid ranking's re-ranker relevance (what `min_score` cuts on in hybrid mode)
and, for comparison, the semantic cosine.
"""
import json
import sys


def load(path):
    questions = []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if "question" in row:
                questions.append(row)
    return questions


def table(questions, mode, top):
    print(f"\n{mode}: threshold  precision  recall  F1     questions-with-a-good-hit")
    best = None
    for step in range(0, 100, 5):
        t = step / 100
        if mode == "semantic" and t > 0.6:
            break
        kept = good_kept = good_top = answered = 0
        for q in questions:
            expected = set(q["expected"])
            ranking = q.get(mode) or []
            hits = ranking[:top]
            good = [(i, s) for i, s, current in hits if i in expected and current]
            good_top += len(good)
            k = [(i, s, c) for i, s, c in hits if s >= t]
            kept += len(k)
            gk = sum(1 for i, s, c in k if i in expected and c)
            good_kept += gk
            answered += gk > 0
        p = good_kept / kept if kept else 1.0
        r = good_kept / good_top if good_top else 0.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        print(f"  {t:9.2f}  {p:9.3f}  {r:6.3f}  {f1:.3f}  {answered / len(questions):.3f}")
        if best is None or f1 > best[1]:
            best = (t, f1)
    print(f"  best F1 at {best[0]:.2f} ({best[1]:.3f})")


def main():
    split = sys.argv[3] if len(sys.argv) > 3 else "all"
    questions = [q for q in load(sys.argv[1]) if q.get("expected") and split in ("all", q.get("split"))]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    print(f"{len(questions)} questions ({split}) with expected memories, top {top}")
    for mode in ["hybrid", "semantic"]:
        table(questions, mode, top)


if __name__ == "__main__":
    main()
