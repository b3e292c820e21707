"""Projects in the genome (SQL only; the logic is in helix_context/sources/projects.py and retrieve/scope.py).

A mixin of both genomes (SQL both engines take, `?` marks). The one lexical question, which genes
hold a word (`term_rowids`), is each backend's own: FTS5 (fulltext.py) or the postings (pg/store.py).

A gene's project is a column of `genes` (indexed with its tier), so every question can be
answered from one project's genes. Reads here are cached per generation by their callers:
a project's gene ids and its document counts change only when genes do.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np


MAX_PROJECTS_PER_QUERY = 64  # bound variables of one IN (...) list


def _prefix_range(folder: str) -> tuple[str, str]:
    low = folder.rstrip("/\\")
    sep = "\\" if "\\" in low and "/" not in low else "/"
    prefix = low + sep
    return prefix, prefix + "\U0010ffff"


class ProjectsMixin:
    """Needs `conn` and `transaction` from the genome."""

    conn: Any
    transaction: Any

    def live_projects(self) -> dict[str, int]:
        """Live genes per project (genes without a project are left out): a walk of the live genes' index."""
        rows = self.conn.execute(
            "SELECT project, COUNT(*) FROM genes WHERE project IS NOT NULL AND retired_at IS NULL GROUP BY project")
        return {str(p): int(n) for p, n in rows}

    def project_rowids(self, projects: Collection[str]) -> np.ndarray:
        """Sorted rowids of the live genes of `projects`."""
        names = sorted(set(projects))[:MAX_PROJECTS_PER_QUERY]
        if not names:
            return np.zeros(0, np.int64)
        marks = ", ".join("?" * len(names))
        # one string of ids, parsed by numpy: a Python row per gene cost ~1 µs each (96k genes: ~90 ms → ~20 ms)
        row = self.conn.execute(f"SELECT group_concat(id) FROM (SELECT id FROM genes WHERE project IN ({marks}) "
                                "AND retired_at IS NULL ORDER BY id)", names).fetchone()
        if not row or not row[0]:
            return np.zeros(0, np.int64)
        return np.sort(np.fromstring(row[0], dtype=np.int64, sep=","))  # sorted already; group_concat promises no order

    def projects_of(self, rowids: Sequence[int]) -> dict[int, str | None]:
        """rowid → project for the given genes."""
        out: dict[int, str | None] = {}
        ids = list(dict.fromkeys(int(r) for r in rowids))
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ", ".join("?" * len(part))
            for rowid, project in self.conn.execute(f"SELECT id, project FROM genes WHERE id IN ({marks})", part):
                out[int(rowid)] = project
        return out

    def set_project(self, folder: str, project: str) -> int:
        """Give a source folder, its indexed files and their genes `project`; returns the genes relabelled.

        Bookkeeping only (the genes' text is unchanged), but the retriever caches projects' genes
        per generation, so the generation moves when a gene changes project."""
        low, high = _prefix_range(folder)
        stale = self.conn.execute("SELECT COUNT(*) FROM genes WHERE source_path >= ? AND source_path < ? "
                                  "AND (project IS NULL OR project <> ?)", (low, high, project)).fetchone()[0]
        with self.transaction(changes_genes=bool(stale)) as tx:
            tx.execute("UPDATE sources SET project = ? WHERE path = ?", (project, folder))
            tx.execute("UPDATE files SET project = ? WHERE path >= ? AND path < ? AND (project IS NULL OR project <> ?)",
                       (project, low, high, project))
            moved = tx.execute("UPDATE genes SET project = ? WHERE source_path >= ? AND source_path < ? "
                               "AND (project IS NULL OR project <> ?)", (project, low, high, project)).rowcount
        return int(moved)
