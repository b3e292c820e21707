"""One index, many projects: is each message answered from its own project's code, and silence when nothing fits?

    python benchmarks/bench_scoping.py [--cache DIR] [--work DIR] [--json OUT] [--tune]

Setup (done by the script; needs the package registry once): `pip download` of the sdists of
flask 3.1.3, requests 2.34.2 and click 8.5.1 into --cache (default: a folder in the temp dir),
unpacked. The genome holds four sources, each a project: `flask`, `requests`, `click` (each
sdist without its docs folder: code, tests, examples) and `docs` (the markdown/rst docs flask
and click ship). Three more genomes hold one project each, for the "one-project" baseline.

Data (benchmarks/data/): scoping_off_topic.jsonl (168 everyday chat messages) and
scoping_on_topic.jsonl (64 questions with their answer files, spread over the three code
projects), both written by hand; every third line is held out (never tuned on). Every figure
is printed for the development part and the held-out part.

Measured through the real backend over HTTP (uvicorn in a subprocess, its proxy forwarding to
tests/server/upstream_stub.py), twice in the same run:

* with scoping and silence on (the defaults): chats sent without a project (evidence decides)
  and with `X-Helix-Project`; /fingerprint with and without `project`;
* with both off ([retrieval] silence = false, scope_by_evidence = false, no project sent): the
  behaviour before.

Printed: share of off-topic chats that got context injected (target <= 3 %), share of on-topic
chats that did (target >= 95 %), answer file in the top 5 files of /fingerprint (target: within
0.03 of the one-project genome), and contamination = share of top-5 files from another project
than the one asked about (target 0 % scoped, <= 5 % unscoped). The unscoped ranking figures are
also printed for the development and held-out parts, and every unscoped question whose answer
file is missing or whose top 5 holds another project's file is listed with its top 5.

`--tune` prints the silence features of the development parts (in-process) and the rule
thresholds that a grid search over them chooses (weigh/silence.py's SilenceRule).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from _results import write_results  # noqa: E402
from bench_server import free_port, start_stub, stop, wait_healthy  # noqa: E402

PACKAGES = {"flask": "flask==3.1.3", "requests": "requests==2.34.2", "click": "click==8.5.1"}
DATA = HERE / "data"
CHAT_MODEL = "llama3.1:8b"
SERVER_SCRIPT = """
import sys, uvicorn
from helix_context.server import factory
app = factory.create_app()
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


def load(name: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if "_about" not in r]


# ── corpus ──


def fetch(cache: Path) -> dict[str, Path]:
    """The three sdists, unpacked under `cache` (downloaded once from the registry)."""
    cache.mkdir(parents=True, exist_ok=True)
    trees: dict[str, Path] = {}
    for name, spec in PACKAGES.items():
        version = spec.split("==")[1]
        tree = cache / f"{name}-{version}"
        if not tree.is_dir():
            archive = cache / f"{name}-{version}.tar.gz"
            if not archive.exists():
                print(f"  downloading {spec} (sdist) into {cache}", flush=True)
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q",
                                spec, "-d", str(cache)], check=True)
            with tarfile.open(archive) as tar:
                tar.extractall(cache, filter="data")
        trees[name] = tree
    return trees


def layout(trees: dict[str, Path], work: Path) -> dict[str, Path]:
    """project → folder: each sdist without docs, and one docs folder with flask's and click's docs."""
    folders: dict[str, Path] = {}
    root = work / "projects"
    for name, tree in trees.items():
        dest = root / name
        if not dest.exists():
            shutil.copytree(tree, dest, ignore=shutil.ignore_patterns("docs", "*.lock", "PKG-INFO"))
        folders[name] = dest
    docs = root / "docs"
    for name, tree in trees.items():
        if (tree / "docs").is_dir() and not (docs / name).exists():
            shutil.copytree(tree / "docs", docs / name)
    folders["docs"] = docs
    return folders


def build(home: Path, folders: dict[str, Path]) -> dict[str, Any]:
    """A genome with these folders as sources (each its own project), ingested with embeddings."""
    marker = home / "built.json"
    if marker.exists():
        return json.loads(marker.read_text())
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml")}
    script = ("import json, sys\n"
              "from helix_context.config import load_config\n"
              "from helix_context.manager import HelixContextManager\n"
              "from helix_context.sources import registry\n"
              "helix = HelixContextManager(load_config())\n"
              "for folder in sys.argv[1:]:\n"
              "    row = registry.record_add(helix.genome, folder, None)\n"
              "    helix.ingest_path(folder, project=row.project)\n"
              "print(json.dumps(helix.genome.stats()['total_genes']))\n"
              "helix.close()\n")
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", script, *map(str, folders.values())], env=env, check=True,
                         capture_output=True, text=True, cwd=str(REPO))
    info = {"genes": int(out.stdout.strip().splitlines()[-1]), "seconds": round(time.perf_counter() - started, 1)}
    marker.write_text(json.dumps(info))
    return info


# ── measuring over HTTP ──


def start_server(home: Path, upstream: str, log_path: Path, extra: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml"),
           "HELIX_PROXY_UPSTREAM_URL": upstream, "HELIX_PROXY_UPSTREAM_KIND": "openai",
           "HELIX_SOURCES_WATCH": "0", "PYTHONPATH": str(REPO), **extra}
    env.pop("HELIX_API_KEY", None)
    log = open(log_path, "wb")
    proc = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT, str(port)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, cwd=str(REPO))
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 180, log_path)
    with httpx.Client(base_url=url, timeout=600) as client:  # the start-up pass over the sources settles
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and client.get("/sources").json().get("indexing"):
            time.sleep(0.5)
        client.post("/context", json={"query": "warm up the models"})
    return proc, url


def chat(client: httpx.Client, text: str, project: str | None) -> bool:
    """True when the proxy injected context (its X-Helix-Context header)."""
    headers = {"X-Helix-Project": project} if project else {}
    r = client.post("/v1/chat/completions", headers=headers,
                    json={"model": CHAT_MODEL, "messages": [{"role": "user", "content": text}]})
    r.raise_for_status()
    return r.headers.get("x-helix-context", "none") != "none"


def top_files(client: httpx.Client, question: str, project: str | None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"query": question, "max_results": 5, "group_by": "file"}
    if project:
        body["project"] = project
    r = client.post("/fingerprint", json=body)
    r.raise_for_status()
    return list(r.json()["results"])[:5]


def hit(files: list[dict[str, Any]], root: Path, answers: list[str]) -> bool:
    wanted = {str(root / a) for a in answers}
    return any(f["source_id"] in wanted for f in files)


def share(values: list[bool]) -> float:
    return sum(values) / len(values) if values else float("nan")


def run_config(url: str, off: list[dict], on: list[dict], folders: dict[str, Path], scoped_too: bool) -> dict:
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=120) as client:
        for split in ("dev", "heldout"):
            out[f"off_injected_{split}"] = share([chat(client, m["text"], None) for m in off if m["split"] == split])
            out[f"on_injected_{split}"] = share([chat(client, q["question"], None) for q in on if q["split"] == split])
        if scoped_too:
            names = list(PACKAGES)
            out["off_injected_scoped"] = share([chat(client, m["text"], names[i % len(names)])
                                                for i, m in enumerate(off)])
            out["on_injected_scoped"] = share([chat(client, q["question"], q["project"]) for q in on])
        modes = [None, "scoped"] if scoped_too else [None]
        for mode in modes:
            key = "scoped" if mode else "unscoped"
            per: list[tuple[str, bool, int, int]] = []  # (split, hit, foreign files, files shown)
            for q in on:
                files = top_files(client, q["question"], q["project"] if mode else None)
                foreign = sum(1 for f in files if f.get("project") != q["project"])
                per.append((q["split"], hit(files, folders[q["project"]], q["answers"]), foreign, len(files)))
                if foreign or not per[-1][1]:
                    out.setdefault(f"misses_{key}", []).append(
                        {"id": q["id"], "split": q["split"], "project": q["project"], "hit": per[-1][1],
                         "top5": [f"{f.get('project')}:{Path(f['source_id']).name}" for f in files]})
            for split in ("all", "dev", "heldout"):
                part = [p for p in per if split in ("all", p[0])]
                suffix = "" if split == "all" else f"_{split}"
                out[f"top5_{key}{suffix}"] = share([p[1] for p in part])
                shown = sum(p[3] for p in part)
                out[f"contamination_{key}{suffix}"] = sum(p[2] for p in part) / shown if shown else float("nan")
    return out


def one_project_top5(work: Path, folders: dict[str, Path], on: list[dict]) -> float:
    """Answer file in the top 5 when the genome holds only the question's project (in-process)."""
    hits = []
    for name in PACKAGES:
        home = work / f"one_{name}"
        build(home, {name: folders[name]})
        script = ("import json, sys\n"
                  "from helix_context.config import load_config\n"
                  "from helix_context.manager import HelixContextManager\n"
                  "helix = HelixContextManager(load_config())\n"
                  "out = []\n"
                  "for q in json.loads(sys.stdin.read()):\n"
                  "    out.append([f['source_id'] for f in helix.fingerprint(q, 5, group_by='file')][:5])\n"
                  "print(json.dumps(out))\n"
                  "helix.close()\n")
        qs = [q for q in on if q["project"] == name]
        env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml")}
        res = subprocess.run([sys.executable, "-c", script], input=json.dumps([q["question"] for q in qs]),
                             env=env, capture_output=True, text=True, check=True, cwd=str(REPO))
        for q, files in zip(qs, json.loads(res.stdout.strip().splitlines()[-1]), strict=True):
            hits.append(hit([{"source_id": f} for f in files], folders[name], q["answers"]))
    return share(hits)


# ── tuning (development parts only) ──


def features(home: Path, texts: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    script = ("import json, sys, dataclasses\n"
              "from helix_context.config import load_config\n"
              "from helix_context.manager import HelixContextManager\n"
              "helix = HelixContextManager(load_config())\n"
              "out = []\n"
              "for text, project in json.loads(sys.stdin.read()):\n"
              "    r = helix.retriever.retrieve(text, project=helix.scope(project))\n"
              "    out.append({'features': r.silence_features, 'silence': r.silence, 'items': len(r.items)})\n"
              "print(json.dumps(out))\n"
              "helix.close()\n")
    env = {**os.environ, "HELIX_HOME": str(home), "HELIX_CONFIG": str(REPO / "helix.toml")}
    res = subprocess.run([sys.executable, "-c", script], input=json.dumps(texts), env=env, capture_output=True,
                         text=True, check=True, cwd=str(REPO))
    return list(json.loads(res.stdout.strip().splitlines()[-1]))


def tune(home: Path, off: list[dict], on: list[dict]) -> dict[str, Any]:
    from helix_context.weigh.silence import SilenceFeatures, SilenceRule, judge

    dev_off = [(m["text"], None) for m in off if m["split"] == "dev"]
    dev_on = [(q["question"], None) for q in on if q["split"] == "dev"]
    dev_on += [(q["question"], q["project"]) for q in on if q["split"] == "dev"]
    rows_off = features(home, dev_off)
    rows_on = features(home, dev_on)

    def feats(rows: list[dict]) -> list[SilenceFeatures | None]:
        return [SilenceFeatures(**r["features"]) if r["features"] else None for r in rows]

    f_off, f_on = feats(rows_off), feats(rows_on)
    for (text, _), r in zip(dev_off, rows_off, strict=True):
        print(f"  off  {json.dumps(r['features'])}  {text[:50]}")
    for (text, p), r in zip(dev_on, rows_on, strict=True):
        print(f"  on   {json.dumps(r['features'])}  [{p}] {text[:50]}")
    grid = {"dense_alone": [0.48, 0.5, 0.52, 0.55, 0.6], "dense_floor": [0.3, 0.35, 0.4, 0.45],
            "best_share": [0.4, 0.5, 0.6, 0.7], "held_share": [0.5, 0.6, 0.63, 0.7, 0.8], "gap": [0.25, 0.3, 0.35, 9.0]}
    best: tuple[float, dict[str, float]] | None = None
    for values in itertools.product(*grid.values()):
        rule = SilenceRule(**dict(zip(grid, values, strict=True)))
        spoke_off = share([f is not None and not judge(f, rule).silent for f in f_off])
        spoke_on = share([f is not None and not judge(f, rule).silent for f in f_on])
        score = spoke_on - 3 * spoke_off  # an off-topic injection costs three on-topic misses
        if best is None or score > best[0]:
            best = (score, {**dict(zip(grid, values, strict=True)), "off": spoke_off, "on": spoke_on})
    assert best is not None
    print(f"  chosen on the development parts: {best[1]}")
    return best[1]


# ── main ──


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "helix-bench-scoping-pkgs")
    parser.add_argument("--work", type=Path, help="keep the genomes here and reuse them (default: a temp dir)")
    parser.add_argument("--json")
    parser.add_argument("--tune", action="store_true", help="print the silence features and a tuned rule (dev only)")
    args = parser.parse_args()
    off, on = load("scoping_off_topic.jsonl"), load("scoping_on_topic.jsonl")
    work = args.work or Path(tempfile.mkdtemp(prefix="helix-bench-scoping-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"bench_scoping: {len(off)} off-topic messages, {len(on)} on-topic questions; work folder {work}", flush=True)
    folders = layout(fetch(args.cache), work)
    multi = work / "multi"
    info = build(multi, folders)
    print(f"  genome of 4 projects: {info['genes']} genes ({info['seconds']} s to ingest)", flush=True)
    if args.tune:
        tune(multi, off, on)
        return 0

    results: dict[str, Any] = {"genes": info["genes"]}
    stub, upstream = start_stub("openai")
    try:
        for label, extra in (("on", {}), ("off", {"HELIX_RETRIEVAL_SILENCE": "0",
                                                  "HELIX_RETRIEVAL_SCOPE_BY_EVIDENCE": "0"})):
            started = time.perf_counter()
            proc, url = start_server(multi, upstream, work / f"server_{label}.log", extra)
            try:
                results[label] = run_config(url, off, on, folders, scoped_too=label == "on")
            finally:
                stop(proc)
            print(f"  measured with scoping and silence {label} ({time.perf_counter() - started:.0f} s)", flush=True)
    finally:
        stop(stub)
    results["one_project_top5"] = one_project_top5(work, folders, on)

    on_, off_ = results["on"], results["off"]

    def pct(x: float) -> str:
        return f"{100 * x:5.1f} %"

    print("\n| figure | with scoping + silence | without (before) | target |")
    print("|---|---|---|---|")
    for split in ("dev", "heldout"):
        print(f"| off-topic chats injected ({split}) | {pct(on_[f'off_injected_{split}'])} | "
              f"{pct(off_[f'off_injected_{split}'])} | <= 3 % |")
    print(f"| off-topic chats injected (X-Helix-Project set) | {pct(on_['off_injected_scoped'])} | – | <= 3 % |")
    for split in ("dev", "heldout"):
        print(f"| on-topic chats injected ({split}) | {pct(on_[f'on_injected_{split}'])} | "
              f"{pct(off_[f'on_injected_{split}'])} | >= 95 % |")
    print(f"| on-topic chats injected (X-Helix-Project set) | {pct(on_['on_injected_scoped'])} | – | >= 95 % |")
    one = results["one_project_top5"]
    print(f"| answer file in top 5, unscoped (one-project genome: {one:.3f}) | {on_['top5_unscoped']:.3f} | "
          f"{off_['top5_unscoped']:.3f} | >= {one - 0.03:.3f} |")
    for split in ("dev", "heldout"):
        print(f"| answer file in top 5, unscoped ({split}) | {on_[f'top5_unscoped_{split}']:.3f} | "
              f"{off_[f'top5_unscoped_{split}']:.3f} | |")
    print(f"| answer file in top 5, scoped | {on_['top5_scoped']:.3f} | – | >= {one - 0.03:.3f} |")
    print(f"| contamination of top 5, unscoped | {pct(on_['contamination_unscoped'])} | "
          f"{pct(off_['contamination_unscoped'])} | <= 5 % |")
    for split in ("dev", "heldout"):
        print(f"| contamination of top 5, unscoped ({split}) | {pct(on_[f'contamination_unscoped_{split}'])} | "
              f"{pct(off_[f'contamination_unscoped_{split}'])} | |")
    print(f"| contamination of top 5, scoped | {pct(on_['contamination_scoped'])} | – | 0 % |")
    for miss in on_.get("misses_unscoped", []):
        print(f"  unscoped, answer missed or another project shown: {miss['id']} ({miss['split']}, "
              f"{miss['project']}): {', '.join(miss['top5'])}")
    if args.json:
        write_results(args.json, results)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
