#!/usr/bin/env python3
"""Recall of a coding-memory set, or of LoCoMo, through the HTTP API, the way an agent searches.

`cairn-eval` scores search in-process. This asks a real `cairn serve` instead: a fresh data
dir, the set's memories saved one by one with `POST /observations` (in `seq` order, so a
revised topic_key revises in place), the daemon left to embed them, then every question as
`GET /search?q=…&project=…&mode=…&limit=10` (no project: `all_projects=true`). It prints R@1,
R@5 and R@10 per split and category, as `cairn-eval` does, so the two can be compared: the
same engine should give the same figures through either door.

    python3 scripts/eval-http.py --cairn target/release/cairn --set eval/coding-heldout.json \\
        --model multilingual-e5-small=target/test-deps/multilingual-e5-small

`--locomo FILE` (LoCoMo's locomo10.json, not in the repository) instead of `--set`: each
conversation is a project, each of its sessions a session (`POST /sessions`), each turn a
memory titled `speaker (date)` as `cairn-eval` loads it; the daemon embeds each turn with its
own rule (the previous turn for a short one), and each question of categories 1–4 searches
its conversation's project; R@10 over the evidence turns. `--split test` (the default:
conversations 5–9, which no fit saw), `dev` or `all`.

Deep recall: a mode `hybrid+deep` (any mode with `+deep`) asks `deep=true`; `--llm-file GGUF`
installs a local LLM of cairn's catalogue into the temporary data dir (a link) and turns it on
(`CAIRN_LLM_PROVIDER=local`); `--deep-timeout-ms` writes `[search] deep_timeout_ms`. Each mode
also prints the p50 latency per query, and deep modes how often the model re-ranked and its
p50 time. `--sample N --seed S` takes N questions of the split at random (the same ones for
every mode): a subsample, for costs a full run cannot pay.

`--model` is NAME=DIR (CAIRN_MODEL / CAIRN_MODEL_DIR of the daemon); without it the daemon's
own default applies. Only loopback; the data dir and HOME are temporary.
"""
import argparse
import collections
import json
import os
import shutil
import random
import signal
import statistics
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None, timeout=60):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.load(r)


def start_daemon(cairn, data_dir, home, env_extra, log):
    port = free_port()
    env = dict(os.environ, HOME=home, CAIRN_DATA_DIR=data_dir, CAIRN_AUTOSTART="never")
    env.update(env_extra)
    proc = subprocess.Popen([cairn, "serve", "--port", str(port), "--model-install", "never"],
                            env=env, stdout=log, stderr=log)
    deadline = time.time() + 120
    while True:
        try:
            call(port, "GET", "/health", timeout=2)
            return proc, port
        except (urllib.error.URLError, ConnectionError, OSError):
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit("cairn serve did not start (see its log)")
            time.sleep(0.1)


def save_memories(port, memories):
    """key → id, memories saved in seq order."""
    ids = {}
    for m in sorted(memories, key=lambda m: m.get("seq", 0)):
        body = {k: m[k] for k in ("title", "content", "project", "scope", "topic_key") if m.get(k) is not None}
        body["type"] = m.get("type")
        ids[m["key"]] = call(port, "POST", "/observations", body)["id"]
    return ids


def load_locomo(port, path, split):
    """Save the chosen conversations' turns; the questions, each with its evidence turns' ids."""
    try:
        with open(path) as f:
            samples = json.load(f)
        if not isinstance(samples, list):
            raise ValueError("expected a JSON array of conversations")
    except (OSError, ValueError) as e:
        raise SystemExit(f"cannot read LoCoMo from {path}: {e}")
    questions = []
    for index, sample in enumerate(samples):
        half = "dev" if index < 5 else "test"
        if split not in ("all", half):
            continue
        project = f"locomo-{sample['sample_id']}"
        conversation = sample["conversation"]
        turn_ids = {}
        session = 1
        while f"session_{session}" in conversation:
            date = conversation[f"session_{session}_date_time"]
            session_id = f"{project}-s{session}"
            call(port, "POST", "/sessions", {"id": session_id, "project": project})
            for turn in conversation[f"session_{session}"]:
                content = turn["text"]
                if turn.get("blip_caption"):
                    content += f" [shares a photo: {turn['blip_caption']}]"
                body = {"session_id": session_id, "project": project, "type": "conversation",
                        "title": f"{turn['speaker']} ({date})", "content": content}
                turn_ids[turn["dia_id"]] = call(port, "POST", "/observations", body)["id"]
            session += 1
        for n, qa in enumerate(sample["qa"]):
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = [e for ev in qa.get("evidence", []) for e in ev.replace(";", " ").replace(",", " ").split()]
            expected = [turn_ids[e] for e in evidence if e in turn_ids]
            if expected:
                questions.append({"query": qa["question"], "project": project, "split": half,
                                  "category": f"cat{qa['category']}", "expected_ids": expected})
    return questions


def wait_for_embeddings(port, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        stats = call(port, "GET", "/stats")
        total = stats.get("total_observations")
        if stats.get("semantic_search") == "ready" and stats.get("embeddings_stored") == total:
            return stats
        time.sleep(1)
    raise SystemExit(f"the daemon did not embed every memory in {timeout} s: {stats}")


def search(port, question, mode, limit=10):
    """(hits, seconds, deep report or None)"""
    mode, _, deep = mode.partition("+")
    params = {"q": question["query"], "limit": str(limit), "mode": mode}
    if deep == "deep":
        params["deep"] = "true"
    if question.get("project"):
        params["project"] = question["project"]
    else:
        params["all_projects"] = "true"
    started = time.perf_counter()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/search?" + urllib.parse.urlencode(params))
    with urllib.request.urlopen(req, timeout=900) as r:
        hits = json.load(r)
        report = r.headers.get("x-cairn-deep")
    return hits, time.perf_counter() - started, json.loads(report) if report else None


def ranks(hits, expected_ids, must_contain):
    """The 1-based place of each expected memory (None when absent from the top 10)."""
    places = {}
    for place, hit in enumerate(hits, 1):
        if must_contain and must_contain not in hit.get("content", ""):
            continue
        places.setdefault(hit["id"], place)
    return [places.get(i) for i in expected_ids]


def dump_candidates(port, questions, mode, limit, path):
    """Each question with its first `limit` hits (id, title, content, whether it is evidence)."""
    with open(path, "w") as f:
        for q in questions:
            hits, _, _ = search(port, q, mode, limit)
            expected = set(q["expected_ids"])
            f.write(json.dumps({
                "query": q["query"], "split": q["split"], "category": q["category"],
                "expected_ids": q["expected_ids"],
                "hits": [{"id": h["id"], "title": h.get("title", ""), "content": h.get("content", ""),
                          "evidence": h["id"] in expected} for h in hits],
            }) + "\n")
    print(f"{len(questions)} questions' first {limit} hits ({mode}) written to {path}", flush=True)


def score(results):
    """group → (n, R@1, R@5, R@10)"""
    groups = collections.defaultdict(list)
    for q, r in results:
        for group in ("all", f"split:{q['split']}", f"{q['split']}:{q['category']}"):
            groups[group].append(r)
    table = {}
    for group, rs in groups.items():
        def recall(k):
            return sum(sum(1 for x in r if x is not None and x <= k) / max(len(r), 1) for r in rs) / len(rs)
        table[group] = (len(rs), recall(1), recall(5), recall(10))
    return table


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", required=True)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--set", help="a coding-memory set (eval/coding-memory.json, eval/coding-heldout.json)")
    source.add_argument("--locomo", help="LoCoMo's locomo10.json")
    ap.add_argument("--split", default="test", choices=["dev", "test", "all"], help="LoCoMo's conversations")
    ap.add_argument("--model", help="NAME=DIR")
    ap.add_argument("--modes", default="lexical,semantic,hybrid")
    ap.add_argument("--embed-timeout", type=int, default=900)
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--dump-candidates", metavar="FILE",
                    help="also write each question's first-stage hits (the first mode, --dump-limit of them) "
                         "as JSON lines, for a second stage measured outside the daemon (examples/rerank-probe.rs)")
    ap.add_argument("--dump-limit", type=int, default=30)
    ap.add_argument("--sample", type=int, help="only this many questions, drawn at random (--seed)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--llm-file", help="a GGUF of cairn's local catalogue: the daemon's LLM")
    ap.add_argument("--deep-timeout-ms", type=int, help="[search] deep_timeout_ms")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="cairn-eval-http-")
    env = {}
    if args.model:
        name, model_dir = args.model.split("=", 1)
        env = {"CAIRN_MODEL": name, "CAIRN_MODEL_DIR": os.path.abspath(model_dir)}
    data = os.path.join(work, "data")
    if args.llm_file:
        models = os.path.join(data, "models", "llm")
        os.makedirs(models)
        os.symlink(os.path.abspath(args.llm_file), os.path.join(models, os.path.basename(args.llm_file)))
        env["CAIRN_LLM_PROVIDER"] = "local"
    if args.deep_timeout_ms:
        os.makedirs(data, exist_ok=True)
        with open(os.path.join(data, "config.toml"), "w") as f:
            f.write(f"[search]\ndeep_timeout_ms = {args.deep_timeout_ms}\n")
    log = open(os.path.join(work, "serve.log"), "ab")
    proc, port = start_daemon(os.path.abspath(args.cairn), data, os.path.join(work, "home"), env, log)
    try:
        started = time.time()
        if args.locomo:
            questions = load_locomo(port, args.locomo, args.split)
        else:
            with open(args.set) as f:
                doc = json.load(f)
            ids = save_memories(port, doc["memories"])
            questions = [dict(q, expected_ids=[ids[k] for k in q["expected"]]) for q in doc["questions"]]
        if args.sample and args.sample < len(questions):
            chosen = sorted(random.Random(args.seed).sample(range(len(questions)), args.sample))
            questions = [questions[i] for i in chosen]
        saved = time.time() - started
        stats = wait_for_embeddings(port, args.embed_timeout)
        print(f"{stats['total_observations']} memories saved ({saved:.0f} s) and embedded ({time.time() - started:.0f} s in all)")
        figures = {}
        costs = {}
        if args.dump_candidates:
            dump_candidates(port, questions, args.modes.split(",")[0], args.dump_limit, args.dump_candidates)
        for mode in args.modes.split(","):
            results, seconds, reports = [], [], []
            for q in questions:
                hits, took, report = search(port, q, mode)
                results.append((q, ranks(hits, q["expected_ids"], q.get("expect_contains"))))
                seconds.append(took)
                if report:
                    reports.append(report)
            figures[mode] = score(results)
            costs[mode] = {"p50_ms": round(statistics.median(seconds) * 1000, 1),
                           "max_ms": round(max(seconds) * 1000, 1)}
            if reports:
                costs[mode]["reranked"] = sum(1 for r in reports if r.get("reranked"))
                costs[mode]["fallbacks"] = dict(collections.Counter(r["code"] for r in reports if r.get("code")))
                costs[mode]["llm_p50_ms"] = statistics.median(r["llm_ms"] for r in reports)
            print(f"{mode}: {costs[mode]}", flush=True)
        print(f"{'mode':<9} {'group':<22} {'n':>4} {'R@1':>6} {'R@5':>6} {'R@10':>6}")
        for mode, table in figures.items():
            for group in sorted(table):
                n, r1, r5, r10 = table[group]
                print(f"{mode:<9} {group:<22} {n:>4} {r1:>6.3f} {r5:>6.3f} {r10:>6.3f}")
        for mode, cost in costs.items():
            print(f"{mode:<12} {cost}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"figures": figures, "costs": costs, "questions": len(questions)}, f, indent=1)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
