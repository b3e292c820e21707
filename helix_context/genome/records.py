"""Plain records the store takes and gives: a file's record, one file's write, its result, a gene row.

Why their own module: ingest, the watcher and export build and read these without needing the
store's connection machinery, and the store stays about SQLite.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from helix_context.genome.stored_form import StoredForm, unpack_text
from helix_context.models import Gene, Provenance


@dataclass(frozen=True)
class FileRecord:
    path: str
    project: str | None
    size: int
    mtime_ns: int
    content_hash: str
    genes: int = 0
    ingested_at: float = 0.0

    def stat_matches(self, size: int, mtime_ns: int) -> bool:
        """"Has this file changed?" without reading it: the size and modification time recorded at
        ingest are the file's now. The one place ingest, `compact` and the watcher's recheck ask it;
        a mismatch means "read it and compare content_hash", not necessarily "changed"."""
        return self.size == size and self.mtime_ns == mtime_ns


@dataclass
class WriteResult:
    added: int = 0  # new gene rows
    replaced: int = 0  # gene rows of this source deleted because the content changed
    reused: int = 0  # genes already stored (same content elsewhere or unchanged)
    retired: int = 0


@dataclass(frozen=True)
class SourceWrite:
    """One file's (or one named text's) complete set of genes, for `Genome.replace_sources`."""

    record: FileRecord | None
    path: str | None
    genes: Sequence[tuple[Gene, np.ndarray | None]]
    forms: Mapping[str, StoredForm] = field(default_factory=dict)


GENE_COLUMNS = (
    "id, gene_id, content, content_type, language, source_path, project, start_line, end_line, symbol, "
    "tags, facts, source_kind, volatility_class, authority_class, observed_at, last_verified_at, "
    'source_mtime, source_hash, org, device, "user", agent, tier, access_count'  # "user" is reserved in PostgreSQL
)


def row_to_gene(row: sqlite3.Row | tuple[Any, ...]) -> Gene:
    (rowid, gene_id, content, content_type, language, source_path, project, start_line, end_line, symbol,
     tags, facts, source_kind, volatility, authority, observed_at, last_verified_at, source_mtime,
     source_hash, org, device, user, agent, tier, access_count) = row
    return Gene(
        gene_id=gene_id,
        content=unpack_text(content),
        content_type=content_type,
        language=language,
        source_path=source_path,
        project=project,
        start_line=start_line,
        end_line=end_line,
        symbol=symbol,
        tags=tuple(t for t in tags.split("\n") if t),
        facts=tuple((k, v) for k, v in json.loads(facts or "[]")),
        provenance=Provenance(
            source_kind=source_kind,
            volatility_class=volatility,
            authority_class=authority,
            observed_at=observed_at,
            last_verified_at=last_verified_at,
            source_mtime=source_mtime,
            source_hash=source_hash,
        ),
        org=org,
        device=device,
        user=user,
        agent=agent,
        tier=tier,
        access_count=access_count,
        rowid=rowid,
    )
