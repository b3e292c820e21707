"""Mine (question, code) pairs from permissively licensed third-party packages.

Why: a docstring's first sentence is a natural-language question's closest
free stand-in ("Return the indices of the maximum values along an axis."), and
the function below it is the answer. Pairs mined from public packages teach
MiniLM to match the two without any project-specific data.

What it does, in a fixed order so that the same versions give the same pairs:

1. installs the pinned ``PACKAGES`` below with ``pip install --no-deps
   --target`` into a scratch folder (nothing is imported; only the sources are
   read);
2. reads each package's licence from its installed metadata and refuses to go
   on if one is not MIT, BSD or Apache;
3. walks the packages' ``.py`` files in sorted order, skipping tests and
   vendored copies of other projects, and takes every function or method
   whose docstring has a usable first sentence;
4. dedupes (same code, same question), holds out whole files for metrics,
   shuffles with the seed, and writes ``train.jsonl.xz``, ``heldout.jsonl.xz``
   and ``manifest.json`` (packages, versions, licences, exclusions, counts);
5. pairs the same questions, same split, with the digests the product embeds
   (shapes.py) and writes them under ``digest/``.

Usage::

    python tools/train_embedder/mine.py --work /tmp/mine --out /tmp/pairs

The standard library is never read (only the scratch folder is walked), and
sympy, flask, requests and click are excluded by name: sympy is the swe-dev
benchmark's project; flask, requests and click (and their own dependencies)
are the scoping benchmark's. No benchmark data is read.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import lzma
import random
import re
import subprocess
import sys
import textwrap
from email.parser import Parser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from shapes import digest_pairs

from helix_context.config import Settings

SEED = 20261126

# Pinned, permissively licensed packages (licence read back from the metadata
# after install and checked). Chosen for many documented functions across
# numeric, data, web, tooling and parsing code.
PACKAGES: list[str] = [
    "numpy==2.1.3",
    "scipy==1.14.1",
    "pandas==2.2.3",
    "scikit-learn==1.5.2",
    "scikit-image==0.24.0",
    "networkx==3.4.2",
    "astropy==6.1.6",
    "statsmodels==0.14.4",
    "xarray==2024.11.0",
    "dask==2024.11.2",
    "distributed==2024.11.2",
    "numba==0.60.0",
    "bokeh==3.6.1",
    "django==5.1.3",
    "sqlalchemy==2.0.36",
    "twisted==24.10.0",
    "tornado==6.4.2",
    "aiohttp==3.11.7",
    "setuptools==75.6.0",
    "pip==24.3.1",
    "pytest==8.3.3",
    "sphinx==8.1.3",
    "ipython==8.29.0",
    "mypy==1.13.0",
    "pydantic==2.10.1",
    "pygments==2.18.0",
    "rich==13.9.4",
    "black==24.10.0",
    "jedi==0.19.2",
    "parso==0.8.4",
    "pyparsing==3.2.0",
    "cryptography==43.0.3",
    "attrs==24.2.0",
    "sqlparse==0.5.2",
    "transformers==4.46.3",
    "tensorflow-probability==0.25.0",
    "jax==0.4.35",
    "keras==3.7.0",
    "nltk==3.9.1",
    "pyomo==6.8.2",
    "holoviews==1.20.0",
    "param==2.1.1",
    "traitlets==5.14.3",
    "jupyter-server==2.14.2",
    "nbconvert==7.16.4",
    "ipykernel==6.29.5",
    "jupyter-client==8.6.3",
    "celery==5.4.0",
    "kombu==5.4.2",
    "pyqtgraph==0.13.7",
    "trimesh==4.5.3",
    "mne==1.8.0",
    "nibabel==5.3.2",
    "cython==3.0.11",
    "prompt-toolkit==3.0.48",
    "openpyxl==3.1.5",
    "fonttools==4.55.0",
    "reportlab==4.2.5",
    "xlsxwriter==3.2.0",
    "boltons==24.1.0",
    "alembic==1.14.0",
    "marshmallow==3.23.1",
    "falcon==4.0.2",
    "pymc==5.18.2",
    "pytensor==2.26.3",
    "pyro-ppl==1.9.1",
    "datasets==3.1.0",
    "huggingface-hub==0.26.2",
    "accelerate==1.1.1",
    "diffusers==0.31.0",
    "optax==0.2.4",
    "flax==0.10.2",
    "pint==0.24.4",
    "fsspec==2024.10.0",
    "tox==4.23.2",
    "virtualenv==20.27.1",
]

# ``--more-packages``: 53 more, same licence rule (read back and checked the
# same way), for a larger training set: 86k code pairs instead of 52k. Kept
# apart so that the default run still writes the shipped model's pairs; the
# model trained with them read held-out third-party code better but ranked the
# benchmark questions no better (docs/performance.md, session 20).
MORE_PACKAGES: list[str] = [
    "anndata==0.12.19",
    "arrow==1.4.0",
    "arviz==0.23.4",
    "babel==2.19.0",
    "beautifulsoup4==4.15.0",
    "biotite==1.6.0",
    "botocore==1.44.8",
    "cirq-core==1.7.0",
    "coverage==7.17.5",
    "cvxpy==1.9.3",
    "dagster==1.13.29",
    "datashader==0.19.1",
    "dipy==1.12.1",
    "djangorestframework==3.18.3",
    "elasticsearch==9.5.1",
    "emcee==3.1.6",
    "geopandas==1.2.0",
    "gymnasium==1.4.0",
    "h5py==3.16.0",
    "invoke==3.0.3",
    "kedro==1.7.0",
    "langchain-core==1.8.4",
    "libcst==1.9.0",
    "lifelines==0.30.3",
    "lmfit==1.3.4",
    "luigi==3.8.1",
    "mkdocs==1.6.1",
    "mlflow-skinny==3.17.2",
    "music21==10.5.1",
    "nilearn==0.14.1",
    "optuna==5.0.0",
    "pandera==0.35.0",
    "panel==1.9.4",
    "pennylane==0.45.1",
    "pvlib==0.16.1",
    "pymatgen==2026.10.24",
    "pymongo==4.20.1",
    "pyproj==3.7.2",
    "qiskit==2.6.2",
    "redis==8.1.0",
    "sanic==25.12.1",
    "scanpy==1.11.5",
    "Scrapy==2.19.0",
    "seaborn==0.13.2",
    "shapely==2.2.0",
    "simpy==4.1.2",
    "sktime==1.2.0",
    "sortedcontainers==2.4.0",
    "sqlglot==30.30.0",
    "stable_baselines3==2.9.2",
    "sunpy==7.0.5",
    "textual==8.2.8",
    "zarr==3.1.6",
]

# Excluded by name, with the reason written into the manifest.
EXCLUDED: dict[str, str] = {
    "sympy": "the swe-dev benchmark's project (bench_localization.py)",
    "mpmath": "maintained beside sympy (swe-dev benchmark neighbourhood)",
    "flask": "used by the issue-24 scoping benchmark",
    "requests": "used by the issue-24 scoping benchmark",
    "click": "used by the issue-24 scoping benchmark",
    "werkzeug": "flask's own dependency (scoping benchmark neighbourhood)",
    "jinja2": "flask's own dependency (scoping benchmark neighbourhood)",
    "itsdangerous": "flask's own dependency (scoping benchmark neighbourhood)",
    "markupsafe": "flask's own dependency (scoping benchmark neighbourhood)",
    "urllib3": "requests' own dependency (scoping benchmark neighbourhood)",
    "matplotlib": "licence is PSF-style (not MIT/BSD/Apache)",
    "docutils": "parts are GPL / public domain / PSF (not only MIT/BSD/Apache)",
    "setuptools/_distutils, black's blib2to3": "copies of standard-library code (distutils, lib2to3)",
    "python standard library": "never read: only the scratch install folder is walked",
}

# Folders whose files are not the package's own library code: tests, and
# vendored copies of other projects (pip vendors requests and urllib3).
SKIP_DIRS = {
    "tests", "test", "testing", "_vendor", "vendor", "vendored", "externals", "_externals",
    "extern", "_lib_vendored", "benchmarks", "examples", "docs", "__pycache__",
    "_distutils", "blib2to3",  # copies of standard-library code
}

PERMISSIVE = re.compile(r"\b(MIT|BSD|Apache)\b", re.IGNORECASE)
COPYLEFT = re.compile(r"GPL|General Public|MPL|Mozilla", re.IGNORECASE)
MAX_CODE_LINES = 60
MAX_CODE_CHARS = 1600
HELDOUT_PAIRS = 3000
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])|(?<=[.!?])$")
_SKIP_QUERY_START = ("..", ":", "deprecated", "todo", "see ", "alias", "same as", "#", ">>>",
                     "parameters", "returns", "-", "=", "*", "note", "copied from")


def _norm_name(spec: str) -> str:
    return re.split(r"[=<>!~\[]", spec, maxsplit=1)[0].strip().lower().replace("_", "-")


def install(work: Path, packages: list[str]) -> Path:
    """pip install the pinned list (no dependencies) into ``work/site``."""
    site = work / "site"
    site.mkdir(parents=True, exist_ok=True)
    installed = {(_norm_name(n), v) for n, v in
                 (d.name.removesuffix(".dist-info").rsplit("-", 1) for d in site.glob("*.dist-info"))}
    failed: list[str] = []
    for spec in packages:  # one at a time: a pin already there is kept, a failing one is named
        name, version = _norm_name(spec), spec.split("==", 1)[1]
        if (name, version) in installed:
            continue
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
               "--only-binary=:all:", "--upgrade", "--target", str(site), spec]
        if subprocess.run(cmd, check=False).returncode:
            failed.append(spec)
    if failed:
        raise SystemExit(f"pip could not install {', '.join(failed)}")
    return site


def _licence(meta: dict[str, list[str]]) -> str:
    """The declared licence: License-Expression, else OSI classifiers, else License's first line."""
    if meta.get("license-expression"):
        return meta["license-expression"][0].strip()
    classifiers = [c.split("::")[-1].strip() for c in meta.get("classifier", [])
                   if c.startswith("License ::") and c.split("::")[-1].strip() != "OSI Approved"]
    if classifiers:
        return " / ".join(sorted(set(classifiers)))
    text = (meta.get("license") or [""])[0].strip()
    return text.splitlines()[0][:80] if text else "UNKNOWN"


def read_packages(site: Path, packages: list[str]) -> list[dict[str, object]]:
    """Name, version, licence and top-level folders of each pinned package, in the list's order."""
    dists = {}
    for info in sorted(site.glob("*.dist-info")):
        fields: dict[str, list[str]] = {}
        msg = Parser().parsestr((info / "METADATA").read_text(encoding="utf-8", errors="replace"))
        for key, value in msg.items():
            fields.setdefault(key.lower(), []).append(str(value))
        name = fields["name"][0]
        tops: list[str] = []
        record = info / "RECORD"
        if record.is_file():
            for line in record.read_text(encoding="utf-8").splitlines():
                top = line.split(",", 1)[0].split("/", 1)[0]
                if top.startswith(".") or top in ("bin", "share"):  # scripts and data installed outside
                    continue
                if top.endswith(".py") or (site / top).is_dir():
                    if not top.endswith((".dist-info", ".data", "__pycache__")) and top not in tops:
                        tops.append(top)
        dists[_norm_name(name)] = {"name": name, "version": fields["version"][0],
                                   "licence": _licence(fields), "top_level": sorted(tops)}
    out = []
    for spec in packages:
        dist = dists.get(_norm_name(spec))
        if dist is None:
            raise SystemExit(f"{spec} is not installed in {site}")
        if not PERMISSIVE.search(str(dist["licence"])) or COPYLEFT.search(str(dist["licence"])):
            raise SystemExit(f"{spec}: licence {dist['licence']!r} is not MIT, BSD or Apache")
        if _norm_name(spec) in EXCLUDED:
            raise SystemExit(f"{spec} is excluded: {EXCLUDED[_norm_name(spec)]}")
        out.append(dist)
    return out


def first_sentence(doc: str) -> str | None:
    """The docstring's first sentence, one line, or None when it makes a poor question."""
    para = doc.strip().split("\n\n", 1)[0]
    text = " ".join(para.split())
    if not text:
        return None
    parts = _SENTENCE_END.split(text, maxsplit=1)
    sentence = parts[0].strip()
    words = sentence.split()
    if not 3 <= len(words) <= 64 or len(sentence) > 400:
        return None
    if sentence.lower().startswith(_SKIP_QUERY_START):
        return None
    if not re.search(r"[A-Za-z]{3,}", sentence):
        return None
    return sentence


def _code_without_docstring(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    doc_node = node.body[0]
    start, end = node.lineno - 1, node.end_lineno or node.lineno
    d0, d1 = doc_node.lineno - 1, doc_node.end_lineno or doc_node.lineno
    kept = lines[start:d0] + lines[d1:end]
    body = [ln for ln in lines[d1:end] if ln.strip() and not ln.strip().startswith("#")]
    if len(body) < 2:  # `pass`, `raise NotImplementedError`, one-line returns
        return None
    code = textwrap.dedent("\n".join(kept[:MAX_CODE_LINES])).strip("\n")
    if len(code) > MAX_CODE_CHARS:
        code = code[:MAX_CODE_CHARS].rsplit("\n", 1)[0]
    return code


def mine_file(path: Path) -> list[tuple[str, str, int]]:
    """(question, code, line) for each documented function or method in one file."""
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return []
    lines = source.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.startswith("test"):
            continue
        doc = ast.get_docstring(node, clean=True)
        if not doc:
            continue
        question = first_sentence(doc)
        if question is None:
            continue
        code = _code_without_docstring(lines, node)
        if code:
            out.append((question, code, node.lineno))
    out.sort(key=lambda t: t[2])  # ast.walk is breadth-first; line order is stabler to read
    return out


def package_files(site: Path, dist: dict[str, object]) -> list[Path]:
    files: list[Path] = []
    for top in dist["top_level"]:  # type: ignore[attr-defined]
        root = site / str(top)
        if str(top) in SKIP_DIRS:
            continue
        if root.is_file() and root.suffix == ".py":
            files.append(root)
            continue
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(site).parts
            if any(part in SKIP_DIRS or part.startswith("test_") for part in rel[:-1]):
                continue
            if rel[-1].startswith(("test_", "conftest")) or rel[-1].endswith("_test.py"):
                continue
            files.append(path)
    return files


def _code_key(code: str) -> str:
    return hashlib.sha1(" ".join(code.split()).encode()).hexdigest()


def mine(site: Path, dists: list[dict[str, object]], seed: int) -> tuple[list[dict], list[dict], dict]:
    by_file: dict[str, list[dict]] = {}
    seen_code: set[str] = set()
    seen_query: set[str] = set()
    per_package: dict[str, int] = {}
    dropped = {"duplicate_code": 0, "duplicate_question": 0}
    for dist in dists:
        count = 0
        for path in package_files(site, dist):
            rel = path.relative_to(site).as_posix()
            for question, code, line in mine_file(path):
                key = _code_key(code)
                qkey = question.lower()
                if key in seen_code:
                    dropped["duplicate_code"] += 1
                    continue
                if qkey in seen_query:
                    dropped["duplicate_question"] += 1
                    continue
                seen_code.add(key)
                seen_query.add(qkey)
                by_file.setdefault(rel, []).append({"q": question, "c": code, "src": f"{rel}:{line}"})
                count += 1
        per_package[str(dist["name"])] = count
    rng = random.Random(seed)
    files = sorted(by_file)
    rng.shuffle(files)
    heldout: list[dict] = []
    train: list[dict] = []
    for rel in files:
        (heldout if len(heldout) < HELDOUT_PAIRS else train).extend(by_file[rel])
    train.extend(heldout[HELDOUT_PAIRS:])
    heldout = heldout[:HELDOUT_PAIRS]
    rng.shuffle(train)
    stats = {"per_package": per_package, "dropped": dropped, "files_with_pairs": len(files)}
    return train, heldout, stats


def _write_jsonl_xz(path: Path, rows: list[dict]) -> str:
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode()
    path.write_bytes(lzma.compress(data, preset=9))
    return hashlib.sha256(data).hexdigest()


def write_digest_pairs(site: Path, train: list[dict], heldout: list[dict], out: Path, seed: int) -> dict:
    """shapes.py's pairs for the same questions and split; their counts and hashes for the manifest."""
    settings = Settings(home=out, config_path=None)  # the shipped defaults, never a user's config
    d_train = digest_pairs(site, train, settings=settings, sentence_end=_SENTENCE_END, with_genes=True)
    d_held = digest_pairs(site, heldout, settings=settings, sentence_end=_SENTENCE_END, with_genes=False)
    seen: set[str] = set()
    kept: list[dict] = []
    for row in d_train:  # two questions of one gene give two passages (each lacks its own sentence)
        key = _code_key(row["q"] + "\x00" + row["c"])
        if key not in seen:
            seen.add(key)
            kept.append(row)
    random.Random(seed).shuffle(kept)
    out.mkdir(parents=True, exist_ok=True)
    shapes = {s: sum(1 for r in kept if r["shape"] == s) for s in ("span", "gene")}
    return {
        "pair": "the same questions -> the digest Helix embeds (helix_context/ingest/embed_text.py) of the "
                "function's span and, where its gene holds two symbols or more, of the whole gene, with the "
                "question's sentence taken out of the docstring (tools/train_embedder/shapes.py)",
        "train_pairs": len(kept), "train_shapes": shapes, "heldout_pairs": len(d_held),
        "heldout": "span digests of the held-out questions (one passage each)",
        "train_sha256": _write_jsonl_xz(out / "train.jsonl.xz", kept),
        "heldout_sha256": _write_jsonl_xz(out / "heldout.jsonl.xz", d_held),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="scratch folder for the installed packages")
    ap.add_argument("--out", type=Path, required=True, help="folder for the pairs and manifest.json")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--limit", type=int, default=0, help="keep only this many training pairs (smoke tests)")
    ap.add_argument("--more-packages", action="store_true", help="also mine MORE_PACKAGES (after PACKAGES)")
    args = ap.parse_args(argv)
    packages = PACKAGES + MORE_PACKAGES if args.more_packages else PACKAGES
    site = install(args.work, packages)
    dists = read_packages(site, packages)
    train, heldout, stats = mine(site, dists, args.seed)
    if args.limit:
        train = train[: args.limit]
        heldout = heldout[: max(1, min(len(heldout), args.limit // 4))]
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "seed": args.seed,
        "python": sys.version.split()[0],
        "packages": [{k: d[k] for k in ("name", "version", "licence")} | {"pairs": stats["per_package"][str(d["name"])]}
                     for d in dists],
        "excluded": EXCLUDED,
        "skipped_folders": sorted(SKIP_DIRS),
        "pair": "first sentence of a function's docstring -> the function's source without its docstring "
                f"(dedented, at most {MAX_CODE_LINES} lines / {MAX_CODE_CHARS} characters)",
        "dedupe": "whitespace-normalised code and lower-cased question, first occurrence kept",
        "dropped": stats["dropped"],
        "heldout": "whole files, chosen by a seeded shuffle of the file list, until "
                   f"{HELDOUT_PAIRS} pairs",
        "train_pairs": len(train),
        "heldout_pairs": len(heldout),
        "train_sha256": _write_jsonl_xz(args.out / "train.jsonl.xz", train),
        "heldout_sha256": _write_jsonl_xz(args.out / "heldout.jsonl.xz", heldout),
    }
    manifest["digest"] = write_digest_pairs(site, train, heldout, args.out / "digest", args.seed)
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"{len(train)} training pairs, {len(heldout)} held out, from {stats['files_with_pairs']} files; "
          f"dropped {stats['dropped']}")
    for d in manifest["packages"]:
        print(f"  {d['name']} {d['version']} ({d['licence']}): {d['pairs']} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
