"""A candidate gene's path and marks, remembered per generation: what ranking asks before any text.

Why: each question asks the server three times about the genes it ranks, before reading the text
of the few it returns: their paths to find the project the evidence leads to (retrieve/scope.py),
their paths again for the files' mass, and their marks (tier, owner) to leave out what may not be
returned. On a team genome each is a round trip, and under load a round trip costs far more than
its work: eight client backends and the server on two cores wait for a core at each one (an
8-client question's slowest 5 % spent 11 ms on its own CPU and 86 ms waiting, measured at 96k genes).
Here one statement reads both facts for the genes not yet known, and the genes a project's questions
keep ranking are read once per generation.

Why per generation: a write may hand a gene to another path or archive it; every such write goes
through the write door, whose commit moves the generation, and then everything here is forgotten.
(A delivery's tier change from 'aging' to 'open' moves no generation; only 'archived' decides
anything here, and archiving is a door write.)

Retention: at most MAX_FACTS genes; past that, all are forgotten and read again as asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from helix_context.genome.lexicon import PerGeneration

MAX_FACTS = 50_000

Marks = tuple[str, str, str, str, str]  # tier, device, user, org, agent (GenomeStore.gene_marks)


class Fact(NamedTuple):
    path: str | None
    marks: Marks


class GeneFacts(PerGeneration):
    """Gene rowid → its Fact, as of the generation asked at."""

    def __init__(self, generation: Callable[[], int], limit: int = MAX_FACTS) -> None:
        super().__init__(generation, limit)

    def of(self, conn: Any, rowids: Iterable[int]) -> dict[int, Fact]:
        """The facts of those of `rowids` that exist (a removed gene has none), reading only the unknown."""
        found, missing, generation = self._known(rowids)
        if missing:
            found.update(self._send(conn, missing, generation)())
        return found

    def start(self, conn: Any, rowids: Iterable[int]) -> Callable[[], dict[int, Fact]]:
        """The unknown facts of `rowids`: the statement sent now, the rows read (and remembered) when the
        returned function is called. Why: sent with another read of the same question (co-activation),
        the facts scope asks for next travel with it (retriever._retrieve)."""
        _, missing, generation = self._known(rowids)
        return self._send(conn, missing, generation) if missing else dict

    def _known(self, rowids: Iterable[int]) -> tuple[dict[int, Fact], list[int], int]:
        """(the facts known at this generation, the ids not known, the generation they were looked up at)."""
        ids = list(dict.fromkeys(int(r) for r in rowids))
        generation = self._generation()
        with self._lock:
            known = self._counts_for(generation)
            found = {r: f for r in ids if (f := known.get(r)) is not None}
        return found, [r for r in ids if r not in found], generation

    def _send(self, conn: Any, missing: list[int], generation: int) -> Callable[[], dict[int, Fact]]:
        sent = conn.execute('SELECT id, source_path, tier, device, "user", org, agent FROM genes WHERE id = ANY(%s)',
                            (missing,))

        def read() -> dict[int, Fact]:
            got = {int(rowid): Fact(path, (tier, device, user, org, agent))
                   for rowid, path, tier, device, user, org, agent in sent.fetchall()}
            self._remember(generation, got)  # not kept if the genome moved on while reading
            return got
        return read
