"""Which project's genes answer a question: the one named, else the one with the strongest evidence.

Why: one genome holds several projects, and a question about one of them must not be
answered from another's code because a common word matched there. A named scope
(`project` on the API, `X-Helix-Project`, `--project`, the MCP client's roots) is a
filter on the candidates. Without one, the project whose files hold the most of the
ranking's evidence leads, and another project's gene stays only when its own score is
clearly higher than the leader's best (`LEAD_MARGIN`). Nothing here knows any project.

How the leader is chosen (`project_evidence`): the ranking's first LEAD_FILES files are
read, each at its best gene's score, discounted by its rank among them (1/log2(rank+2),
as in DCG), and a project counts its best LEAD_TOP files. Two things this guards against,
both seen on benchmarks/bench_scoping.py's development questions: a long file cut into
many genes (a docs page, a big test module) counted once per chunk, so one page's
paragraphs outvoted the code file that answers; and a project with many middling matches
(its common words are the question's words) outvoting the project with the one strong
match. Ranks, not raw sums, make breadth count only when it is near the top.

`ProjectCatalog` keeps each project's live gene ids and size per genome generation, so
scoping costs a set lookup per candidate, not a query.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from helix_context.errors import InvalidRequest
from helix_context.genome.storage import GenomeStore

LEAD_WINDOW = 60  # ranked genes read to find the ranking's first files
LEAD_FILES = 10  # the ranking's first files (each at its best gene) weighed to pick the leader
LEAD_TOP = 3  # a project counts at most its best few of them
LEAD_MARGIN = 1.25  # another project's gene stays when it outscores the leader's best by this factor
MAX_SCOPE_NAMES = 16
MAX_WORD_COUNTS = 50_000  # remembered (projects, word) document counts per generation


class UnknownProject(InvalidRequest):
    """A project name no source or gene carries; the message lists the known ones."""


def parse_names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """`"a"`, `"a,b"` or `["a", "b"]` → ("a", "b"); None or blanks → () (no scope)."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))
    if len(names) > MAX_SCOPE_NAMES:
        raise InvalidRequest(f"at most {MAX_SCOPE_NAMES} projects in one scope, got {len(names)}")
    return names


@dataclass(frozen=True)
class Scope:
    """The projects a question is answered from; `names` empty: every project, evidence decides."""

    names: tuple[str, ...] = ()
    explicit: bool = False  # named by the caller (not chosen by evidence)
    silent_reason: str | None = None  # named, but none of its sources can answer now (paused / missing)

    @property
    def scoped(self) -> bool:
        return bool(self.names)


class ProjectCatalog:
    """Live genes per project, and each project's gene ids, remembered per genome generation."""

    def __init__(self, genome: GenomeStore) -> None:
        self.genome = genome
        self._lock = threading.Lock()
        self._generation = -1
        self._sizes: dict[str, int] = {}
        self._rowids: dict[tuple[str, ...], np.ndarray] = {}
        self._word_counts: dict[tuple[tuple[str, ...], str], int] = {}  # (projects, word) → their genes holding it

    def _fresh(self) -> None:
        generation = self.genome.generation()
        if generation != self._generation:
            sizes = self.genome.live_projects()
            with self._lock:
                self._generation, self._sizes, self._rowids, self._word_counts = generation, sizes, {}, {}

    def sizes(self) -> dict[str, int]:
        """Live genes per project."""
        self._fresh()
        return dict(self._sizes)

    def rowids(self, names: Sequence[str]) -> np.ndarray:
        """Sorted live gene ids of these projects."""
        self._fresh()
        key = tuple(sorted(set(names)))
        with self._lock:
            found = self._rowids.get(key)
        if found is None:
            found = self.genome.project_rowids(key)
            with self._lock:
                if len(self._rowids) > 64:  # bounded: scopes are few, but callers choose them
                    self._rowids.clear()
                self._rowids[key] = found
        return found

    def word_counts(self, names: Sequence[str], words: Sequence[str]) -> dict[str, int]:
        """The remembered counts of the projects' genes holding each of `words` (this generation); words
        not remembered are left out. One lookup of the projects' key for all the words (an issue: ~100)."""
        key = tuple(sorted(set(names)))
        with self._lock:
            counts = self._word_counts
            return {word: counts[(key, word)] for word in words if (key, word) in counts}

    def remember_word_counts(self, names: Sequence[str], found: Mapping[str, int]) -> None:
        key = tuple(sorted(set(names)))
        with self._lock:
            for word, count in found.items():
                if len(self._word_counts) >= MAX_WORD_COUNTS:  # bounded: questions share their words, not all of them
                    self._word_counts.clear()
                self._word_counts[(key, word)] = count

    def size(self, names: Sequence[str]) -> int:
        sizes = self.sizes()
        return sum(sizes.get(n, 0) for n in names)

    def resolve(self, requested: str | Sequence[str] | None, *, sourced: Mapping[str, str | None] | None = None
                ) -> Scope:
        """The scope for a request. UnknownProject (a 4xx listing the known ones) for a name nothing carries.

        `sourced`: project → why none of its sources can answer now (None when one can), from the
        sources' list (sources/projects.py); a project only sources know (not indexed yet) is known too."""
        names = parse_names(requested)
        if not names:
            return Scope()
        sourced = dict(sourced or {})
        known = set(self.sizes()) | set(sourced)
        unknown = [n for n in names if n not in known]
        if unknown:
            listed = ", ".join(sorted(known)) or "none yet (add a folder with `helix sources add PATH`)"
            raise UnknownProject(f"unknown project {', '.join(repr(n) for n in unknown)}; known projects: {listed}")
        reasons = [sourced.get(n) for n in names]
        silent = "; ".join(r for r in reasons if r) if all(reasons) else None
        return Scope(names, explicit=True, silent_reason=silent)


def contains(rowids: np.ndarray, candidates: Iterable[int]) -> set[int]:
    """The candidates that are in the sorted `rowids`."""
    wanted = np.fromiter(candidates, dtype=np.int64)
    if len(wanted) == 0 or len(rowids) == 0:
        return set()
    at = np.searchsorted(rowids, wanted)
    at[at >= len(rowids)] = 0
    return set(wanted[rowids[at] == wanted].tolist())


def count_in(rowids: np.ndarray, candidates: np.ndarray) -> int:
    """How many of the distinct `candidates` are in the sorted `rowids` (len(contains(...)), without the set)."""
    if len(candidates) == 0 or len(rowids) == 0:
        return 0
    at = np.searchsorted(rowids, candidates)
    at[at >= len(rowids)] = 0
    return int(np.count_nonzero(rowids[at] == candidates))


@dataclass(frozen=True)
class Lead:
    """The project the evidence points at, and the ranked genes that stay with it."""

    project: str | None  # None: no ranking, or genes without projects only
    kept: tuple[int, ...]  # rowids, in ranking order
    others: int  # genes of other projects that stayed because they outscored the leader clearly
    evidence: tuple[tuple[str, float], ...] = ()  # each project's weighed evidence, strongest first


def project_evidence(ranked: Sequence[tuple[int, float]], projects: Mapping[int, str | None],
                     files: Mapping[int, str]) -> dict[str, float]:
    """Each project's evidence: its best files among the ranking's first LEAD_FILES, rank-discounted.

    A file is one piece of evidence at its best gene's score (`files`: rowid → source path; a gene
    without one is its own file). Genes of no project take their ranks but count for nobody."""
    evidence: dict[str, float] = {}
    counted: dict[str, int] = {}
    seen: set[str] = set()
    for rowid, score in ranked[:LEAD_WINDOW]:
        key = files.get(rowid) or f"#{rowid}"
        if key in seen:
            continue
        rank = len(seen)
        if rank >= LEAD_FILES:
            break
        seen.add(key)
        name = projects.get(rowid)
        if name and counted.get(name, 0) < LEAD_TOP:
            counted[name] = counted.get(name, 0) + 1
            evidence[name] = evidence.get(name, 0.0) + score / math.log2(rank + 2)
    return evidence


def lead(ranked: Sequence[tuple[int, float]], projects: Mapping[int, str | None],
         files: Mapping[int, str] | None = None) -> Lead:
    """Evidence-led scope: the project with the most evidence (`project_evidence`) leads.

    A gene of another project stays only when its score exceeds LEAD_MARGIN × the leader's best. A gene
    of no project (API text, session notes) is nobody's other project: it always stays."""
    if not ranked:
        return Lead(None, (), 0)
    evidence = project_evidence(ranked, projects, files or {})
    if not evidence:
        return Lead(None, tuple(r for r, _ in ranked), 0)
    order = sorted(evidence.items(), key=lambda kv: (-kv[1], kv[0]))
    leader = order[0][0]
    best = max(score for rowid, score in ranked if projects.get(rowid) == leader)
    kept: list[int] = []
    others = 0
    for rowid, score in ranked:
        if projects.get(rowid) in (leader, None, ""):
            kept.append(rowid)
        elif score > LEAD_MARGIN * best:
            kept.append(rowid)
            others += 1
    return Lead(leader, tuple(kept), others, tuple((n, round(v, 6)) for n, v in order))


Ranked = list[tuple[int, tuple[float, dict[str, float]]]]


def lead_ranking(genome: GenomeStore, catalog: ProjectCatalog, ranked: Ranked) -> tuple[Ranked, Lead]:
    """The fused ranking less the other projects' genes that do not clearly outscore the leading
    project's best, and the Lead (who leads, on what evidence). Genes without projects only: unchanged."""
    sizes = catalog.sizes()
    if not sizes or not ranked:  # genes without projects only: nothing to choose between
        return ranked, Lead(None, tuple(r for r, _ in ranked), 0)
    ids = [r for r, _ in ranked]
    projects: dict[int, str | None] = {}
    for name in sizes:
        for rowid in contains(catalog.rowids([name]), ids):
            projects[rowid] = name
    files = genome.gene_paths(ids[:LEAD_WINDOW])
    found = lead([(r, v[0]) for r, v in ranked], projects, files)
    keep = set(found.kept)
    return [kv for kv in ranked if kv[0] in keep], found
