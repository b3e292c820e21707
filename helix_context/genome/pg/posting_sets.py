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

Why warmed at start (`warm`): a word's first read costs ~0.3 µs an id (a word in 68k of 96k genes:
~20 ms), and a backend just started meets the genome's common words one question at a time: at
96k genes its first hundred questions had p95 56 ms against 15 ms for the hundreds after. The
server's start-up (manager.load_parts) reads the commonest words' ids in a few statements instead
(1.2 s for 5.1M ids there), before the first question.

Retention: at most MAX_POSTING_BYTES of ids are held (4 bytes an id while gene ids fit, else 8), and
MAX_AND_BYTES of ANDs; the words (and ANDs) used longest ago are dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from helix_context.genome.pg import lexical

MAX_POSTING_BYTES = 32 * 2**20
WARM_SHARE = 0.75  # of MAX_POSTING_BYTES that a start-up warm fills, leaving room for the words questions bring
WARM_BATCH_IDS = 1_000_000  # ids read per statement while warming (each statement's reply stays a few MB)
MAX_AND_BYTES = 4 * 2**20  # of remembered ANDs (holding_all)
MASK_SPREAD = 32  # ids spanning more than this many times the two lists' lengths: sorted intersection instead
_COUNT = {None: "n_all", "body": "n_body", "tags": "n_tags", "path": "n_path"}
_NO_IDS = np.zeros(0, np.int64)
K = TypeVar("K")
V = TypeVar("V")


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
    return {str(t): (int(n), int(stamp), _compact(lexical.gene_ids(ids))) for t, n, stamp, ids in rows}


def _compact(ids: np.ndarray) -> np.ndarray:
    """Sorted ids as 4-byte integers while the largest fits (it does below 4 billion genes): half the memory."""
    if ids.dtype == np.uint32 or not len(ids) or ids[-1] >= 2**32:
        return ids
    return ids.astype(np.uint32)


def _put_capped(entries: OrderedDict[K, V], key: K, value: V, size: Callable[[V], int], used: int, cap: int) -> int:
    """`value` at `key` as the most recently used, the least recently used dropped while past `cap` bytes
    (one kept whatever its size); returns the bytes held after. The words' ids and the ANDs share this rule."""
    before = entries.pop(key, None)
    used += size(value) - (size(before) if before is not None else 0)
    entries[key] = value
    while used > cap and len(entries) > 1:
        _, dropped = entries.popitem(last=False)
        used -= size(dropped)
    return used


def _intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The ids in both sorted arrays, sorted. Where the ids span a range not much wider than the lists,
    a mask over that range (one scatter, one gather: ~2.5x faster than np.intersect1d's sort of both)."""
    if not len(a) or not len(b):
        return _NO_IDS
    top = int(max(a[-1], b[-1])) + 1
    if top > MASK_SPREAD * (len(a) + len(b)):
        return np.intersect1d(a, b, assume_unique=True)
    small, big = (a, b) if len(a) <= len(b) else (b, a)
    mask = np.zeros(top, dtype=bool)
    mask[big] = True
    both: np.ndarray = small[mask[small]]
    return both


class PostingSets:
    """Word (and column) → its sorted gene ids, current at the generation they are asked at."""

    def __init__(self, generation: Callable[[], int]) -> None:
        self._generation = generation
        self._lock = threading.Lock()
        self._sets: OrderedDict[tuple[str, str | None], _Held] = OrderedDict()  # least recently used first
        self._bytes = 0
        # (words, column) → (generation, the ids holding them all), least recently used first
        self._ands: OrderedDict[tuple[frozenset[str], str | None], tuple[int, np.ndarray]] = OrderedDict()
        self._and_bytes = 0

    def _keep(self, key: tuple[str, str | None], held: _Held) -> None:
        """Hold `held` for `key` (under the lock), dropping the words used longest ago past the cap."""
        self._bytes = _put_capped(self._sets, key, held, lambda h: h.ids.nbytes, self._bytes, MAX_POSTING_BYTES)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def _look(self, terms: Sequence[str], column: str | None,
              generation: int) -> tuple[dict[str, _Held | None], dict[str, np.ndarray]]:
        """Each word's entry (marked as just used), and the ids of those current at `generation`."""
        with self._lock:
            entries = {t: self._sets.get((t, column)) for t in terms}
            for t, e in entries.items():
                if e is not None:
                    self._sets.move_to_end((t, column))
        return entries, {t: e.ids for t, e in entries.items() if e is not None and e.at == generation}

    def of(self, conn: Any, terms: Sequence[str], column: str | None = None) -> dict[str, np.ndarray]:
        generation = self._generation()
        wanted = list(dict.fromkeys(terms))
        entries, out = self._look(wanted, column, generation)
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
                fresh[t] = _Held(_compact(np.concatenate((old.ids, ids))) if len(ids) else old.ids, stamp, generation)
            else:
                whole.append(t)
        if whole:
            fresh.update((t, _Held(ids, stamp, generation))
                         for t, (_, stamp, ids) in _read(conn, dict.fromkeys(whole, 0), column).items())
        with self._lock:
            for t, held in fresh.items():
                self._keep((t, column), held)
        out.update((t, fresh[t].ids if t in fresh else _NO_IDS) for t in after)
        return out

    def held(self, terms: Sequence[str]) -> dict[str, np.ndarray]:
        """The ids held for these words (any column) that are current now; nothing is read.
        Why: the silence gate counts a question's common words in the genes they are held by, which are
        the ids held here for the commonest words (warmed at start), so those cost no round trip."""
        return self._look(terms, None, self._generation())[1]

    def holding_all(self, conn: Any, terms: Sequence[str], column: str | None = None) -> np.ndarray:
        """Sorted ids of the genes holding every one of `terms`.

        Why remembered (per generation, a few MB): one question asks for the same words' AND several
        times, growing it a word at a time (terms.py tries the rarest two, then three, ...; then each
        column's search ANDs the chosen words again), and most of a common-words question's CPU was
        these intersections (8.8 of them a question, ~1 ms each at 96k genes). An AND one word wider
        than one remembered starts from it."""
        wanted = frozenset(terms)
        if not wanted:
            return _NO_IDS
        generation = self._generation()
        with self._lock:
            known = self._and_at(wanted, column, generation)
            base = None if known is not None or len(wanted) < 3 else next(
                ((t, b) for t in sorted(wanted) if (b := self._and_at(wanted - {t}, column, generation)) is not None),
                None)
        if known is not None:
            return known
        if base is not None:
            added, start = base
            out = _intersect(start, self.of(conn, [added], column)[added])
        else:
            sets = self.of(conn, sorted(wanted), column)
            ordered = sorted(sets.values(), key=len)
            out = ordered[0]
            for ids in ordered[1:]:
                out = _intersect(out, ids)
        if self._generation() == generation:  # else the words' ids may be of two generations: not kept
            with self._lock:
                self._and_bytes = _put_capped(self._ands, (wanted, column), (generation, out), lambda e: e[1].nbytes,
                                              self._and_bytes, MAX_AND_BYTES)
        return out

    def _and_at(self, key: frozenset[str], column: str | None, generation: int) -> np.ndarray | None:
        """A remembered AND current at `generation` (marked as just used), under the lock."""
        entry = self._ands.get((key, column))
        if entry is None or entry[0] != generation:
            return None
        self._ands.move_to_end((key, column))
        return entry[1]

    def warm(self, conn: Any, min_genes: int) -> int:
        """Read the ids of the words held by more than `min_genes` genes, commonest first, up to WARM_SHARE of
        the memory; words already held are left alone. Returns the ids read.

        `min_genes`: retrieval's line for a common word (terms.MAX_WORD_DOCS), the only words it reads here."""
        generation = self._generation()  # before the reads: an entry is never newer than its generation
        budget = int(MAX_POSTING_BYTES * WARM_SHARE) // 4
        with self._lock:
            budget -= self._bytes // 4
            held = {t for t, c in self._sets if c is None}
        batches: list[list[str]] = [[]]
        size = 0
        for term, n in conn.execute("SELECT term, n_all FROM lex_terms WHERE n_all > %s ORDER BY n_all DESC, term",
                                    (min_genes,)).fetchall():
            if term in held:
                continue
            if n > budget:
                break
            budget -= n
            if size + n > WARM_BATCH_IDS and batches[-1]:
                batches.append([])
                size = 0
            batches[-1].append(str(term))
            size += n
        read = 0
        for batch in batches:
            if not batch:
                continue
            found = _read(conn, dict.fromkeys(batch, 0), None)
            with self._lock:
                for t, (_, stamp, ids) in found.items():
                    if (t, None) not in self._sets:  # a question read it meanwhile: that one is as fresh
                        self._keep((t, None), _Held(ids, stamp, generation))
                        read += len(ids)
        return read
