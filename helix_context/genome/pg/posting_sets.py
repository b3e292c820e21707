"""The sorted gene ids holding a common word (its postings), kept across writes, for ANDs of common words.

Why: retrieval ANDs a question's common words when no rare one is left (terms.py), and on
PostgreSQL an intersection of long posting lists costs a probe per posting of the rarest word
(~1 s for five config words at 40k genes, measured) where FTS5 merges compressed lists in C.
Questions share their common words, so each word's ids are read once (one statement for all the
words not in memory) and intersected here with numpy.

Why kept across writes: a team genome's every write moves the generation, and reading a common
word's ids again costs ~0.2 µs an id on the server (a word in 68k of 96k genes: ~15 ms). A write
rarely takes a gene from a word; it mostly adds new genes, whose ids are higher than any before.
So a word's ids read at an older generation are brought up to date by reading only its ids above
the last one held, and kept when the word's row in lex_terms (schema V_TERM_COUNTS) shows that is
all that changed: the same `stamp` (a new one whenever the word lost a gene or its row was made)
and a count equal to the ids held plus those read. Anything else (a gene removed, an old gene
indexed again) reads the word's ids whole. The check and the ids come from one statement, one
snapshot, so an answer is never older than the generation it is used at.

Retention: at most MAX_POSTING_IDS ids are held; the memory is emptied when it is fuller.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from helix_context.genome.pg import lexical

MAX_POSTING_IDS = 4_000_000  # 8 bytes each: ~32 MB
_COUNT = {None: "n_all", "body": "n_body", "tags": "n_tags", "path": "n_path"}
_NO_IDS = np.zeros(0, np.int64)


@dataclass(frozen=True)
class _Held:
    ids: np.ndarray  # sorted
    stamp: int  # the word's lex_terms.stamp when read (0: no row)
    at: int  # the generation they were last found current at


def _read(conn: Any, after: Mapping[str, int], column: str | None) -> dict[str, tuple[int, int, np.ndarray]]:
    """Word → (genes holding it in `column`, its stamp, the sorted ids above after[word]), in one statement."""
    where = f" AND p.tf_{column} > 0" if column is not None else ""
    with conn.cursor(binary=True) as cur:
        rows = cur.execute(f"SELECT t.term, COALESCE(k.{_COUNT[column]}, 0), COALESCE(k.stamp, 0), "
                           "(SELECT string_agg(int8send(p.gene), ''::bytea ORDER BY p.gene) FROM lex_postings p "
                           f"WHERE p.term = t.term AND p.gene > t.after{where}) "
                           "FROM unnest(%s::text[], %s::bigint[]) AS t(term, after) "
                           "LEFT JOIN lex_terms k ON k.term = t.term", (list(after), list(after.values()))).fetchall()
    return {str(t): (int(n), int(stamp), lexical.gene_ids(ids)) for t, n, stamp, ids in rows}


class PostingSets:
    """Word (and column) → its sorted gene ids, current at the generation they are asked at."""

    def __init__(self, generation: Callable[[], int]) -> None:
        self._generation = generation
        self._lock = threading.Lock()
        self._sets: dict[tuple[str, str | None], _Held] = {}
        self._held = 0

    def of(self, conn: Any, terms: Sequence[str], column: str | None = None) -> dict[str, np.ndarray]:
        generation = self._generation()
        wanted = list(dict.fromkeys(terms))
        with self._lock:
            if self._held > MAX_POSTING_IDS:
                self._sets, self._held = {}, 0
            entries = {t: self._sets.get((t, column)) for t in wanted}
        out = {t: e.ids for t, e in entries.items() if e is not None and e.at == generation}
        if len(out) == len(wanted):
            return out
        behind = {t: e for t, e in entries.items() if e is not None and t not in out and len(e.ids)}
        after = {t: int(behind[t].ids[-1]) if t in behind else 0 for t in wanted if t not in out}
        fresh: dict[str, _Held] = {}
        whole: list[str] = []
        for t, (count, stamp, ids) in _read(conn, after, column).items():
            old = behind.get(t)
            if old is None:  # read whole
                fresh[t] = _Held(ids, stamp, generation)
            elif old.stamp == stamp and len(old.ids) + len(ids) == count:  # only new genes joined
                fresh[t] = _Held(np.concatenate((old.ids, ids)) if len(ids) else old.ids, stamp, generation)
            else:
                whole.append(t)
        if whole:
            fresh.update((t, _Held(ids, stamp, generation))
                         for t, (_, stamp, ids) in _read(conn, dict.fromkeys(whole, 0), column).items())
        with self._lock:
            for t, held in fresh.items():
                before = self._sets.get((t, column))
                self._held += len(held.ids) - (len(before.ids) if before is not None else 0)
                self._sets[(t, column)] = held
        out.update((t, fresh[t].ids if t in fresh else _NO_IDS) for t in after)
        return out

    def holding_all(self, conn: Any, terms: Sequence[str], column: str | None = None) -> np.ndarray:
        """Sorted ids of the genes holding every one of `terms`."""
        sets = self.of(conn, terms, column)
        ordered = sorted((sets[t] for t in dict.fromkeys(terms)), key=len)
        if not ordered:
            return _NO_IDS
        out = ordered[0]
        for ids in ordered[1:]:
            if len(out) == 0:
                break
            out = np.intersect1d(out, ids, assume_unique=True)
        return out
