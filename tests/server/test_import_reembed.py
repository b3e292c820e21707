"""An import into the genome a running server has open is taken up by that server: vectors and sources.

A teammate's export made with the code-trained model carries that model's vectors; a server on plain MiniLM
never searches them, so the imported genes have no dense evidence until re-embedded. The server re-embeds
another model's vectors at start-up only, and it remembered that none were left, so `helix import` run in
its own process while the server was up left the imported genes without vectors until the next restart.
Now the import marks the genome, the server counts again, answers with the waiting genes' cosines
(retrieve/dense_fill.py) and its housekeeping starts the re-embed (manager.resume_reembed). The sources the
import adds were likewise indexed and watched only from the next start; `helix import` now tells the running
server, which takes them up. Real parts: both shipped models, the `helix import` command in another process,
the server over HTTP, its watcher on the imported source.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from helix_context.config import load_config
from helix_context.genome.store import Genome
from helix_context.portable import export_genome
from tests.stdlib_logging import build_genome, copy_logging

QUESTION = "rotate log files when they reach a certain size"
LEDGER = ('def settle_invoice(ledger, invoice):\n'
          '    """Settle an invoice against the ledger: mark it paid and book the payment."""\n'
          '    ledger[invoice] = "paid"\n    return ledger\n')


def _teammate_export(tmp_path: Path, tree: Path) -> Path:
    """`tree` indexed by a teammate who uses the code-trained model, exported."""
    mate = tmp_path / "mate" / "genome.db"
    build_genome(tree, "code-minilm", genome={"path": str(mate)})
    genome = Genome(mate)
    try:
        assert genome.vector_model.startswith("code-MiniLM")
        out = tmp_path / "mate.hxg"
        export_genome(genome, out)
    finally:
        genome.close()
    return out


def _health(client) -> dict:
    response = client.get("/health")
    assert response.status_code == 200
    return response.json()


def test_helix_import_while_the_server_runs_is_re_embedded_and_answers(server_factory, tmp_path: Path,
                                                                      helix_home: Path) -> None:
    tree = copy_logging(tmp_path / "tree").parent
    exported = _teammate_export(tmp_path, tree)

    server = server_factory(load_config().replace(embedding={"model": "minilm"}, ner={"enabled": False},
                                                  retention={"prune_interval_s": 1.0}))
    helix = server.app.state.helix
    with server.client() as client:
        deadline = time.monotonic() + 120
        while _health(client)["reembed"] is None and time.monotonic() < deadline:  # the model loads at start-up
            time.sleep(0.2)
        assert _health(client)["reembed"]["state"] == "idle"  # an empty genome: nothing of another model

        env = {**os.environ, "HELIX_HOME": str(helix_home)}
        done = subprocess.run([sys.executable, "-m", "helix_context.cli", "import", str(exported),
                               "--remap", f"logging={tree / 'logging'}", "--json"], capture_output=True, text=True, env=env,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        imported = summary["genes"]["new"]
        assert imported > 20 and summary["to_reembed"] == imported and summary["vector_model"] == "all-MiniLM-L6-v2-int8"

        while time.monotonic() < deadline:
            reembed = _health(client)["reembed"]
            if reembed["state"] == "done":
                break
            time.sleep(0.2)
        assert reembed["state"] == "done", reembed
        assert reembed["total"] >= imported - 5 and reembed["done"] == reembed["total"], reembed
        assert not helix.genome.has_stale_vectors()

        hits = client.post("/fingerprint", json={"query": QUESTION, "max_results": 5}).json()["results"]
        assert "RotatingFileHandler" in [h["symbol"] for h in hits[:3]], hits

        # the export's source, added by the import, is indexed and watched by this server now (`helix import`
        # told it), not at its next start: a file written there is answered without a restart
        sources = server.app.state.sources
        assert [s["path"] for s in client.get("/sources").json()["sources"]] == [str(tree / "logging")]
        assert sources.wait_idle(60) and sources.wait_watching(60)
        (tree / "logging" / "ledger.py").write_text(LEDGER, encoding="utf-8")
        found: list = []
        while time.monotonic() < deadline and "settle_invoice" not in found:
            hits = client.post("/fingerprint", json={"query": "settle an invoice against the ledger"}).json()
            found = [h["symbol"] for h in hits["results"][:3]]
            time.sleep(0.2)
        assert "settle_invoice" in found
