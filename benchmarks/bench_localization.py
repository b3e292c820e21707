"""Issue → code localization on real GitHub issues (swe-dev), against BM25 baselines in the same run.

    python benchmarks/bench_localization.py [--all | --sample N] [--data DIR] [--json OUT]

For each instance the repository's tree at the issue's base commit is extracted
into one folder and ingested into one genome (incrementally: a file unchanged
since the previous instance's tree is not parsed again), the issue text is the
query exactly as written, and the answer is the file (and lines) its fix
changed. Printed per system:

* file Hit@1/5/10 and file MRR@10 — the gold file among the first k distinct files;
* function Hit@1/5/10 — one of the first k returned spans holds a gold line;
* the median length of the returned spans, and query p50 / p95 for Helix;
* the same for Helix with the dense signal only and with the lexical signals only
  (its single signals over the same genome, in the same run).

Baselines, built over the same tree in the same run: bm25s (English stemmer and
stop words, identifiers split into their parts in text and query) over whole
files (path + text) and over function-level chunks (ast functions, methods and
class headers; other lines in 60-line windows; path prefixed).

The default run samples 25 of the 77 instances, evenly spaced by instance
number; `--all` runs every one. Nothing here is tuned per project: the data is
the development set, other projects are held out.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import ast
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _results import write_results

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "swe-dev"
KS = (1, 5, 10)
WINDOW = 60


# ── data ──

def load_instances(data: Path) -> list[dict]:
    rows = [json.loads(line) for line in (data / "instances.jsonl").read_text().splitlines() if line.strip()]
    return sorted(rows, key=lambda r: int(r["instance_id"].rsplit("-", 1)[1]))


def sample(rows: list[dict], n: int) -> list[dict]:
    if n >= len(rows):
        return rows
    step = len(rows) / n
    return [rows[int(i * step)] for i in range(n)]


def extract(bare: Path, tag: str, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(bare), "archive", tag], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


# ── scoring ──

def file_metrics(files: list[str], gold: set[str]) -> dict[str, float]:
    out = {f"file_hit@{k}": float(any(f in gold for f in files[:k])) for k in KS}
    rank = next((i for i, f in enumerate(files[:10], 1) if f in gold), None)
    out["file_mrr@10"] = 1.0 / rank if rank else 0.0
    return out


def span_metrics(spans: list[tuple[str, int, int]], gold: dict[str, list[int]]) -> dict[str, float]:
    def holds(span: tuple[str, int, int]) -> bool:
        path, start, end = span
        return any(start <= line <= end for line in gold.get(path, ()))

    return {f"func_hit@{k}": float(any(holds(s) for s in spans[:k])) for k in KS}


def distinct(paths: list[str]) -> list[str]:
    return list(dict.fromkeys(paths))


# ── BM25 baselines ──

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def split_text(text: str) -> str:
    """Each identifier followed by its parts: `solve_poly_system` → `solve_poly_system solve poly system`."""
    def expand(m: re.Match) -> str:
        word = m.group(0)
        parts = [p for p in _PARTS.findall(word) if p.lower() != word.lower()]
        return " ".join([word, *parts])

    return _IDENT.sub(expand, text)


def function_chunks(path: str, text: str) -> list[tuple[int, int, str]]:
    """ast functions / methods / class headers, other lines in 60-line windows: (start, end, text)."""
    lines = text.splitlines()
    spans: list[tuple[int, int]] = []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                spans.append((start, node.end_lineno or node.lineno))
            elif isinstance(node, ast.ClassDef):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                inner = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
                first = min([min([n.lineno] + [d.lineno for d in n.decorator_list]) for n in inner],
                            default=(node.end_lineno or node.lineno) + 1)
                spans.append((start, first - 1))
                visit(node.body)

    if tree is not None:
        visit(tree.body)
    covered = bytearray(len(lines) + 2)
    for s, e in spans:
        for i in range(s, e + 1):
            if i < len(covered):
                covered[i] = 1
    i = 1
    while i <= len(lines):
        if covered[i]:
            i += 1
            continue
        j = i
        while j <= len(lines) and not covered[j] and j - i < WINDOW:
            j += 1
        if any(lines[k - 1].strip() for k in range(i, j)):
            spans.append((i, j - 1))
        i = j
    return [(s, e, path + "\n" + "\n".join(lines[s - 1:e])) for s, e in sorted(spans) if e >= s]


class Tokens:
    """Token lists (and function chunks) per text, kept from one issue's tree to the next.

    Two issues' trees share most files; stemming and parsing each unchanged file again
    made the baselines cost minutes per issue. Entries not used by the latest tree are dropped.
    """

    def __init__(self) -> None:
        import Stemmer

        self.stemmer = Stemmer.Stemmer("english")
        self.tokens: dict[str, list[str]] = {}
        self.chunks: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        self.used: set = set()

    def of(self, texts: list[str]) -> list[list[str]]:
        import bm25s

        missing = list(dict.fromkeys(t for t in texts if t not in self.tokens))
        if missing:
            found = bm25s.tokenize([split_text(t) for t in missing], stopwords="en", stemmer=self.stemmer,
                                   return_ids=False, show_progress=False)
            self.tokens.update(zip(missing, found, strict=True))
        self.used.update(texts)
        return [self.tokens[t] for t in texts]

    def function_chunks(self, path: str, text: str) -> list[tuple[int, int, str]]:
        key = (path, text)
        if key not in self.chunks:
            self.chunks[key] = function_chunks(path, text)
        self.used.add(key)
        return self.chunks[key]

    def forget_unused(self) -> None:
        self.tokens = {k: v for k, v in self.tokens.items() if k in self.used}
        self.chunks = {k: v for k, v in self.chunks.items() if k in self.used}
        self.used = set()


class BM25Index:
    def __init__(self, docs: list[str], tokens: Tokens | None = None) -> None:
        import bm25s

        self.tokens = tokens or Tokens()
        self.index = bm25s.BM25()
        self.index.index(self.tokens.of(docs), show_progress=False)
        self.n = len(docs)

    def search(self, query: str, k: int) -> list[int]:
        q = self.tokens.of([query])[0]
        q = [t for t in q if t in self.index.vocab_dict]
        if not q:
            return []
        docs, _ = self.index.retrieve([q], k=min(k, self.n), show_progress=False)
        return [int(i) for i in docs[0]]


def baselines(root: Path, query: str, tokens: Tokens | None = None) -> dict[str, dict[str, float]]:
    tokens = tokens or Tokens()
    files: list[str] = []
    texts: list[str] = []
    chunks: list[tuple[str, int, int]] = []
    chunk_texts: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        files.append(rel)
        texts.append(rel + "\n" + text)
        for s, e, t in tokens.function_chunks(rel, text):
            chunks.append((rel, s, e))
            chunk_texts.append(t)
    return {"files": BM25Index(texts, tokens), "funcs": BM25Index(chunk_texts, tokens), "file_ids": files,
            "chunk_ids": chunks}


def baseline_row(tree: Path, row: dict, tokens: Tokens) -> dict:
    """Both BM25 baselines' metrics for one issue (what the work folder's baselines.json keeps)."""
    query, gold = row["problem_statement"], row["gold"]
    base = baselines(tree, query, tokens)
    tokens.forget_unused()
    bf = [base["file_ids"][i] for i in base["files"].search(query, 10)]
    bc = [base["chunk_ids"][i] for i in base["funcs"].search(query, 200)]
    return {"files": {**file_metrics(bf, set(gold)), **{f"func_hit@{k}": 0.0 for k in KS}},
            "funcs": {**file_metrics(distinct([c[0] for c in bc])[:10], set(gold)), **span_metrics(bc[:10], gold)},
            "func_lines": [e - s + 1 for _, s, e in bc[:10]]}


def prepare_work(work: Path, data: Path) -> Path:
    """The work folder's HELIX_HOME and bare clone of the bundle; returns the clone."""
    work.mkdir(parents=True, exist_ok=True)
    os.environ["HELIX_HOME"] = str(work / "home")
    bare = work / "repo.git"
    if not bare.exists():
        subprocess.run(["git", "clone", "-q", "--bare", str(data / "sympy.bundle"), str(bare)], check=True)
    return bare


# ── Helix ──

def helix_answer(helix, query: str, root: Path) -> tuple[list[str], list[tuple[str, int, int]], float]:
    def rel(p: str | None) -> str:
        try:
            return Path(p or "").resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return p or ""

    started = time.perf_counter()
    spans = helix.fingerprint(query, max_results=10)
    files = helix.fingerprint(query, max_results=10, group_by="file")
    seconds = time.perf_counter() - started
    return ([rel(f["source_id"]) for f in files],
            [(rel(s["source_id"]), s["start_line"], s["end_line"]) for s in spans], seconds)


SINGLE_SIGNALS = ("helix_dense_only", "helix_lexical_only")


def single_signal_retrievers(helix) -> dict:
    """Helix with the dense signal only and with the lexical signals only, over the same genome."""
    from helix_context.retrieve.retriever import Retriever

    settings = helix.settings
    lexical = {f"{p}{n}": 0.0 for p in ("weight_", "code_weight_") for n in ("fts", "tags", "path", "path_terms",
                                                                                  "coactivation", "definition")}
    variants = {"helix_dense_only": settings.replace(retrieval={**lexical, "locate_symbol": 0.0, "locate_definition": 0.0,
                                                                "locate_name": 0.0,
                                                                "locate_dense": settings.retrieval.locate_dense or None}),
                "helix_lexical_only": settings.replace(retrieval={"weight_dense": 0.0, "code_weight_dense": 0.0,
                                                                  "locate_dense": 0.0})}
    return {k: Retriever(helix.genome, v, embedder_part=helix.embedder_part) for k, v in variants.items()}


def retriever_answer(retriever, query: str, root: Path) -> tuple[list[str], list[tuple[str, int, int]]]:
    """What `fingerprint` answers (spans, and files ranked from them), from one retriever."""
    from helix_context.retrieve.locate import rank_files

    def rel(p: str | None) -> str:
        try:
            return Path(p or "").resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return p or ""

    found = retriever.retrieve(query, max_genes=10, gate=False, pointers=True)
    files = rank_files(found.pointers, mass=found.file_mass, mass_weight=retriever.locate_weights.mass)
    return [rel(h.path) for h in files[:10]], [(rel(p.path), p.start_line, p.end_line) for p in found.pointers[:10]]


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.fmean(r[k] for r in rows), 3) for k in rows[0]} if rows else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--all", action="store_true", help="run all instances (default: a sample)")
    parser.add_argument("--sample", type=int, default=25)
    parser.add_argument("--only", help="comma-separated instance ids")
    parser.add_argument("--no-embed", action="store_true", help="ingest without embeddings (lexical signals only)")
    parser.add_argument("--keep", type=Path, help="keep the work folder (genome + tree) here and reuse it")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()

    rows = load_instances(args.data)
    if args.only:
        wanted = set(args.only.split(","))
        rows = [r for r in rows if r["instance_id"] in wanted]
    elif not args.all:
        rows = sample(rows, args.sample)
    work = args.keep or Path(tempfile.mkdtemp(prefix="helix-loc-"))
    bare = prepare_work(work, args.data)

    from helix_context.config import load_config
    from helix_context.manager import HelixContextManager

    helix = HelixContextManager(load_config())
    tree = work / "tree"
    # baselines depend only on the tree and the query: a kept work folder reuses them across runs
    cache_file = work / "baselines.json"
    cached: dict[str, dict] = json.loads(cache_file.read_text()) if args.keep and cache_file.exists() else {}
    tokens = Tokens()
    per: dict[str, list[dict[str, float]]] = {"helix": [], "bm25_files": [], "bm25_funcs": [],
                                              **{k: [] for k in SINGLE_SIGNALS}}
    singles = {} if args.no_embed else single_signal_retrievers(helix)
    latencies: list[float] = []
    span_lines: dict[str, list[int]] = {"helix": [], "bm25_funcs": []}
    ingest_s = 0.0
    details = []
    for n, row in enumerate(rows, 1):
        extract(bare, row["tag"], tree)
        t = time.perf_counter()
        helix.ingest_path(tree, embed=not args.no_embed)
        ingest_s += time.perf_counter() - t
        gold = row["gold"]
        gold_files = set(gold)
        query = row["problem_statement"]

        files, spans, seconds = helix_answer(helix, query, tree)
        latencies.append(seconds)
        h = {**file_metrics(files, gold_files), **span_metrics(spans, gold)}
        per["helix"].append(h)
        span_lines["helix"].extend(e - s + 1 for _, s, e in spans)
        for key, retriever in singles.items():
            sf, ss = retriever_answer(retriever, query, tree)
            per[key].append({**file_metrics(sf, gold_files), **span_metrics(ss, gold)})

        if row["instance_id"] not in cached:
            cached[row["instance_id"]] = baseline_row(tree, row, tokens)
            if args.keep:
                cache_file.write_text(json.dumps(cached))
        per["bm25_files"].append(cached[row["instance_id"]]["files"])
        per["bm25_funcs"].append(cached[row["instance_id"]]["funcs"])
        span_lines["bm25_funcs"].extend(cached[row["instance_id"]]["func_lines"])
        details.append({"id": row["instance_id"], "helix": h, "helix_files": files[:5], "gold": sorted(gold_files)})
        print(f"[{n}/{len(rows)}] {row['instance_id']}: helix file@5 {h['file_hit@5']:.0f} func@10 "
              f"{h['func_hit@10']:.0f} | bm25 files@5 {per['bm25_files'][-1]['file_hit@5']:.0f} "
              f"funcs@10 {per['bm25_funcs'][-1]['func_hit@10']:.0f}", file=sys.stderr)
    helix.close()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)

    results = {name: mean(rows_) for name, rows_ in per.items() if rows_}
    results["instances"] = len(rows)
    results["helix_query_ms"] = {"p50": round(statistics.median(latencies) * 1000, 1),
                                 "p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))] * 1000, 1)}
    results["median_span_lines"] = {k: statistics.median(v) for k, v in span_lines.items() if v}
    results["ingest_s"] = round(ingest_s, 1)
    results["details"] = details
    best_file = max(results["bm25_files"]["file_hit@5"], results["bm25_funcs"]["file_hit@5"])
    best_func = results["bm25_funcs"]["func_hit@10"]
    cols = ["file_hit@1", "file_hit@5", "file_hit@10", "file_mrr@10", "func_hit@1", "func_hit@5", "func_hit@10"]
    print(f"\n{len(rows)} instances; Helix ingest {ingest_s:.1f} s in all; Helix query (spans + files) "
          f"p50 {results['helix_query_ms']['p50']} ms, p95 {results['helix_query_ms']['p95']} ms")
    print(f"{'system':<26}" + "".join(f"{c:>12}" for c in cols) + f"{'span lines':>12}")
    labels = {"helix": "Helix", "helix_dense_only": "Helix, dense only", "helix_lexical_only": "Helix, lexical only",
              "bm25_files": "bm25s whole files", "bm25_funcs": "bm25s function chunks"}
    for key, label in labels.items():
        if key not in results:
            continue
        r = results[key]
        med = results["median_span_lines"].get(key, "-")
        print(f"{label:<26}" + "".join(f"{r[c]:>12.3f}" for c in cols) + f"{med!s:>12}")
    def ratio(ours: float, theirs: float) -> str:
        return f"{ours / theirs:.2f}x" if theirs > 0 else "n/a (baseline 0)"

    print(f"\nratio Helix / best BM25: file Hit@5 {ratio(results['helix']['file_hit@5'], best_file)} (target 1.3x), "
          f"function Hit@10 {ratio(results['helix']['func_hit@10'], best_func)} (target 1.3x)")
    if singles:
        for metric in ("file_hit@5", "func_hit@10"):
            single = max(results[k][metric] for k in SINGLE_SIGNALS)
            print(f"ratio Helix / best single signal, {metric}: {ratio(results['helix'][metric], single)} (target >= 1.0x)")
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
