"""The standard library's `logging` package as a real tree to index, and a genome built from it with one model.

Why shared: the tests of a model change (re-embed, import of another model's vectors, the tray's progress line)
need real code embedded by one shipped model and opened with the other; `logging` is small (about a hundred
genes: two batches of the re-embed job) and ships with every Python.
"""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path
from typing import Any

from helix_context import HelixContextManager
from helix_context.config import load_config


def copy_logging(folder: Path) -> Path:
    """A copy of `logging` at `folder`/logging (its own folder: no bytecode caches)."""
    root = folder / "logging"
    shutil.copytree(Path(sysconfig.get_paths()["stdlib"]) / "logging", root,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root


def build_genome(tree: Path, model: str, **sections: Any) -> int:
    """Index `tree` with the embedding `model` into the genome `sections` (or HELIX_HOME) name; its live genes."""
    helix = HelixContextManager(load_config().replace(embedding={"model": model}, ner={"enabled": False},
                                                      **sections))
    try:
        helix.ingest_path(tree)
        return helix.genome.live_gene_count()
    finally:
        helix.close()
