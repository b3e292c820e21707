"""benchmarks/monitor.py and benchmarks/compare_ab.py, run as the scripts they are.

The monitor watches a tiny Ollama stand-in (a real HTTP server serving the
/api/ps wire format), real child processes and a real genome file.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from helix_context.genome.store import Genome
from helix_context.models import Gene, Provenance

REPO = Path(__file__).resolve().parent.parent
MONITOR = REPO / "benchmarks" / "monitor.py"
COMPARE = REPO / "benchmarks" / "compare_ab.py"
FAST = ["--interval", "0.1", "--ollama-interval", "0.1"]


def ps_model(name: str, vram_gib: float) -> dict:
    """One entry of Ollama's GET /api/ps answer, as Ollama writes it."""
    size = int(vram_gib * 2**30)
    return {
        "name": name, "model": name, "size": size, "size_vram": size,
        "digest": hashlib.sha256(name.encode()).hexdigest(),
        "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                    "parameter_size": "8.0B", "quantization_level": "Q4_K_M"},
        "expires_at": "2030-01-01T00:05:00.000000000Z", "context_length": 8192,
    }


class FakeOllama:
    """A real HTTP server on 127.0.0.1 answering GET /api/ps with whatever `models` holds now."""

    def __init__(self) -> None:
        self.models: list[dict] = []
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests += 1
                if self.path != "/api/ps":
                    self.send_error(404)
                    return
                body = json.dumps({"models": list(owner.models)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def ollama():
    server = FakeOllama()
    yield server
    server.close()


def monitor(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(MONITOR), *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


WRITER = """
import sys, time
out = sys.argv[1]
for i in range({lines}):
    with open(out, "a") as f:
        f.write('{{"i": %d}}\\n' % i)
    time.sleep({pause})
"""


# ── monitor ──


def test_clean_run_exits_0(tmp_path: Path, ollama: FakeOllama) -> None:
    ollama.models = [ps_model("llama3.1:8b", 5.2), ps_model("nomic-embed-text:latest", 0.3)]
    results = tmp_path / "results.jsonl"
    report = tmp_path / "report.json"
    proc = monitor("--results", str(results), "--hang-after", "5", "--ollama", ollama.url, "--target", "llama3.1:8b",
                   "--allow", "nomic-embed-text", "--on-problem", "abort", "--report", str(report), *FAST, "--",
                   *child(WRITER.format(lines=5, pause=0.1)), str(results))
    assert proc.returncode == 0, proc.stderr
    assert "clean run" in proc.stderr
    assert len(results.read_text().splitlines()) == 5
    data = json.loads(report.read_text())
    assert data["events"] == [] and data["child_exit"] == 0 and not data["aborted"]
    assert ollama.requests >= 2  # checked before the start and during the run


def test_a_failing_command_is_exit_1(tmp_path: Path) -> None:
    proc = monitor(*FAST, "--", *child("raise SystemExit(7)"))
    assert proc.returncode == 1
    assert "exit 7" in proc.stderr


def test_hung_run_is_aborted_and_its_whole_tree_killed(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    pids = tmp_path / "pids.txt"
    code = f"""
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open({str(pids)!r}, "w").write(f"{{grandchild.pid}}\\n")
with open({str(results)!r}, "a") as f:
    f.write('{{"warmup": 1}}\\n')
time.sleep(120)  # stops writing: hung
"""
    started = time.monotonic()
    proc = monitor("--results", str(results), "--hang-after", "1", "--on-problem", "abort", *FAST, "--", *child(code))
    elapsed = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    assert "hung" in proc.stderr and "has not grown" in proc.stderr and "aborted" in proc.stderr
    assert elapsed < 30
    grandchild = int(pids.read_text().strip())
    deadline = time.monotonic() + 5
    while psutil.pid_exists(grandchild) and psutil.Process(grandchild).status() != psutil.STATUS_ZOMBIE \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE


def test_hung_run_in_warn_mode_finishes_and_reports(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    code = f"""
import time
open({str(results)!r}, "w").write("start\\n")
time.sleep(1.5)
"""
    proc = monitor("--results", str(results), "--hang-after", "0.5", "--on-problem", "warn", *FAST, "--", *child(code))
    assert proc.returncode == 3, proc.stderr
    assert "WARNING: hung" in proc.stderr and "finished with warnings" in proc.stderr


def test_dual_load_aborts_before_the_run_starts(tmp_path: Path, ollama: FakeOllama) -> None:
    ollama.models = [ps_model("llama3.1:8b", 5.2), ps_model("qwen2.5:14b", 9.1)]
    marker = tmp_path / "started"
    proc = monitor("--ollama", ollama.url, "--target", "llama3.1:8b", "--allow", "nomic-embed-text",
                   "--on-problem", "abort", *FAST, "--", *child(f"open({str(marker)!r}, 'w').write('x')"))
    assert proc.returncode == 4, proc.stderr
    assert "qwen2.5:14b" in proc.stderr and "9.1 GiB" in proc.stderr and "beside llama3.1:8b" in proc.stderr
    assert not marker.exists()


def test_dual_load_appearing_during_the_run(tmp_path: Path, ollama: FakeOllama) -> None:
    ollama.models = [ps_model("llama3.1:8b", 5.2)]
    results = tmp_path / "results.jsonl"
    threading.Timer(0.8, lambda: ollama.models.append(ps_model("mistral:7b", 4.4))).start()
    proc = monitor("--results", str(results), "--ollama", ollama.url, "--target", "llama3.1", "--on-problem", "warn",
                   *FAST, "--", *child(WRITER.format(lines=20, pause=0.1)), str(results))
    assert proc.returncode == 4, proc.stderr
    assert "WARNING: dual-load: mistral:7b" in proc.stderr
    assert len(results.read_text().splitlines()) == 20  # warn: the run went on to the end


def test_ollama_down_is_not_a_problem(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    proc = monitor("--ollama", f"http://127.0.0.1:{port}", "--target", "llama3", "--on-problem", "abort",
                   *FAST, "--", *child("pass"))
    assert proc.returncode == 0, proc.stderr
    assert "cannot read" in proc.stderr


def test_genome_written_during_the_run_is_contamination(tmp_path: Path) -> None:
    path = tmp_path / "genome.db"
    Genome(path).close()
    results = tmp_path / "results.jsonl"
    writer = f"""
import sys, time
sys.path.insert(0, {str(REPO)!r})
from helix_context.genome.store import Genome
from helix_context.models import Gene
time.sleep(0.5)
g = Genome({str(path)!r})
g.replace_source(None, "/intruder.py", [(Gene("f" * 32, "x = 1", "code", "python", "/intruder.py", None, 1, 1), None)])
g.close()
"""
    thread_proc: list[subprocess.Popen] = []

    def intrude() -> None:
        thread_proc.append(subprocess.Popen([sys.executable, "-c", writer]))

    intrude()
    proc = monitor("--results", str(results), "--genome", str(path), "--on-problem", "abort", "--hang-after", "30",
                   *FAST, "--", *child(WRITER.format(lines=100, pause=0.1)), str(results))
    thread_proc[0].wait(timeout=30)
    assert proc.returncode == 5, proc.stderr
    assert "ABORT: contamination" in proc.stderr and f"genome {path} changed during the run" in proc.stderr
    assert len(results.read_text().splitlines()) < 100  # aborted before the end


def load_monitor():
    import importlib.util

    if str(MONITOR.parent) not in sys.path:  # the benchmarks import their own helpers (_checkout)
        sys.path.insert(0, str(MONITOR.parent))
    spec = importlib.util.spec_from_file_location("helix_bench_monitor", MONITOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_genome_watch_sees_commits_not_readers(tmp_path: Path) -> None:
    path = tmp_path / "genome.db"
    Genome(path).close()
    watch = load_monitor().GenomeWatch(path)
    try:
        reader = Genome(path)  # another process opening the genome (creates the -wal) is not a write
        reader.stats()
        assert watch.changes() == []
        reader.replace_source(None, "/w.py", [(Gene("e" * 32, "z = 3", "code", None, "/w.py", None, 1, 1), None)])
        changed = " ".join(watch.changes())
        assert "generation 0 -> 1" in changed and "data_version" in changed
        reader.close()
    finally:
        watch.close()


def test_dual_load_rules() -> None:
    m = load_monitor()
    r = [m.Resident("llama3.1:8b", 1, 1), m.Resident("nomic-embed-text:latest", 1, 1), m.Resident("qwen2.5:7b", 1, 1)]
    assert [x.name for x in m.dual_load(r, "llama3.1:8b", ["nomic-embed-text"])] == ["qwen2.5:7b"]
    assert m.dual_load(r, "phi3", []) == []  # the target is not loaded: nothing sits beside it
    assert [x.name for x in m.dual_load(r, None, ["llama3.1", "qwen2.5:7b"])] == ["nomic-embed-text:latest"]
    assert m.model_matches("llama3", "llama3:latest") and not m.model_matches("llama3:70b", "llama3:8b")


def test_untouched_genome_is_clean(tmp_path: Path) -> None:
    path = tmp_path / "genome.db"
    g = Genome(path)
    g.replace_source(None, "/a.py", [(Gene("a" * 32, "y = 2", "code", "python", "/a.py", None, 1, 1,
                                           provenance=Provenance(observed_at=1, last_verified_at=1)), None)])
    g.close()
    reader = f"""
import sqlite3
conn = sqlite3.connect({str(path)!r})
print(conn.execute("SELECT COUNT(*) FROM genes").fetchone()[0])
"""
    proc = monitor("--genome", str(path), "--on-problem", "abort", *FAST, "--", *child(reader))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1"  # the child's output passes through


def test_monitor_needs_a_command() -> None:
    proc = monitor("--results", "x")
    assert proc.returncode == 2
    assert "give the command" in proc.stderr


# ── compare_ab ──


def compare(tmp_path: Path, a: dict, b: dict, *args: str) -> subprocess.CompletedProcess:
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    return subprocess.run([sys.executable, str(COMPARE), str(pa), str(pb), *args], capture_output=True, text=True,
                          timeout=30)


BASE = {
    "retrieval": {"helix": {"ndcg@10": 0.700, "recall@100": 0.900, "mrr@10": 0.650},
                  "latency": {"p50_ms": 10.0, "p95_ms": 25.0}},
    "ingest": {"mb_per_s": 4.0, "seconds": 12.0},
    "needle": {"landed": 18, "critical_keep_rate": 0.97},
    "genes": 5123,
    "runs": [{"seconds": 1.5}],
    "ok": True,
}


def tweak(**changes: float) -> dict:
    data = json.loads(json.dumps(BASE))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for p in parents:
            node = node[p]
        node[last] = value
    return data


def test_compare_ship(tmp_path: Path) -> None:
    b = tweak(retrieval__helix__ndcg_at_10=0.0)  # a key only in B is listed, not judged
    b["retrieval"]["helix"]["ndcg@10"] = 0.730  # +4.3 %
    b["retrieval"]["latency"]["p95_ms"] = 22.0  # lower latency is better
    proc = compare(tmp_path, BASE, b)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SHIP" in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("retrieval.helix.ndcg@10"))
    assert "+4.29%" in line and "higher" in line and "better" in line
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("retrieval.latency.p95_ms"))
    assert "-12.00%" in line and "lower" in line and "better" in line
    assert "only in B: retrieval.helix.ndcg_at_10" in proc.stdout
    assert "(info)" in next(ln for ln in proc.stdout.splitlines() if ln.startswith("genes"))


def test_compare_no_gain(tmp_path: Path) -> None:
    b = tweak(genes=9999)  # no known direction: informational only
    b["retrieval"]["helix"]["ndcg@10"] = 0.7035  # +0.5 %: within the default 1 % threshold
    proc = compare(tmp_path, BASE, b)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "NO GAIN" in proc.stdout
    # the same change with a tighter threshold ships
    assert compare(tmp_path, BASE, b, "--threshold", "0.1").returncode == 0


def test_compare_regression(tmp_path: Path) -> None:
    b = tweak()
    b["retrieval"]["helix"]["ndcg@10"] = 0.80  # better …
    b["ingest"]["seconds"] = 15.0  # … but slower: +25 % seconds
    proc = compare(tmp_path, BASE, b, "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    worse = [r["key"] for r in result["rows"] if r["verdict"] == "worse"]
    assert worse == ["ingest.seconds"] and result["decision"] == "regression"


def test_compare_explicit_directions_win(tmp_path: Path) -> None:
    b = tweak(genes=6000)
    proc = compare(tmp_path, BASE, b, "--higher-better", "genes")
    assert proc.returncode == 0, proc.stdout
    proc = compare(tmp_path, BASE, b, "--lower-better", "genes,foo")
    assert proc.returncode == 3, proc.stdout
    b = tweak()
    b["needle"]["critical_keep_rate"] = 0.90
    assert compare(tmp_path, BASE, b).returncode == 3  # keep_rate: higher is better
    assert compare(tmp_path, BASE, b, "--lower-better", "needle.*rate").returncode == 0


def test_compare_bad_input_is_exit_1(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    proc = subprocess.run([sys.executable, str(COMPARE), str(tmp_path / "bad.json"), str(tmp_path / "missing.json")],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and "not JSON" in proc.stderr
