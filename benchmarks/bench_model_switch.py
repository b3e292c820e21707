"""Answers while a genome re-embeds after `[embedding] model` changes (issue 23).

    python benchmarks/bench_model_switch.py [--from code-minilm] [--to minilm] [--json OUT]

Ingests the standard-library corpus of bench_ingest.py with the first model, then opens that genome
with the second, as a user does after changing `[embedding] model`. The background re-embed is held
back: the script re-embeds the genes itself, in rowid order as the job does, and at 0 %, 50 % and
100 % of them asks the 66 questions of bench_code_retrieval.py (strict MRR@10 of the pointers) of:

* Helix as shipped: the best lexical candidates that still wait get their cosine at query time
  (retrieve/dense_fill.py);
* the same without that, the dense search seeing the re-embedded genes alone (the code before);
* the lexical signals only, the floor a half-done re-embed should never push an answer below;

with each question's time (p50 / p95, the first pass: the fill's vectors are not yet in memory).

    python benchmarks/bench_model_switch.py --latency-on DIR [--to code-minilm]

instead times questions during a real background re-embed of a bigger genome: DIR is a genome kept by
`bench_scale.py --keep DIR` (e.g. `--sizes 100000 --copy-vectors`), copied and opened with the other model
by the manager, as a restarted backend does; one question every 0.5 s until the job is done, then 30 more
(the baseline: the same questions once it is done). Prints p50 / p95 / max of both.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from _results import write_results
from bench_code_retrieval import QUERIES, pointer_spans, single_signal_variants, strict_mrr
from bench_ingest import corpus

STEPS = (0.0, 0.5, 1.0)


@contextmanager
def _code_before(genome: Any) -> Iterator[Any]:
    """The genome as the code before saw it: no gene counted as waiting for a re-embed, so nothing is filled in."""
    genome.has_stale_vectors = lambda: False
    try:
        yield genome
    finally:
        del genome.has_stale_vectors


def _ask(genome: Any, settings: Any, embedder: Any) -> tuple[float, list[float]]:
    from helix_context.manager import Part
    from helix_context.retrieve.retriever import Retriever

    retriever = Retriever(genome, settings, embedder_part=Part("embeddings", lambda: (embedder, "active", "")))
    spans, times = [], []
    for question, _, _ in QUERIES:
        started = time.perf_counter()
        spans.append(pointer_spans(retriever, question))
        times.append((time.perf_counter() - started) * 1000)
    return round(strict_mrr(spans), 3), times


def _reembed_upto(genome: Any, embedder: Any, settings: Any, share: float, total: int) -> int:
    """Re-embed the stale genes (lowest rowids first, as ingest/reembed.py does) until `share` of `total`."""
    from helix_context.ingest.embed_text import embedding_text, embedding_tokens

    done = total - genome.stale_vector_count()
    while done < share * total:
        genes = genome.genes_with_stale_vectors(min(64, int(share * total) - done + 1))
        if not genes:
            break
        vectors = embedder.embed([embedding_text(g) for g in genes],
                                 [embedding_tokens(g, settings.embedding) for g in genes])
        genome.set_embeddings([(g.rowid, v) for g, v in zip(genes, vectors, strict=True)])
        done += len(genes)
    if done >= total:
        genome.forget_unused_vector_models()  # what the job does at its end
    return done


LATENCY_QUESTIONS = ["parse a date string into a datetime", "read a configuration file", "retry a request after a timeout",
                     "convert a dataframe to json", "compute the hash of a file", "start a thread pool",
                     "validate an email address", "render a template with variables",
                     "open a connection to the database", "split a path into parts"]


def latency_during_reembed(kept: str, model: str) -> dict[str, Any]:
    """Question times while the manager's own background job re-embeds a copy of the genome in `kept`."""
    import shutil
    from pathlib import Path

    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager

    for f in Path(kept).glob("genome.db*"):
        shutil.copy(f, Path(os.environ["HELIX_HOME"]) / f.name)
    helix = HelixContextManager(load_config().replace(embedding={"model": model}))
    if helix.embedder is None or helix.reembed is None:
        raise SystemExit(f"embeddings unavailable: {helix.embedder_part.detail}")
    times: dict[str, list[float]] = {"running": [], "done": []}
    started, i = time.monotonic(), 0
    while len(times["done"]) < 30:
        state = "running" if helix.reembed.progress()["state"] == "running" else "done"
        began = time.perf_counter()
        helix.retriever.retrieve(LATENCY_QUESTIONS[i % len(LATENCY_QUESTIONS)])
        times[state].append((time.perf_counter() - began) * 1000)
        i += 1
        time.sleep(0.5)
    progress = helix.reembed.progress()
    helix.close()
    out: dict[str, Any] = {"genes": progress["total"], "reembed_s": round(time.monotonic() - started, 1)}
    for state, ms in times.items():
        if ms:
            out[state] = {"questions": len(ms), "p50": round(float(np.percentile(ms, 50)), 1),
                          "p95": round(float(np.percentile(ms, 95)), 1), "max": round(max(ms), 1)}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="old", default="code-minilm", help="the model the genome was built with")
    parser.add_argument("--to", dest="new", default="minilm", help="the model it is opened with")
    parser.add_argument("--latency-on", metavar="DIR", help="a genome kept by bench_scale.py: time questions "
                        "during its background re-embed instead")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HELIX_HOME"] = tmp
        if args.latency_on:
            results = latency_during_reembed(args.latency_on, args.new)
            print(json.dumps(results, indent=2))
            write_results(args.json, results)
            return 0
        from helix_context.config import load_config
        from helix_context.ingest.embed import Embedder
        from helix_context.manager import HelixContextManager, open_genome

        base = load_config()
        built = HelixContextManager(base.replace(embedding={"model": args.old}))
        if built.embedder is None:
            raise SystemExit(f"embeddings unavailable: {built.embedder_part.detail}")
        built.ingest_path(corpus())
        built.close()

        settings = base.replace(embedding={"model": args.new})
        cfg = settings.embedding
        embedder = Embedder.for_settings(cfg)
        genome = open_genome(settings)
        genome.use_vector_model(embedder.model_name)  # what start_reembed does first; the job itself is held
        total = genome.stale_vector_count()
        lexical = single_signal_variants(settings)["helix_lexical_only"]
        results: dict[str, Any] = {"from": args.old, "to": embedder.model_name, "genes": total, "steps": []}
        print(f"genome of {total} genes built with {args.old}, opened with {embedder.model_name}")
        print(f"{'re-embedded':>12}  {'Helix':>6}  {'no fill':>7}  {'lexical':>7}   "
              f"{'ms p50 / p95 (Helix, no fill)':>30}")
        for share in STEPS:
            done = _reembed_upto(genome, embedder, settings, share, total)
            helix, t_fill = _ask(genome, settings, embedder)
            with _code_before(genome):
                before, t_plain = _ask(genome, settings, embedder)
            floor, _ = _ask(genome, lexical, embedder)
            row = {"reembedded": done, "share": round(done / max(1, total), 3), "helix": helix, "no_fill": before,
                   "lexical_only": floor, "ms_p50": round(float(np.percentile(t_fill, 50)), 1),
                   "ms_p95": round(float(np.percentile(t_fill, 95)), 1),
                   "no_fill_ms_p50": round(float(np.percentile(t_plain, 50)), 1),
                   "no_fill_ms_p95": round(float(np.percentile(t_plain, 95)), 1)}
            results["steps"].append(row)
            print(f"{row['share']:>11.0%}  {helix:>6.3f}  {before:>7.3f}  {floor:>7.3f}   "
                  f"{row['ms_p50']:>8} / {row['ms_p95']:<6} {row['no_fill_ms_p50']:>6} / {row['no_fill_ms_p95']}")
        genome.close()
        embedder.close()
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
