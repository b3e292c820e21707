"""Code retrieval quality on the bench_ingest corpus: what the code digest costs and buys.

    python benchmarks/bench_code_retrieval.py [--json OUT]

Ingests the standard-library packages of bench_ingest.py with embeddings, then
asks 66 hand-written questions in plain words ("rotate log files when they
reach a certain size"), each judged relevant to the gene that holds the named
function or class (found with `ast` in the installed standard library). Prints
nDCG@10 of the hybrid ranking (what /context uses) and of the dense signal
alone, with each code gene embedded three ways in the same run:

* the digest (helix_context/ingest/embed_text.py): names as words, comments,
  then code, capped at [embedding] code_max_tokens word pieces (the default);
* the baseline: the gene's own text under its path, first 128 word pieces
  (what every gene got before the digest; about 4x the model's work);
* the same text cut to the digest's cap;

and lexical signals only (no dense vector) as the floor.

The strict line scores pointers, not genes: a returned span is a hit only
where it covers at least half the target function's lines (so it is at least
half the target's size) *and* the target is at least half of the span (a
40-line gene packing five functions is not a pointer at a 9-line one). Strict
MRR@10 is printed, in the same run over the same files, for:

* Helix (`fingerprint`: question-aware fusion, spans scored on their own);
* Helix with the dense signal only (gene and span cosines) and with the
  lexical signals only — the single signals the fusion must not fall below;
* MiniLM alone over function-level chunks (ast functions, methods, class
  headers; other lines in 60-line windows), each chunk embedded on its own,
  from its digest and from its own text;
* bm25s over the same function-level chunks.

`--quick` prints only the strict lines (no re-embedding of the genome three ways).

`--shapes` prints, instead, the configured model alone over the function-level
chunks with each chunk's text read four ways (path and code; the code; the code
without its docstring, as the trained model's pairs were cut; the digest) at 32,
128 and 256 word pieces: whether a model reads code better from longer text or
from the shape it was trained on (issue 23).
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import ast
import dataclasses
import os
import sys
import sysconfig
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

from _results import write_results
from bench_ingest import corpus
from bench_retrieval import ndcg_at

# (question, file under the standard library, qualified names that answer it)
QUERIES = [
 ("serialize a Python object to a JSON formatted string with indentation", "json/__init__.py", ["dumps"]),
 ("deserialize JSON text read from a file object", "json/__init__.py", ["load"]),
 ("escape non-ASCII characters when encoding JSON strings", "json/encoder.py", ["py_encode_basestring_ascii"]),
 ("error raised when JSON text cannot be decoded, with line and column", "json/decoder.py", ["JSONDecodeError"]),
 ("decode a JSON document followed by extra data and return where it ended", "json/decoder.py", ["JSONDecoder.raw_decode"]),
 ("detect whether JSON bytes are utf-8, utf-16 or utf-32", "json/__init__.py", ["detect_encoding"]),
 ("parse an RFC 2822 date header into a datetime object", "email/utils.py", ["parsedate_to_datetime"]),
 ("format a timestamp as an email Date header", "email/utils.py", ["formatdate"]),
 ("split a To header into a list of real names and addresses", "email/utils.py", ["getaddresses"]),
 ("attach a file to an email message", "email/message.py", ["MIMEPart.add_attachment"]),
 ("iterate over all the parts of a multipart message tree", "email/iterators.py", ["walk"]),
 ("decode a MIME encoded-word header like =?utf-8?q?", "email/header.py", ["decode_header"]),
 ("quoted-printable encoding of a message body", "email/quoprimime.py", ["body_encode"]),
 ("generate a unique Message-ID header value", "email/utils.py", ["make_msgid"]),
 ("parse an email message from a bytes object", "email/__init__.py", ["message_from_bytes"]),
 ("parser that is fed a message incrementally in chunks", "email/feedparser.py", ["FeedParser"]),
 ("send an HTTP request with headers and a body on a persistent connection", "http/client.py", ["HTTPConnection.request"]),
 ("read a chunked transfer-encoded response body", "http/client.py", ["HTTPResponse._read_chunked", "HTTPResponse._get_chunk_left"]),
 ("serve files from the current directory over HTTP", "http/server.py", ["SimpleHTTPRequestHandler"]),
 ("parse a Set-Cookie header string into morsels", "http/cookies.py", ["BaseCookie.load", "BaseCookie.__parse_string"]),
 ("store cookies from responses and send them back on later requests", "http/cookiejar.py", ["CookieJar.extract_cookies", "CookieJar.add_cookie_header"]),
 ("enumeration of HTTP status codes and reason phrases", "http/__init__.py", ["HTTPStatus"]),
 ("run a CGI script for a web request", "http/server.py", ["CGIHTTPRequestHandler.run_cgi"]),
 ("parse the request line and headers of an incoming HTTP request", "http/server.py", ["BaseHTTPRequestHandler.parse_request"]),
 ("load cookies from a Netscape cookies.txt file", "http/cookiejar.py", ["MozillaCookieJar._really_load"]),
 ("percent-encode a string for use in a URL", "urllib/parse.py", ["quote", "quote_from_bytes"]),
 ("encode a dict of query parameters into a query string", "urllib/parse.py", ["urlencode"]),
 ("split a URL into scheme, host, path, query and fragment", "urllib/parse.py", ["urlsplit", "urlparse"]),
 ("resolve a relative link against a base URL", "urllib/parse.py", ["urljoin"]),
 ("check robots.txt to see whether a crawler may fetch a page", "urllib/robotparser.py", ["RobotFileParser.can_fetch"]),
 ("follow HTTP redirects when opening a URL", "urllib/request.py", ["HTTPRedirectHandler.redirect_request", "HTTPRedirectHandler.http_error_302"]),
 ("use proxy servers configured in environment variables", "urllib/request.py", ["getproxies_environment"]),
 ("HTTP basic authentication with a username and password", "urllib/request.py", ["HTTPBasicAuthHandler", "AbstractBasicAuthHandler.http_error_auth_reqed"]),
 ("download a URL to a local file", "urllib/request.py", ["urlretrieve"]),
 ("rotate log files when they reach a certain size", "logging/handlers.py", ["RotatingFileHandler", "RotatingFileHandler.shouldRollover", "RotatingFileHandler.doRollover"]),
 ("start a new log file at midnight or at a timed interval", "logging/handlers.py", ["TimedRotatingFileHandler", "TimedRotatingFileHandler.computeRollover"]),
 ("configure logging from a dictionary", "logging/config.py", ["dictConfig", "DictConfigurator.configure"]),
 ("send log records over a network socket", "logging/handlers.py", ["SocketHandler"]),
 ("format the creation time of a log record", "logging/__init__.py", ["Formatter.formatTime"]),
 ("quick one-call setup of the root logger", "logging/__init__.py", ["basicConfig"]),
 ("buffer log records in memory and flush them to another handler", "logging/handlers.py", ["MemoryHandler", "BufferingHandler"]),
 ("send log messages by email", "logging/handlers.py", ["SMTPHandler"]),
 ("log from several threads through a queue and a listener", "logging/handlers.py", ["QueueHandler", "QueueListener"]),
 ("cancel an awaitable if it does not finish within a timeout", "asyncio/tasks.py", ["wait_for"]),
 ("run several coroutines concurrently and collect their results", "asyncio/tasks.py", ["gather"]),
 ("start a TCP server that handles each client with a coroutine", "asyncio/streams.py", ["start_server"]),
 ("limit how many coroutines use a resource at the same time", "asyncio/locks.py", ["Semaphore", "BoundedSemaphore"]),
 ("run a blocking function in a thread from async code", "asyncio/threads.py", ["to_thread"]),
 ("spawn a subprocess and read its output asynchronously", "asyncio/subprocess.py", ["create_subprocess_exec"]),
 ("producer consumer queue for coroutines", "asyncio/queues.py", ["Queue"]),
 ("schedule a callback to run after a delay on the event loop", "asyncio/base_events.py", ["BaseEventLoop.call_later", "BaseEventLoop.call_at"]),
 ("wait for a group of tasks and cancel the others when one fails", "asyncio/taskgroups.py", ["TaskGroup", "TaskGroup.__aexit__"]),
 ("parse an XML file into an element tree", "xml/etree/ElementTree.py", ["parse", "ElementTree.parse"]),
 ("find elements with a limited XPath expression", "xml/etree/ElementPath.py", ["find", "iterfind", "findall"]),
 ("pretty-print XML with indentation", "xml/etree/ElementTree.py", ["indent"]),
 ("SAX handler that receives start and end element events", "xml/sax/handler.py", ["ContentHandler"]),
 ("escape ampersands and angle brackets in XML text", "xml/sax/saxutils.py", ["escape"]),
 ("parse XML incrementally and get events while reading", "xml/etree/ElementTree.py", ["iterparse", "XMLPullParser"]),
 ("import a module given its dotted name", "importlib/__init__.py", ["import_module"]),
 ("reload a module that was already imported", "importlib/__init__.py", ["reload"]),
 ("get the version string of an installed distribution", "importlib/metadata/__init__.py", ["version", "Distribution.version"]),
 ("list the entry points of installed packages", "importlib/metadata/__init__.py", ["entry_points"]),
 ("load a module lazily on first attribute access", "importlib/util.py", ["LazyLoader"]),
 ("create a module spec from a file path", "importlib/_bootstrap_external.py", ["spec_from_file_location"]),
 ("read a data file shipped inside a package", "importlib/resources/_legacy.py", ["read_text", "open_text"]),
 ("compute the cached bytecode path for a source file", "importlib/_bootstrap_external.py", ["cache_from_source"]),
]


def definition_lines(relpath: str) -> dict[str, int]:
    """Qualified name -> first line (decorators included) of each def / class in a stdlib file."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    tree = ast.parse((stdlib / relpath).read_text(encoding="utf-8"))
    found: dict[str, int] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + node.name
                found[name] = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if isinstance(node, ast.ClassDef):
                    walk(node.body, name + ".")

    walk(tree.body, "")
    return found


def target_spans(relpath: str, names: list[str]) -> list[tuple[int, int]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    tree = ast.parse((stdlib / relpath).read_text(encoding="utf-8"))
    spans: dict[str, tuple[int, int]] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                spans[prefix + node.name] = (start, node.end_lineno or node.lineno)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, prefix + node.name + ".")

    walk(tree.body, "")
    return [spans[n] for n in names if n in spans]


def strict_hit(span: tuple[str, int, int], relpath: str, targets: list[tuple[int, int]]) -> bool:
    path, start, end = span
    if not path.replace("\\", "/").endswith("/" + relpath):
        return False
    for t0, t1 in targets:
        overlap = min(end, t1) - max(start, t0) + 1
        if overlap >= 0.5 * (t1 - t0 + 1) and (t1 - t0 + 1) >= 0.5 * (end - start + 1):
            return True
    return False


def strict_mrr(ranked: list[list[tuple[str, int, int]]]) -> float:
    total = 0.0
    for spans, (_, relpath, names) in zip(ranked, QUERIES, strict=True):
        targets = target_spans(relpath, names)
        rank = next((i for i, s in enumerate(spans[:10], 1) if strict_hit(s, relpath, targets)), None)
        total += 1.0 / rank if rank else 0.0
    return total / len(QUERIES)


def function_chunk_texts(roots: list[Path]) -> tuple[list[tuple[str, int, int]], list[str]]:
    """The function-level chunks of every .py file under `roots`: (path, first, last line), text (path first)."""
    from bench_localization import function_chunks

    ids: list[tuple[str, int, int]] = []
    texts: list[str] = []
    for path in sorted(p for root in roots for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        text = path.read_text(encoding="utf-8", errors="replace")
        for s, e, t in function_chunks(str(path), text):
            ids.append((str(path), s, e))
            texts.append(t)
    return ids, texts


def bm25_function_spans(roots: list[Path]) -> list[list[tuple[str, int, int]]]:
    from bench_localization import BM25Index

    ids, texts = function_chunk_texts(roots)
    index = BM25Index(texts)
    return [[ids[i] for i in index.search(q, 10)] for q, _, _ in QUERIES]


def dense_function_spans(roots: list[Path], embedder, cfg) -> dict[str, list[list[tuple[str, int, int]]]]:
    """MiniLM alone over the function-level chunks: each embedded from its digest and from its own text."""
    from helix_context.ingest.embed_text import embedding_text
    from helix_context.models import Gene

    ids, texts = function_chunk_texts(roots)
    digests = [embedding_text(Gene(gene_id=str(i), content=t.split("\n", 1)[-1], content_type="code", project=None,
                                   language="python", source_path=path, start_line=s, end_line=e))
               for i, ((path, s, e), t) in enumerate(zip(ids, texts, strict=True))]
    queries = embedder.embed([q for q, _, _ in QUERIES])
    out = {}
    for label, chunk_texts, pieces in (("digest", digests, cfg.code_max_tokens), ("text", texts, 128)):
        matrix = embedder.embed(chunk_texts, pieces)
        sims = queries @ matrix.T
        out[label] = [[ids[i] for i in np.argsort(-row)[:10]] for row in sims]
    return out


def strip_docstrings(code: str) -> str:
    """The code without the docstrings of the functions and classes it defines (the training pairs' shape)."""
    body = textwrap.dedent(code)
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return body
    drop: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                drop.update(range(first.lineno - 1, first.end_lineno or first.lineno))
    return "\n".join(line for i, line in enumerate(body.split("\n")) if i not in drop)


SHAPE_BUDGETS = (32, 128, 256)


def text_shapes(roots: list[Path], embedder) -> dict[str, float]:
    """Strict MRR@10 of the model alone over function chunks, per chunk text shape and word-piece budget."""
    from helix_context.ingest.embed_text import embedding_text
    from helix_context.models import Gene

    ids, texts = function_chunk_texts(roots)
    codes = [t.split("\n", 1)[-1] for t in texts]
    shapes = {
        "path + code": texts,
        "code": [textwrap.dedent(c) for c in codes],
        "code without docstrings": [strip_docstrings(c) for c in codes],
        "digest": [embedding_text(Gene(gene_id=str(i), content=c, content_type="code", project=None,
                                       language="python", source_path=p, start_line=s, end_line=e))
                   for i, ((p, s, e), c) in enumerate(zip(ids, codes, strict=True))],
    }
    queries = embedder.embed([q for q, _, _ in QUERIES])
    out: dict[str, float] = {}
    for label, chunk_texts in shapes.items():
        for pieces in SHAPE_BUDGETS:
            sims = queries @ embedder.embed(chunk_texts, pieces).T
            out[f"{label} @{pieces}"] = round(strict_mrr([[ids[i] for i in np.argsort(-row)[:10]] for row in sims]), 3)
            print(f"  {label + f' @{pieces}':<34}{out[f'{label} @{pieces}']:>7.3f}", file=sys.stderr, flush=True)
    return out


def pointer_spans(retriever, question: str) -> list[tuple[str, int, int]]:
    found = retriever.retrieve(question, max_genes=10, gate=False, pointers=True).pointers
    return [(p.path or "", p.start_line, p.end_line) for p in found[:10]]


def single_signal_variants(settings) -> dict:
    """Helix as configured, and with the dense signal only (gene and span cosines) or the lexical signals only:
    the rankings a fusion must not fall below, over the same genes."""
    cfg = settings.retrieval
    lexical = {f"{p}{n}": 0.0 for p in ("weight_", "code_weight_") for n in ("fts", "tags", "path", "path_terms",
                                                                                  "coactivation", "definition")}
    return {
        "helix": settings,
        "helix_dense_only": settings.replace(retrieval={**lexical, "locate_symbol": 0.0, "locate_definition": 0.0,
                                                        "locate_name": 0.0,
                                                        "locate_dense": cfg.locate_dense or None}),
        "helix_lexical_only": settings.replace(retrieval={"weight_dense": 0.0, "code_weight_dense": 0.0,
                                                          "locate_dense": 0.0}),
    }


def strict_lines(helix, settings, roots: list[Path]) -> dict[str, float]:
    """Strict MRR@10 of Helix, of its single signals and of the function-level baselines, in one run."""
    from helix_context.retrieve.retriever import Retriever

    out: dict[str, float] = {}
    for key, variant in single_signal_variants(settings).items():
        retriever = Retriever(helix.genome, variant, embedder_part=helix.embedder_part)
        out[key] = round(strict_mrr([pointer_spans(retriever, q) for q, _, _ in QUERIES]), 3)
    for label, spans in dense_function_spans(roots, helix.embedder, settings.embedding).items():
        out[f"minilm_functions_{label}"] = round(strict_mrr(spans), 3)
    out["bm25_functions"] = round(strict_mrr(bm25_function_spans(roots)), 3)
    # what an agent gets: the packet's items in order (verified, then stale_risk), silence included
    out["helix_packet"] = round(strict_mrr([[(i.source_id or "", i.start_line, i.end_line)
                                             for i in helix.packet(q).items[:10]] for q, _, _ in QUERIES]), 3)
    # what /context, the packet and the proxy do first: a question judged about nothing here gets silence
    out["answered"] = sum(1 for q, _, _ in QUERIES if not helix.retriever.retrieve(q).silence)
    return out


def judgements(genes: dict) -> list[tuple[str, dict[str, int]]]:
    out = []
    for question, relpath, names in QUERIES:
        lines = definition_lines(relpath)
        rels = {str(rowid): 1 for rowid, gene in genes.items()
                if (gene.source_path or "").replace("\\", "/").endswith("/" + relpath)
                and any(gene.start_line <= lines[n] <= gene.end_line for n in names)}
        if not rels:
            raise SystemExit(f"no gene holds {names} of {relpath}: has the chunker changed?")
        out.append((question, rels))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--quick", action="store_true", help="only the strict MRR@10 lines")
    parser.add_argument("--shapes", action="store_true",
                        help="only the model alone over function chunks, per text shape and length")
    args = parser.parse_args()
    if args.shapes:
        return shapes_main(args.json)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HELIX_HOME"] = tmp
        from helix_context.config import load_config
        from helix_context.ingest.embed_text import embedding_text, embedding_tokens
        from helix_context.manager import HelixContextManager
        from helix_context.retrieve.retriever import Retriever

        settings = load_config()
        helix = HelixContextManager(settings)
        embedder = helix.embedder
        if embedder is None:
            raise SystemExit(f"embeddings unavailable: {helix.embedder_part.detail}")
        helix.ingest_path(corpus())
        genome = helix.genome
        rows = [r for (r,) in genome.conn.execute("SELECT id FROM genes WHERE retired_at IS NULL ORDER BY id")]
        genes = genome.genes_by_rowid(rows)
        judged = judgements(genes)
        query_vectors = embedder.embed([q for q, _ in judged])
        cfg = settings.embedding

        def score(label: str, dense: bool = True) -> dict:
            retriever = Retriever(genome, settings if dense else settings.replace(retrieval={"weight_dense": 0.0}),
                                  embedder_part=helix.embedder_part)
            hybrid = [ndcg_at([str(it.gene.rowid) for it in retriever.retrieve(q, max_genes=10, gate=False).items],
                              rels) for q, rels in judged]
            result = {"label": label, "hybrid_ndcg10": round(float(np.mean(hybrid)), 3)}
            if dense:
                index = genome.vector_index()
                ranked = [[str(r) for r in index.search(v, 10, exact=True).rowids] for v in query_vectors]
                result["dense_ndcg10"] = round(float(np.mean([ndcg_at(r, rels) for r, (_, rels) in zip(ranked, judged, strict=True)])), 3)
            return result

        def reembed(texts: list[str], limit: int) -> float:
            started = time.perf_counter()
            vectors = embedder.embed(texts, [limit] * len(texts))
            seconds = time.perf_counter() - started
            genome.set_embeddings(list(zip(rows, vectors, strict=True)))
            return seconds

        as_text = [embedding_text(dataclasses.replace(genes[r], content_type="text")) for r in rows]
        results = {"genes": len(rows), "queries": len(judged),
                   "model": str(getattr(embedder, "model_name", "?"))}
        if args.quick:
            results["strict_mrr10"] = strict_lines(helix, settings, corpus())
            helix.close()
            print_strict(results)
            write_results(args.json, results)
            return 0
        digest_s = reembed([embedding_text(genes[r]) for r in rows], embedding_tokens(genes[rows[0]], cfg))
        results["digest"] = {**score(f"digest, {cfg.code_max_tokens} pieces"), "embed_s": round(digest_s, 2)}
        raw_s = reembed(as_text, 128)
        results["raw_128"] = {**score("own text, 128 pieces (baseline)"), "embed_s": round(raw_s, 2)}
        cut_s = reembed(as_text, cfg.code_max_tokens)
        results["raw_cut"] = {**score(f"own text, {cfg.code_max_tokens} pieces"), "embed_s": round(cut_s, 2)}
        results["lexical"] = score("lexical signals only", dense=False)
        reembed([embedding_text(genes[r]) for r in rows], embedding_tokens(genes[rows[0]], cfg))
        results["strict_mrr10"] = strict_lines(helix, settings, corpus())
        helix.close()

    print(f"{results['queries']} questions over {results['genes']} genes", file=sys.stderr)
    print(f"{'code genes embedded from':<34}{'hybrid nDCG@10':>16}{'dense nDCG@10':>15}{'embed s':>9}")
    for key in ("digest", "raw_128", "raw_cut", "lexical"):
        r = results[key]
        dense = f"{r['dense_ndcg10']:.3f}" if "dense_ndcg10" in r else "-"
        secs = f"{r['embed_s']:.2f}" if "embed_s" in r else "-"
        print(f"{r['label']:<34}{r['hybrid_ndcg10']:>16.3f}{dense:>15}{secs:>9}")
    print_strict(results)
    write_results(args.json, results)
    return 0


def shapes_main(json_out: str | None) -> int:
    from helix_context.config import load_config
    from helix_context.ingest.embed import Embedder

    cfg = load_config().embedding
    embedder = Embedder.load(model=cfg.model, max_tokens=max(SHAPE_BUDGETS))
    print(f"model alone over function chunks, strict MRR@10, model {embedder.model_name}:")
    results = {"model": embedder.model_name, "shapes": text_shapes(corpus(), embedder)}
    for key, value in results["shapes"].items():
        print(f"  {key:<34}{value:>7.3f}")
    write_results(json_out, results)
    return 0


STRICT_LABELS = {"helix": "Helix (fingerprint)", "helix_packet": "Helix /context/packet (gated, its items)",
                 "helix_dense_only": "Helix, dense signal only",
                 "helix_lexical_only": "Helix, lexical signals only",
                 "minilm_functions_digest": "MiniLM alone, function chunks (digest)",
                 "minilm_functions_text": "MiniLM alone, function chunks (own text, 128 pieces)",
                 "bm25_functions": "bm25s, function chunks"}


def print_strict(results: dict) -> None:
    strict = results["strict_mrr10"]
    bm25 = max(strict["bm25_functions"], 1e-9)
    print(f"\nstrict MRR@10 (span covers >= half the target, target >= half the span), model {results['model']}:")
    for key, label in STRICT_LABELS.items():
        print(f"  {label:<54}{strict[key]:>7.3f}{strict[key] / bm25:>7.2f}x bm25s")
    best_single = max(v for k, v in strict.items() if k not in ("helix", "helix_packet", "answered"))
    print(f"Helix / best single ranking: {strict['helix'] / max(best_single, 1e-9):.2f}x; "
          f"Helix / bm25s: {strict['helix'] / bm25:.2f}x (targets: >= 1.0x, >= 1.3x plain MiniLM, >= 1.6x trained)")
    print(f"answered by /context, not silenced: {strict['answered']} of {len(QUERIES)} questions")


if __name__ == "__main__":
    raise SystemExit(main())
