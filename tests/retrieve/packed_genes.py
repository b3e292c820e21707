"""Helpers for the tests that rank the functions of one small project by meaning.

Why a neutral folder: a gene is embedded with the name of its file's folder (ingest/embed_text.py), and
pytest names `tmp_path` after the test, so a test's own name would be part of every vector it ranks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from helix_context import HelixContextManager


def neutral_root(tmp_path: Path) -> Path:
    """A folder under `tmp_path` whose name says nothing about the test."""
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    return root


def ingest_files(manager: HelixContextManager, tmp_path: Path, files: Mapping[str, str]) -> Path:
    """Write `files` (name → text) into a neutral folder and ingest it; returns the folder."""
    root = neutral_root(tmp_path)
    for name, text in files.items():
        (root / name).write_text(text)
    manager.ingest_path(root)
    return root


def symbols_sharing_gene(manager: HelixContextManager, name: str) -> int:
    """How many symbols the stored gene holding symbol `name` packs (a packed-gene test shows nothing at 1)."""
    row = manager.genome.conn.execute("SELECT count(*) FROM symbols WHERE gene = "
                                      "(SELECT gene FROM symbols WHERE name = ?)", (name,)).fetchone()
    return int(row[0])
