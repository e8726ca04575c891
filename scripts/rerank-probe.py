#!/usr/bin/env python3
"""Recall of a pointwise LLM re-ranking, measured outside the daemon before it is built.

Inputs: the candidates `scripts/eval-http.py --dump-candidates` wrote (each question's
first-stage hits, each marked evidence or not) and the scores `examples/rerank-probe.rs` gave
its first --top hits (`ln P(yes) - ln P(no)` of the local model). Prints R@1/5/10 of

- `first`: the first stage's order;
- `llm`: the scored hits ordered by score (ties: first-stage order), the rest after them;
- `fused`: reciprocal-rank fusion of both orders, `1/(K + first) + weight/(K + llm)`, with the
  weight chosen on the dev half's questions and then applied once to the test half (the
  test-half figure is held out; the dev-half figure of `fused` is fitted, and says so).

A question's recall is the share of its evidence turns found (LoCoMo's questions may have
several), as in scripts/eval-http.py.

    python3 scripts/rerank-probe.py --candidates FILE --sample OUT [--dev 30 --test 60 --seed 42]
    python3 scripts/rerank-probe.py --candidates OUT --scores FILE [--scores FILE ...]

The first writes a seeded sample of the candidates (dev questions first) for the probe.

stdlib only.
"""

import argparse
import json
import random
import statistics

K = 60
WEIGHTS = [0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0]


def recall(order, question, k):
    expected = set(question["expected_ids"])
    found = {h["id"] for h in order[:k]} & expected
    return len(found) / len(expected)


def llm_order(question, scores):
    scored = question["hits"][: len(scores)]
    ranked = sorted(range(len(scored)), key=lambda i: (-scores[i], i))
    return [scored[i] for i in ranked] + question["hits"][len(scores):]


def fused_order(question, scores, weight):
    hits = question["hits"]
    llm_place = {id(h): p for p, h in enumerate(llm_order(question, scores), 1)}

    def value(place_hit):
        place, hit = place_hit
        v = 1 / (K + place)
        if place <= len(scores):
            v += weight / (K + llm_place[id(hit)])
        return v

    return [h for _, h in sorted(enumerate(hits, 1), key=lambda ph: (-value(ph), ph[0]))]


def figures(pairs, order_of):
    return tuple(statistics.mean(recall(order_of(q, s), q, k) for q, s in pairs) for k in (1, 5, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", required=True)
    ap.add_argument("--scores", action="append", help="rerank-probe.rs output (repeatable)")
    ap.add_argument("--sample", metavar="OUT", help="write a seeded sample of the candidates here and stop")
    ap.add_argument("--dev", type=int, default=30)
    ap.add_argument("--test", type=int, default=60)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()
    with open(args.candidates) as f:
        questions = [json.loads(line) for line in f]
    if args.sample:
        rng = random.Random(args.seed)
        chosen = [q for half, n in (("dev", args.dev), ("test", args.test))
                  for q in rng.sample([q for q in questions if q["split"] == half], n)]
        with open(args.sample, "w") as f:
            f.writelines(json.dumps(q) + "\n" for q in chosen)
        return
    if not args.scores:
        ap.error("--scores is required (or --sample)")
    scored = {}
    for path in args.scores:
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                scored[row["index"]] = row
    pairs = {"dev": [], "test": []}
    seconds = []
    for index, row in scored.items():
        q = questions[index]
        pairs[q["split"]].append((q, row["scores"]))
        seconds.append(row["seconds"])
    dev_best = max(WEIGHTS, key=lambda w: (figures(pairs["dev"], lambda q, s: fused_order(q, s, w))[2], -w)) \
        if pairs["dev"] else 1.0
    print(f"questions scored: dev {len(pairs['dev'])}, test {len(pairs['test'])}; "
          f"seconds per question p50 {statistics.median(seconds):.1f}")
    print(f"fusion weight chosen on dev (R@10): {dev_best}")
    print("| half | order | R@1 | R@5 | R@10 |")
    print("|---|---|---:|---:|---:|")
    for half in ("dev", "test"):
        if not pairs[half]:
            continue
        rows = [("first", lambda q, s: q["hits"]), ("llm", llm_order),
                (f"fused w={dev_best}" + (" (fitted here)" if half == "dev" else " (held out)"),
                 lambda q, s: fused_order(q, s, dev_best))]
        for name, order_of in rows:
            r1, r5, r10 = figures(pairs[half], order_of)
            print(f"| {half} | {name} | {r1:.3f} | {r5:.3f} | {r10:.3f} |")
    for half in ("dev", "test"):
        if pairs[half]:
            print(half, "fused R@10 by weight:",
                  {w: round(figures(pairs[half], lambda q, s: fused_order(q, s, w))[2], 3) for w in WEIGHTS})


if __name__ == "__main__":
    main()
