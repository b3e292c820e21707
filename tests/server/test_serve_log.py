"""`helix serve` keeps every part's log lines in logs/serve.log, not only the server's own.

Why: modules that log under their import name (`helix_context.ingest.reembed`, the embedder's fallback,
the tagger) were attached to no handler, so their INFO lines went nowhere and their warnings only to
the terminal: a re-embed after a model change, which helix.toml promises "progress in the log", left no
line in serve.log. Real parts: the `helix serve` command in its own process, a genome built with the
code-trained model and served with plain MiniLM, so the server re-embeds it.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from security.procs import env_for, free_port, start, stop, wait_health
from tests.stdlib_logging import build_genome, copy_logging


def test_a_re_embed_after_a_model_change_is_written_to_serve_log(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tree = copy_logging(tmp_path / "tree")
    genes = build_genome(tree, "code-minilm", genome={"path": str(home / "genome.db")})
    port = free_port()
    env = env_for(port, HELIX_HOME=str(home), HELIX_EMBEDDING_ENABLED="1", HELIX_EMBEDDING_MODEL="minilm")
    proc = start(["-m", "helix_context.cli", "serve"], env, tmp_path / "terminal.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_health(url, timeout=120)
        deadline = time.monotonic() + 120
        reembed: dict | None = None
        while time.monotonic() < deadline:
            reembed = httpx.get(url + "/health", timeout=5, trust_env=False).json()["reembed"]
            if reembed and reembed["state"] == "done":
                break
            time.sleep(0.2)
        assert reembed and reembed["state"] == "done" and reembed["done"] == genes, reembed
    finally:
        stop(proc)
    log = (home / "logs" / "serve.log").read_text(encoding="utf-8")
    assert f"re-embedding {genes} genes in the background" in log, log[-3000:]
    assert f"re-embedding for all-MiniLM-L6-v2-int8 done: {genes} genes" in log, log[-3000:]
    # and INFO lines stay out of the terminal, which gets warnings only
    assert "re-embedding" not in (tmp_path / "terminal.log").read_text(encoding="utf-8")
