"""Python's constants on a team genome (schema V_CONSTANTS): one indexed by an older Helix re-parses its
Python files on the next ingest, and a question naming a constant then points at the line that sets it."""

from __future__ import annotations

from pathlib import Path

import psycopg

from helix_context.config import Settings
from helix_context.manager import HelixContextManager

from .conftest import older_team_genome

_SOURCE = "MAX_RETRIES = 5\n\n\ndef fetch(get, url):\n    for _ in range(MAX_RETRIES):\n        if get(url):\n" \
          "            return True\n    return False\n"


def test_an_older_team_genome_gets_its_constants_on_the_next_ingest(settings: Settings, pg_url: str,
                                                                     tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "retry.py").write_text(_SOURCE)
    (tree / "NOTES.md").write_text("# notes\n\nFetching retries a few times.\n")
    chosen = older_team_genome(settings, pg_url, tree, 6)
    helix = HelixContextManager(chosen)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            sizes = {Path(p).name: size for p, size in conn.execute("SELECT path, size FROM files")}
        assert sizes["retry.py"] == -1 and sizes["NOTES.md"] > 0, "only Python files are marked for a re-parse"
        report = helix.ingest_path(tree)
        assert report.files_ingested == 1 and report.genes_added == 0
        top = helix.fingerprint("MAX_RETRIES", max_results=2)[0]
        assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == ("MAX_RETRIES", "constant", 1, 1)
    finally:
        helix.close()
