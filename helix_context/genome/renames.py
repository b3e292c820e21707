"""Re-naming indexed files in place: the files a folder held, under the names a mapped shared root gives them.

Why: on a team genome a file under a mapped root is stored as `@ROOT/rel` (sources/roots.py), so
every machine's checkout answers to one name. Files this machine indexed before it mapped the root
were stored under their absolute path; without a re-name they stay there, a second copy beside the
shared one, and the live check cannot find them through another machine's checkout. `helix sources
map ROOT PATH` re-names them in one transaction through the write door, as a re-index would:

- a file whose shared name is already indexed (another machine got there first) is retired under
  its old name, the shared copy wins;
- any other file's rows (files, spans, symbols, genes' source path) take the new name, and each
  live gene whose own path changed is re-indexed lexically (its path words are part of the index).
  Its old entry is removed first, while the row still holds what it was indexed with (FTS5 replays it).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from helix_context.genome.write_door import WriteDoor

_TABLES = (("files", "path"), ("gene_sources", "path"), ("symbols", "path"), ("genes", "source_path"))


@dataclass
class RenameReport:
    files_renamed: int = 0
    files_dropped: int = 0  # already indexed under the new name: the old copy was retired
    genes_reindexed: int = 0


def _like_prefix(folder: str) -> str:
    """A LIKE pattern for the paths under `folder` (either separator), its wildcards escaped."""
    escaped = folder.rstrip("/\\").replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "_%"  # then checked exactly in Python (SQLite's LIKE ignores ASCII case)


class RenamesMixin:
    """`rename_under` for both genomes; needs `_door` and `transaction`."""

    _door: WriteDoor
    transaction: Callable[..., AbstractContextManager[Any]]

    def rename_under(self, folder: str, new_name: Callable[[str], str | None]) -> RenameReport:
        """Re-name every stored path under `folder` to `new_name(path)` (None: leave it), in one transaction."""
        base = folder.rstrip("/\\")
        report = RenameReport()
        with self.transaction() as tx:
            pattern = _like_prefix(base)
            found: set[str] = set()
            for table, column in _TABLES:
                found.update(str(r[0]) for r in tx.execute(
                    f"SELECT DISTINCT {column} FROM {table} WHERE {column} LIKE ? ESCAPE '\\'", (pattern,)).fetchall())
            renames = {old: new for old in sorted(found)
                       if old[len(base):len(base) + 1] in ("/", "\\") and old.startswith(base)
                       and (new := new_name(old)) is not None and new != old}
            if not renames:
                return report
            lex = self._door.dialect.lexical(tx)
            taken = {str(r[0]) for r in self._rows(tx, "SELECT path FROM files WHERE ", "path", list(renames.values()))}
            for old in [o for o, n in renames.items() if n in taken]:  # the shared copy is indexed already
                self._door.retire(tx, lex, old)
                del renames[old]
                report.files_dropped += 1
            if renames:
                olds = list(renames)
                live = [(int(r[0]), str(r[1])) for r in self._rows(
                    tx, "SELECT id, source_path FROM genes WHERE retired_at IS NULL AND ", "source_path", olds)]
                for rowid, _ in live:
                    lex.unindex(rowid)  # while the row still holds the text it was indexed with
                pairs = [(new, old) for old, new in renames.items()]
                for table, column in _TABLES:
                    tx.executemany(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", pairs)
                for rowid, old in live:
                    row = tx.execute("SELECT content, tags FROM genes WHERE id = ?", (rowid,)).fetchone()
                    lex.index(rowid, row[0], row[1], renames[old], None)
                report.files_renamed = len(self._rows(tx, "SELECT path FROM files WHERE ", "path",
                                                      list(renames.values())))
                report.genes_reindexed = len(live)
            lex.flush()
        return report

    def _rows(self, tx: Any, head: str, column: str, values: list[str]) -> list[Any]:
        """`head` + `column` among `values`, a few hundred values per statement (SQLite's limit on marks)."""
        rows: list[Any] = []
        for start in range(0, len(values), 500):
            where, args = self._door.dialect.member(column, values[start:start + 500])
            rows.extend(tx.execute(head + where, args).fetchall())
        return rows
