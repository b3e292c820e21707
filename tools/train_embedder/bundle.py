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
import json
import lzma
import shutil
import sys
from pathlib import Path

from tokenizers import Tokenizer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from helix_context.ingest.embed_models import locate_model_dir  # noqa: E402 - after the path insert
from helix_context.ingest.weights import pack_rows_int8, read_safetensors, write_safetensors  # noqa: E402


EVAL_MODULES = [f"helix_context/{m}" for m in (
    "__init__.py", "config.py", "errors.py", "ingest/__init__.py", "ingest/embed.py", "ingest/embed_models.py",
    "ingest/ship_model.py", "ingest/onnx_graph.py", "ingest/weights.py")]


QUERY_TOKENS = 64  # train.py's --query-tokens
PASSAGE_TOKENS = {"pairs": 256, "digest": 32}  # the most word pieces train.py reads of each set's passages


def shortest_prefixes(tok: Tokenizer, texts: list[str], cap: int) -> list[str]:
    """Each text's shortest start that train.py tokenizes (at most `cap` pieces) as it does the text."""
    tok.no_truncation()
    tok.no_padding()
    full = tok.encode_batch(texts, add_special_tokens=False)
    heads = [t if len(e.ids) <= cap - 2 else t[: e.offsets[cap - 3][1]]  # [CLS] and [SEP] take two pieces
             for t, e in zip(texts, full, strict=True)]
    tok.enable_truncation(max_length=cap)
    want = tok.encode_batch(texts, add_special_tokens=True)
    got = tok.encode_batch(heads, add_special_tokens=True)
    return [h if g.ids == w.ids else t for t, h, g, w in zip(texts, heads, got, want, strict=True)]


def trim_pairs(src: Path, dst: Path, tok: Tokenizer, cap: int) -> None:
    """Copy a pairs file, each text cut to what train.py reads of it (checked piece by piece).

    Why: the pairs must fit one device call's upload with the base model; most
    passages run far past the pieces the trainer keeps, and the cut never
    changes a piece the trainer sees (a text whose cut would is kept whole).
    """
    rows = [json.loads(line) for line in lzma.decompress(src.read_bytes()).decode().splitlines() if line]
    questions = shortest_prefixes(tok, [r["q"] for r in rows], QUERY_TOKENS)
    passages = shortest_prefixes(tok, [r["c"] for r in rows], cap)
    data = "".join(json.dumps({"c": c, "q": q}, ensure_ascii=False) + "\n"
                   for q, c in zip(questions, passages, strict=True)).encode()
    dst.write_bytes(lzma.compress(data, preset=9))


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
    tok = Tokenizer.from_file(str(base_dir / "tokenizer.json"))
    shutil.copyfile(args.pairs / "manifest.json", out / "pairs" / "manifest.json")
    sets = {"pairs": args.pairs, "digest": args.pairs / "digest"}
    for name, folder in sets.items():
        if not folder.is_dir():  # the digest pairs are shapes.py's, trained beside (or instead of) the code pairs
            continue
        (out / name).mkdir(parents=True, exist_ok=True)
        for file in ("train.jsonl.xz", "heldout.jsonl.xz"):
            trim_pairs(folder / file, out / name / file, tok, PASSAGE_TOKENS[name])
        (out / name / "TRIMMED.json").write_text(json.dumps(
            {"query_tokens": QUERY_TOKENS, "passage_tokens": PASSAGE_TOKENS[name]}) + "\n")
    for script in ("train.py", "sweep.py"):
        shutil.copyfile(HERE / script, out / script)
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
