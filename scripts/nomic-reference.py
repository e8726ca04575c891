#!/usr/bin/env python3
"""A second implementation of nomic-embed-text-v1.5, for cairn-embed's reference test.

Reads the f16 GGUF with the `gguf` package (tensors and metadata only) and runs the encoder
in float64 numpy: its own BERT-uncased WordPiece tokenizer over the GGUF's vocabulary, then
nomic-bert (token-type embedding and layer norm, 12 post-norm layers of attention with rotary
positions on q and k, GPT-NeoX halves, base from the metadata, and a SwiGLU MLP, silu(fc12 x)
* fc11 x, no biases), mean pooling, L2 normalisation.

Usage: nomic-reference.py MODEL.gguf TEXTS.json OUT.json
  TEXTS.json: {"texts": [{"prompt": "query"|"document", "text": ...}]}
  OUT.json:   {"source": ..., "cases": [{"prompt", "text", "ids", "vector"}]}
Needs numpy and gguf (pip install numpy gguf).
"""
import json
import sys
import unicodedata

import numpy as np
from gguf import GGUFReader

PREFIXES = {"query": "search_query: ", "document": "search_document: "}
MAX_TOKENS = 2048


def field(reader, key):
    f = reader.fields[key]
    values = [f.parts[i] for i in f.data]
    if f.types[-1].name == "STRING":
        values = [bytes(v).decode("utf-8") for v in values]
    else:
        values = [v[0] for v in values]
    return values if f.types[0].name == "ARRAY" else values[0]


class WordPiece:
    """BERT's BasicTokenizer (clean, CJK spacing, lowercase, strip accents, punctuation) and
    greedy longest-match WordPiece, over the GGUF's vocabulary with the phantom space undone."""

    def __init__(self, tokens, unk, cls, sep):
        def bert_spelling(t):
            if t.startswith("\u2581"):
                return t[1:]
            if t.startswith("[") and t.endswith("]"):
                return t
            return "##" + t

        self.vocab = {}
        for i, t in enumerate(tokens):
            self.vocab.setdefault(bert_spelling(t), i)
        self.specials = {t: i for i, t in enumerate(tokens) if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
        self.unk, self.cls, self.sep = unk, cls, sep

    @staticmethod
    def is_punct(ch):
        cp = ord(ch)
        if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
            return True
        return unicodedata.category(ch).startswith("P")

    @staticmethod
    def is_cjk(cp):
        return any(a <= cp <= b for a, b in [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                              (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
                                              (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)])

    def basic(self, text):
        out = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"):
                continue
            if ch in " \t\n\r" or unicodedata.category(ch) == "Zs":
                out.append(" ")
            elif self.is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        words = []
        for word in "".join(out).split():
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
            piece = ""
            for ch in word:
                if self.is_punct(ch):
                    if piece:
                        words.append(piece)
                    words.append(ch)
                    piece = ""
                else:
                    piece += ch
            if piece:
                words.append(piece)
        return words

    def wordpiece(self, word):
        if len(word) > 100:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab:
                    ids.append(self.vocab[sub])
                    break
                end -= 1
            if end == start:
                return [self.unk]
            start = end
        return ids

    def encode(self, text):
        ids = []
        # Special tokens written in the text are matched whole, as Hugging Face's added tokens.
        rest = text
        while rest:
            hits = [(rest.find(s), s) for s in self.specials if rest.find(s) >= 0]
            if not hits:
                chunk, special, rest = rest, None, ""
            else:
                at, special = min(hits)
                chunk, rest = rest[:at], rest[at + len(special):]
            for word in self.basic(chunk):
                ids.extend(self.wordpiece(word))
            if special:
                ids.append(self.specials[special])
        return [self.cls] + ids[: MAX_TOKENS - 2] + [self.sep]


def main():
    model, texts_path, out_path = sys.argv[1:4]
    reader = GGUFReader(model)
    arch = field(reader, "general.architecture")
    assert arch == "nomic-bert", arch
    hp = lambda k: field(reader, f"nomic-bert.{k}")
    layers, heads = int(hp("block_count")), int(hp("attention.head_count"))
    eps, base = float(hp("attention.layer_norm_epsilon")), float(hp("rope.freq_base"))
    W = {t.name: np.asarray(t.data, dtype=np.float64) for t in reader.tensors}
    tok = WordPiece(field(reader, "tokenizer.ggml.tokens"), int(field(reader, "tokenizer.ggml.unknown_token_id")),
                    int(field(reader, "tokenizer.ggml.bos_token_id")), int(field(reader, "tokenizer.ggml.eos_token_id")))
    hidden = W["token_embd.weight"].shape[1]
    dh = hidden // heads

    def norm(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * W[name + ".weight"] + W[name + ".bias"]

    def rope(x):  # x: heads × n × dh
        n = x.shape[1]
        freq = base ** (-np.arange(0, dh, 2, dtype=np.float64) / dh)
        angle = np.arange(n, dtype=np.float64)[:, None] * freq[None, :]
        cos, sin = np.cos(angle), np.sin(angle)
        a, b = x[..., : dh // 2], x[..., dh // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def embed(ids):
        n = len(ids)
        x = norm(W["token_embd.weight"][ids] + W["token_types.weight"][0], "token_embd_norm")
        for l in range(layers):
            p = f"blk.{l}."
            qkv = x @ W[p + "attn_qkv.weight"].T
            q, k, v = (qkv[:, i * hidden:(i + 1) * hidden].reshape(n, heads, dh).transpose(1, 0, 2) for i in range(3))
            q, k = rope(q), rope(k)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, hidden)
            x = norm(x + a @ W[p + "attn_output.weight"].T, p + "attn_output_norm")
            up, gate = x @ W[p + "ffn_up.weight"].T, x @ W[p + "ffn_gate.weight"].T
            x = norm(x + (up * gate / (1 + np.exp(-gate))) @ W[p + "ffn_down.weight"].T, p + "layer_output_norm")
        pooled = x.mean(0)
        return pooled / np.linalg.norm(pooled)

    cases = []
    for case in json.load(open(texts_path))["texts"]:
        ids = tok.encode(PREFIXES[case["prompt"]] + case["text"])
        vector = embed(ids)
        cases.append({"prompt": case["prompt"], "text": case["text"], "ids": ids,
                      "vector": [float(f"{v:.6g}") for v in vector]})
        print(f"{len(ids):4} tokens: {case['text'][:60]!r}", file=sys.stderr)
    # A sanity check of the reading of the weights (gate and up, rotary halves): each query is
    # nearer the document written for it than the others are.
    v = np.array([c["vector"] for c in cases])
    print("cosines query × document:", file=sys.stderr)
    for i, c in enumerate(cases):
        if c["prompt"] == "query":
            row = [f"{v[i] @ v[j]:.3f}" for j, d in enumerate(cases) if d["prompt"] == "document"]
            print(f"  {c['text'][:40]!r}: {' '.join(row)}", file=sys.stderr)
    json.dump({"source": "scripts/nomic-reference.py (float64 numpy over the f16 GGUF)", "cases": cases},
              open(out_path, "w"), indent=None, separators=(",", ":"))


if __name__ == "__main__":
    main()
