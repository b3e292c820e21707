"""Throughput of the MiniLM embedder (helix_context.ingest.embed) on code chunks.

Prints, for each max_tokens window, chunks/s, tokens/s and source MB/s of the
int8 model, and the same for the fp32 graph (the baseline, measured in the
same run) with the int8/fp32 speed ratio. Chunks are ~1500-character pieces of
the Python standard library's own source, cut at line boundaries, embedded in
batches of 32.

    python benchmarks/bench_embed.py                  # 64/128/256, 256 chunks
    python benchmarks/bench_embed.py --chunks 512 --max-tokens 128 --no-fp32
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import logging
import sysconfig
import time
from pathlib import Path

import numpy as np

from helix_context.ingest.embed import Embedder
from helix_context.ingest.embed_models import locate_model_dir
from helix_context.ingest.onnx_graph import build_encoder_model


def code_chunks(n: int, size: int = 1500) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[str] = []
    current: list[str] = []
    length = 0
    for path in sorted(stdlib.glob("*.py")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True):
            current.append(line)
            length += len(line)
            if length >= size:
                chunks.append("".join(current)[: size + 200])
                current, length = [], 0
                if len(chunks) == n:
                    return chunks
    return chunks


def measure(emb: Embedder, chunks: list[str], repeats: int) -> dict[str, float]:
    emb.embed(chunks[: emb.batch_size])  # warm-up: first run allocates buffers
    tokens = sum(min(len(e.ids), emb.max_tokens)
                 for e in emb._tokenizer.encode_batch(chunks))
    chars = sum(len(c) for c in chunks)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        vecs = emb.embed(chunks)
        best = min(best, time.perf_counter() - start)
    assert vecs.shape == (len(chunks), emb.dim) and np.isfinite(vecs).all()
    return {
        "seconds": best,
        "chunks_s": len(chunks) / best,
        "tokens_s": tokens / best,
        "mb_s": chars / best / 1e6,
        "ms_chunk": best / len(chunks) * 1e3,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--max-tokens", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-fp32", action="store_true", help="skip the fp32 baseline")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")

    chunks = code_chunks(args.chunks)
    print(f"{len(chunks)} chunks, mean {np.mean([len(c) for c in chunks]):.0f} chars, "
          f"batch {args.batch_size}, threads {args.threads or 'all cores'}")
    start = time.perf_counter()
    Embedder.load()
    print(f"Embedder.load (the shipped int8 file): {time.perf_counter() - start:.2f} s")
    fp32_bytes = (None if args.no_fp32
                  else build_encoder_model(locate_model_dir()).SerializeToString())
    print(f"{'model':6} {'max_tok':>7} {'chunks/s':>9} {'tokens/s':>9} {'MB/s':>7} "
          f"{'ms/chunk':>9} {'int8/fp32':>9}")
    for max_tokens in args.max_tokens:
        int8 = Embedder.load(max_tokens=max_tokens,
                             batch_size=args.batch_size, threads=args.threads)
        r8 = measure(int8, chunks, args.repeats)
        ratio = ""
        if fp32_bytes is not None:
            fp32 = Embedder.from_onnx(fp32_bytes, max_tokens=max_tokens,
                                      batch_size=args.batch_size, threads=args.threads)
            r32 = measure(fp32, chunks, args.repeats)
            print(f"{'fp32':6} {max_tokens:7d} {r32['chunks_s']:9.1f} {r32['tokens_s']:9.0f} "
                  f"{r32['mb_s']:7.3f} {r32['ms_chunk']:9.2f}")
            ratio = f"{r32['seconds'] / r8['seconds']:8.2f}x"
        print(f"{'int8':6} {max_tokens:7d} {r8['chunks_s']:9.1f} {r8['tokens_s']:9.0f} "
              f"{r8['mb_s']:7.3f} {r8['ms_chunk']:9.2f} {ratio:>9}")


if __name__ == "__main__":
    main()
