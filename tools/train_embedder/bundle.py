"""Gather what train.py needs into one folder to send to a GPU machine.

Why: such a machine may have torch but no helix, no network and a small
upload limit. The base all-MiniLM-L6-v2 (87 MB in fp32) travels as per-row
int8 + scales (~23 MB; train.py unpacks it); the pairs travel xz-compressed.
train.py always starts from that packed base (also when run locally on the
bundle), so the result does not depend on where it runs.

Usage::

    python tools/train_embedder/bundle.py --pairs /tmp/pairs --out BUNDLE_DIR
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from helix_context.ingest.embed_models import locate_model_dir  # noqa: E402 - after the path insert
from helix_context.ingest.weights import pack_rows_int8, read_safetensors, write_safetensors  # noqa: E402


EVAL_MODULES = [f"helix_context/{m}" for m in (
    "__init__.py", "config.py", "errors.py", "ingest/__init__.py", "ingest/embed.py", "ingest/embed_models.py",
    "ingest/ship_model.py", "ingest/onnx_graph.py", "ingest/weights.py")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=Path, required=True, help="mine.py's output folder")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    base_dir = locate_model_dir()
    out = args.out
    (out / "base").mkdir(parents=True, exist_ok=True)
    (out / "pairs").mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(base_dir / name, out / "base" / name)
    packed = pack_rows_int8(read_safetensors(base_dir / "model.safetensors"))
    write_safetensors(out / "base" / "model.q8.safetensors", packed, {"packed": "per-row int8"})
    for name in ("train.jsonl.xz", "heldout.jsonl.xz", "manifest.json"):
        shutil.copyfile(args.pairs / name, out / "pairs" / name)
    if (args.pairs / "digest").is_dir():  # shapes.py's pairs, trained beside (or instead of) the code pairs
        (out / "digest").mkdir(parents=True, exist_ok=True)
        for name in ("train.jsonl.xz", "heldout.jsonl.xz"):
            shutil.copyfile(args.pairs / "digest" / name, out / "digest" / name)
    shutil.copyfile(HERE / "train.py", out / "train.py")
    repo = HERE.parents[1]
    shutil.copyfile(repo / "helix_context" / "ingest" / "weights.py", out / "weights.py")
    # export.py --eval there: the product's own ONNX builder and embedder, to measure the int8 model
    (out / "tools" / "train_embedder").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / "export.py", out / "tools" / "train_embedder" / "export.py")
    for rel in EVAL_MODULES:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(repo / rel, out / rel)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"bundle {out}: {total / 2**20:.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
