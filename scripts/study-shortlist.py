#!/usr/bin/env python3
"""How often the exact nearest memories are in the binary codes' shortlist, on a model's real
vectors: the cairn-eval vector cache (`<DATA_DIR>/eval-vectors/<model>.bin`, every memory and
question of the sets last evaluated). Some vectors are taken out as queries; the rest is the
store. For each shortlist size, recall@k of the shortlist (scored exactly) against an exact
scan, with codes around the store's mean (what cairn does) and around 0 (what it would be
without a centre).

    python3 scripts/study-shortlist.py DATA/eval-vectors/intfloat_multilingual_e5_small.bin
"""

import argparse
import random
import struct


def read_cache(path):
    vectors = []
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at + 12 <= len(data):
        dims = struct.unpack_from("<I", data, at + 8)[0]
        body = data[at + 12 : at + 12 + dims * 4]
        if len(body) < dims * 4:
            break
        vectors.append(struct.unpack(f"<{dims}f", body))
        at += 12 + dims * 4
    width = max(set(len(v) for v in vectors), key=[len(v) for v in vectors].count)
    return [v for v in vectors if len(v) == width]


def code(v, centre):
    bits = 0
    for i, (x, c) in enumerate(zip(v, centre)):
        if x > c:
            bits |= 1 << i
    return bits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cache")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--shortlists", default="20,40,80,160,400")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    vectors = read_cache(args.cache)
    rng = random.Random(args.seed)
    rng.shuffle(vectors)
    queries, store = vectors[: args.queries], vectors[args.queries :]
    dims = len(store[0])
    mean = [sum(v[d] for v in store) / len(store) for d in range(dims)]
    print(f"{len(store)} stored vectors of {dims} dims, {len(queries)} queries, recall@{args.k} against an exact scan")
    sizes = [int(s) for s in args.shortlists.split(",")]
    for label, centre in (("around the mean", mean), ("around 0", [0.0] * dims)):
        codes = [code(v, centre) for v in store]
        found = {n: 0 for n in sizes}
        for q in queries:
            cos = [sum(a * b for a, b in zip(q, v)) for v in store]
            exact = set(sorted(range(len(store)), key=lambda i: -cos[i])[: args.k])
            qc = code(q, centre)
            by_hamming = sorted(range(len(store)), key=lambda i: (qc ^ codes[i]).bit_count())
            for n in sizes:
                shortlist = by_hamming[:n]
                top = set(sorted(shortlist, key=lambda i: -cos[i])[: args.k])
                found[n] += len(top & exact)
        row = ", ".join(f"{n} ({n / len(store):.1%}): {found[n] / (args.k * len(queries)):.3f}" for n in sizes)
        print(f"codes {label}: shortlist (share of the store): recall  {row}")


if __name__ == "__main__":
    main()
