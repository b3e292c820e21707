"""Questions in words over JavaScript whose functions carry doc comments: does a pointer land on the function?

    python benchmarks/bench_doc_comments.py [--cache DIR] [--json OUT]

Needs `npm` once: `npm pack` of express 4.21.2, commander 12.1.0 and lodash 4.17.21 into --cache (the npm
registry; default: a folder in the temp dir), unpacked. Express's `lib/` (about 3,000 lines in 13 files) documents
nearly every method with a JSDoc block, a blank line, then the method; commander's (3,600 lines, most in one
class of 100 methods) writes the block right above. Stored chunks pack several methods each: the case where
a question in words has to be told apart from the neighbours by what the doc comment says. 35 and 30
questions, written by hand in other words than the comments', each about one function or method; each
package is its own genome. lodash.js alone (17,000 lines, one IIFE around `runInContext`, which defines the
API; every function's JSDoc carries `@static`, `@since`, `@category` and `@example` blocks) is held out: its 30
questions were written before any ranking ran on it, and no change is chosen by them.

A pointer is a hit where its lines hold the function's definition line and are at most three times the
function's own (its doc comment and code): a pointer at the whole file or at a chunk of ten methods is not.
Printed, in the same run over the same files: MRR@10 and hits at rank 1 of Helix (`fingerprint`), of Helix
with the dense signal only and with the lexical signals only, and of bm25s over the functions' own lines
(the same definitions, each with its doc comment); and how many questions `/context` answers at all, where
the silence gate (weigh/silence.py) would otherwise judge them about nothing indexed.
"""

from __future__ import annotations

import _checkout  # noqa: F401  (this checkout's helix_context, not an installed one)

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from _results import write_results
from bench_code_retrieval import single_signal_variants

# (question, file under lib/, the qualified name that answers it)
EXPRESS = [
    ("set the HTTP status code of the response", "response.js", "res.status"),
    ("send a JSON response body", "response.js", "res.json"),
    ("respond with JSON wrapped in a callback function for cross-domain script requests", "response.js", "res.jsonp"),
    ("send a status code with its standard message as the body", "response.js", "res.sendStatus"),
    ("transfer a file from disk to the client", "response.js", "res.sendFile"),
    ("prompt the browser to download a file", "response.js", "res.download"),
    ("respond differently depending on the content types the client accepts", "response.js", "res.format"),
    ("mark the response as a file to be saved with a file name", "response.js", "res.attachment"),
    ("add a value to a response header without replacing the existing ones", "response.js", "res.append"),
    ("remove a cookie from the client", "response.js", "res.clearCookie"),
    ("set a cookie with options such as max age or signing", "response.js", "res.cookie"),
    ("send the client to a different URL", "response.js", "res.redirect"),
    ("add a field to the Vary header", "response.js", "res.vary"),
    ("render a view template and send the resulting HTML", "response.js", "res.render"),
    ("set the Link header with related URLs", "response.js", "res.links"),
    ("check which content types the client is willing to accept", "request.js", "req.accepts"),
    ("parse the Range header of a request into byte ranges", "request.js", "req.range"),
    ("check whether the incoming request body has a given content type", "request.js", "req.is"),
    ("check which languages the client accepts", "request.js", "req.acceptsLanguages"),
    ("register a template engine for a file extension", "application.js", "app.engine"),
    ("start an HTTP server listening for connections on a port", "application.js", "app.listen"),
    ("turn a boolean application setting on", "application.js", "app.enable"),
    ("check whether a setting is turned off", "application.js", "app.disabled"),
    ("route every HTTP method of a path to the same handlers", "application.js", "app.all"),
    ("set up the default configuration of a new application", "application.js", "app.defaultConfiguration"),
    ("get the absolute path at which the app is mounted", "application.js", "app.path"),
    ("build a function that computes weak or strong ETags", "utils.js", "compileETag"),
    ("decide which proxy addresses to trust from a setting", "utils.js", "compileTrust"),
    ("parse a query string allowing nested objects", "utils.js", "parseExtendedQueryString"),
    ("add a charset parameter to a Content-Type value", "utils.js", "setCharset"),
    ("answer an OPTIONS request with the allowed methods", "router/index.js", "sendOptionsResponse"),
    ("merge the parent router's params into the child route's params", "router/index.js", "mergeParams"),
    ("dispatch a request into the router's stack of middleware", "router/index.js", "proto.handle"),
    ("find the next layer whose path matches the request", "router/index.js", "matchLayer"),
    ("look up a file of a view in the configured view folders", "view.js", "View.lookup"),
]

COMMANDER = [
    ("define a command-line option with its flags and a description", "command.js", "Command.option"),
    ("declare an option that must always be given", "command.js", "Command.requiredOption"),
    ("add a positional argument to the command", "command.js", "Command.argument"),
    ("register the function that runs when the command is invoked", "command.js", "Command.action"),
    ("parse the process arguments and run the matching command", "command.js", "Command.parse"),
    ("parse the arguments when the action handlers are asynchronous", "command.js", "Command.parseAsync"),
    ("add a flag that prints the program's version", "command.js", "Command.version"),
    ("give the command another name it can be called by", "command.js", "Command.alias"),
    ("throw an exception instead of exiting the process", "command.js", "Command.exitOverride"),
    ("show the help text after an error message", "command.js", "Command.showHelpAfterError"),
    ("accept options the program did not declare", "command.js", "Command.allowUnknownOption"),
    ("leave the options after a subcommand for it to handle", "command.js", "Command.passThroughOptions"),
    ("get the values of all parsed options as one object", "command.js", "Command.opts"),
    ("get option values including those of the parent commands", "command.js", "Command.optsWithGlobals"),
    ("run a callback before or after the action of a command", "command.js", "Command.hook"),
    ("change where the help and the error output are written", "command.js", "Command.configureOutput"),
    ("print the help text", "command.js", "Command.outputHelp"),
    ("report an error to the user and exit", "command.js", "Command.error"),
    ("derive the program name from the script's file name", "command.js", "Command.nameFromFilename"),
    ("set the folder where executable subcommands are looked for", "command.js", "Command.executableDir"),
    ("add extra text before or after the built-in help", "command.js", "Command.addHelpText"),
    ("read option values from environment variables", "command.js", "Command._parseOptionsEnv"),
    ("check that every mandatory option was given a value", "command.js",
     "Command._checkForMissingMandatoryOptions"),
    ("create a subcommand", "command.js", "Command.command"),
    ("word-wrap text to fit the width of the terminal", "help.js", "Help.wrap"),
    ("compute the edit distance between two strings", "suggestSimilar.js", "editDistance"),
    ("turn an option name with dashes into camel case", "option.js", "camelcase"),
    ("restrict an option's value to a fixed set of choices", "option.js", "Option.choices"),
    ("set other option values implied by this option", "option.js", "Option.implies"),
    ("make an argument optional", "argument.js", "Argument.argOptional"),
]

# held out (see the module docstring): lodash's functions are defined inside `runInContext`, hence their names
LODASH = [(question, "lodash.js", "runInContext." + name) for question, name in [
    ("split an array into groups of a given size", "chunk"),
    ("remove falsy values from an array", "compact"),
    ("delay calling a function until it has not been called for some time", "debounce"),
    ("call a function at most once per time interval", "throttle"),
    ("make a function that can only be called one time", "once"),
    ("flatten a nested array all the way down", "flattenDeep"),
    ("build an object from a list of key value pairs", "fromPairs"),
    ("get the last element of an array", "last"),
    ("keep only the first occurrence of each value in an array", "uniq"),
    ("sort a collection by several properties with ascending or descending order", "orderBy"),
    ("pick a random element from a collection", "sample"),
    ("create a function that negates the result of a predicate", "negate"),
    ("invoke a function only after it has been called n times", "after"),
    ("turn a function of many arguments into a chain of functions of one argument", "curry"),
    ("clamp a number between a lower and upper bound", "clamp"),
    ("check whether a number lies within a range", "inRange"),
    ("make the first character of a string upper case and the rest lower case", "capitalize"),
    ("remove accents and diacritical marks from letters", "deburr"),
    ("escape the characters that have a meaning in a regular expression", "escapeRegExp"),
    ("pad a string on both sides to a given length", "pad"),
    ("cut a long string and add an ellipsis at the end", "truncate"),
    ("split a string into an array of its words", "words"),
    ("compile a template string with embedded values into a function", "template"),
    ("generate a unique identifier with an optional prefix", "uniqueId"),
    ("compute the average of the values in an array", "mean"),
    ("call a function a given number of times and collect the results", "times"),
    ("return the default value when the given value is null or NaN", "defaultTo"),
    ("get the value at a path of an object, calling it if it is a function", "result"),
    ("remove all given values from an array in place", "pullAll"),
    ("create a function that calls the function of the first matching predicate", "cond"),
]]

# package → (what of it is indexed: a folder, or one file indexed alone; its questions)
PACKAGES = {"express@4.21.2": ("lib", EXPRESS), "commander@12.1.0": ("lib", COMMANDER),
            "lodash@4.17.21": ("lodash.js", LODASH)}


def fetch(cache: Path, package: str, part: str = "lib") -> Path:
    """The folder to index: the package's `part` (a folder, or a file copied into a folder of its own), unpacked
    under `cache` (downloaded once with npm)."""
    folder = cache / package.replace("@", "-")
    lib = folder / "package" / part
    if lib.suffix:  # one file of the package, indexed alone, in a folder named for the package as a checkout is
        alone = folder / package.split("@")[0]
        if not (alone / lib.name).is_file():
            fetch(cache, package, "")
            alone.mkdir(exist_ok=True)
            shutil.copyfile(lib, alone / lib.name)
        return alone
    if lib.is_dir():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("this benchmark needs npm once, to fetch its packages from the npm registry (apt install npm)")
    print(f"  downloading {package} into {folder}", file=sys.stderr, flush=True)
    subprocess.run([npm, "pack", package, "--pack-destination", str(folder)], check=True, capture_output=True)
    archive = next(folder.glob("*.tgz"))
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return lib


def targets(lib: Path) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(file, name) → (first line with its doc comment, definition line, last line), from the symbols."""
    from helix_context.ingest.symbols import find_symbols

    out = {}
    for path in sorted(lib.rglob("*.js")):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        for sym in find_symbols(text, "code", "javascript"):
            line = sym.start_line  # the definition line: the first that is neither comment nor blank
            while line < sym.end_line and (not lines[line - 1].strip() or lines[line - 1].lstrip()[:1] in "/*"):
                line += 1
            out[(path.relative_to(lib).as_posix(), sym.name)] = (sym.start_line, line, sym.end_line)
    return out


def is_hit(span: tuple[str, int, int], relpath: str, target: tuple[int, int, int]) -> bool:
    path, first, last = span
    lo, line, hi = target
    return path.replace("\\", "/").endswith("/" + relpath) and first <= line <= last \
        and last - first + 1 <= 3 * (hi - lo + 1)


Question = tuple[str, str, str]
LABELS = (("helix", "Helix (fingerprint)"), ("helix_packet", "Helix /context/packet (gated, its items)"),
          ("helix_dense_only", "Helix, dense signal only"),
          ("helix_lexical_only", "Helix, lexical signals only"), ("bm25_functions", "bm25s, each definition's own lines"))


def score(questions: list[Question], ranked: list[list[tuple[str, int, int]]],
          wanted: list[tuple[int, int, int]]) -> dict[str, float]:
    mrr, first = 0.0, 0
    for spans, (_, relpath, _), target in zip(ranked, questions, wanted, strict=True):
        rank = next((i + 1 for i, span in enumerate(spans[:10]) if is_hit(span, relpath, target)), None)
        mrr += 1.0 / rank if rank else 0.0
        first += rank == 1
    return {"mrr10": round(mrr / len(questions), 3), "hits1": first}


def bm25_functions(lib: Path, found: dict[tuple[str, str], tuple[int, int, int]],
                   questions: list[Question]) -> list[list[tuple[str, int, int]]]:
    """bm25s over each definition's own lines (its doc comment and code), path first, identifiers split."""
    from bench_localization import BM25Index

    ids = [(str(lib / rel), lo, hi) for (rel, _), (lo, _, hi) in sorted(found.items())]
    texts = []
    for path, lo, hi in ids:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
        texts.append(path + "\n" + "\n".join(lines[lo - 1:hi]))
    index = BM25Index(texts)
    return [[ids[i] for i in index.search(question, 10)] for question, _, _ in questions]


def measure(package: str, lib: Path, questions: list[Question]) -> dict:
    """Every ranking's MRR@10 and hits at rank 1 over one package's own genome."""
    found = targets(lib)
    missing = [name for _, rel, name in questions if (rel, name) not in found]
    if missing:
        raise SystemExit(f"no symbol found for {missing}: the questions expect {package}")
    wanted = [found[(rel, name)] for _, rel, name in questions]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HELIX_HOME"] = tmp
        from helix_context.config import load_config
        from helix_context.manager import HelixContextManager
        from helix_context.retrieve.retriever import Retriever

        settings = load_config()
        helix = HelixContextManager(settings)
        if helix.embedder is None:
            raise SystemExit(f"embeddings unavailable: {helix.embedder_part.detail}")
        report = helix.ingest_path(lib)
        results: dict = {"model": settings.embedding.model, "genes": report.genes_added, "questions": len(questions)}
        for key, variant in single_signal_variants(settings).items():
            retriever = Retriever(helix.genome, variant, embedder_part=helix.embedder_part)
            ranked = [[(p.path or "", p.start_line, p.end_line)
                       for p in retriever.retrieve(q, max_genes=10, gate=False, pointers=True).pointers[:10]]
                      for q, _, _ in questions]
            results[key] = score(questions, ranked, wanted)
        # what an agent gets: the packet's items in order (verified, then stale_risk), silence included
        results["helix_packet"] = score(questions, [[(i.source_id or "", i.start_line, i.end_line)
                                                     for i in helix.packet(q).items[:10]] for q, _, _ in questions],
                                        wanted)
        # what /context, the packet and the proxy do first: a question judged about nothing here gets silence
        results["answered"] = sum(1 for q, _, _ in questions if not helix.retriever.retrieve(q).silence)
        helix.close()
    results["bm25_functions"] = score(questions, bm25_functions(lib, found, questions), wanted)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "helix-bench-doc-comments")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results = {package: measure(package, fetch(args.cache, package, part), questions)
               for package, (part, questions) in PACKAGES.items()}
    total = sum(len(q) for _, q in PACKAGES.values())
    results["all"] = {key: {"mrr10": round(sum(r[key]["mrr10"] * r["questions"] for r in results.values()) / total, 3),
                            "hits1": sum(r[key]["hits1"] for r in results.values())} for key, _ in LABELS}
    model = next(iter(results.values()))["model"]
    print(f"{total} questions in words, model {model}: MRR@10 (hits at rank 1)")
    print(f"  {'ranking':<40}" + "".join(f"{name:>20}" for name in [*PACKAGES, "all"]))
    for key, label in LABELS:
        print(f"  {label:<40}" + "".join(f"{results[name][key]['mrr10']:>12.3f} ({results[name][key]['hits1']:>3})"
                                         for name in [*PACKAGES, "all"]))
    results["all"]["answered"] = sum(results[name]["answered"] for name in PACKAGES)
    print(f"  {'answered, not silenced (/context)':<40}" + "".join(
        f"{results[name]['answered']:>14} / {results[name]['questions'] if name in PACKAGES else total:<3}"
        for name in [*PACKAGES, "all"]))
    write_results(args.json, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
