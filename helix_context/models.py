"""Plain data passed between stages (ingest → genome → retrieve → assemble/weigh).

Kept free of behaviour and imports so that every stage can be tested with
hand-built values and no server, store or model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# content types understood by the chunker and the compressor
CONTENT_TYPES = ("code", "markdown", "text", "log", "config", "json", "diff")
# lifecycle tiers
TIERS = ("open", "aging", "archived")
# how a gene's source came to be known
SOURCE_KINDS = ("file", "api", "session", "import")
# how fast its truth decays: stable 7 d, medium 12 h, hot 15 min
VOLATILITY = ("stable", "medium", "hot")
# primary: read from the source; derived: computed from it; inferred: guessed (e.g. an LLM summary)
AUTHORITY = ("primary", "derived", "inferred")


@dataclass(frozen=True)
class Chunk:
    """One piece of a source text, before it becomes a gene."""

    content: str
    content_type: str  # one of CONTENT_TYPES
    language: str | None
    start_line: int  # 1-based, inclusive
    end_line: int  # 1-based, inclusive
    symbol: str | None = None  # function / class name, or heading text


@dataclass(frozen=True)
class Symbol:
    """A function, method, class or constant: what an answer points at in code (lines 1-based, inclusive)."""

    name: str  # qualified: `ZipFile._extract_member`
    kind: str  # function / method / class / constant
    start_line: int
    end_line: int


@dataclass(frozen=True)
class Provenance:
    source_kind: str = "file"
    volatility_class: str = "stable"
    authority_class: str = "primary"
    observed_at: float = 0.0  # unix seconds when ingested
    last_verified_at: float = 0.0
    source_mtime: float | None = None
    source_hash: str | None = None  # sha256 of the whole source file at ingest


@dataclass(frozen=True)
class Gene:
    """One stored chunk with everything needed to rank, show and verify it."""

    gene_id: str  # content hash
    content: str
    content_type: str
    language: str | None
    source_path: str | None
    project: str | None
    start_line: int
    end_line: int
    symbol: str | None = None
    tags: tuple[str, ...] = ()
    facts: tuple[tuple[str, str], ...] = ()  # key=value pairs
    provenance: Provenance = field(default_factory=Provenance)
    org: str = ""
    device: str = ""
    user: str = ""
    agent: str = ""
    tier: str = "open"
    access_count: int = 0
    rowid: int | None = None  # the store's integer id; None before insert
    symbols: tuple[Symbol, ...] = ()  # symbols that start in this gene (ingest only; not read back)

    @property
    def src(self) -> str:
        path = self.source_path or self.gene_id
        return f"{path}:{self.start_line}-{self.end_line}"


@dataclass(frozen=True)
class QuerySignals:
    """What retrieval extracted from the query text."""

    text: str
    terms: tuple[str, ...] = ()  # lowercased words, stop words removed
    identifiers: tuple[str, ...] = ()  # whole identifiers as written (snake_case, camelCase, dotted)
    identifier_parts: tuple[str, ...] = ()  # their split parts
    path_tokens: tuple[str, ...] = ()  # file names, path segments, extensions mentioned
    phrases: tuple[str, ...] = ()  # "quoted phrases"
    expansions: tuple[str, ...] = ()  # synonyms from helix.toml
    term_counts: tuple[tuple[str, int], ...] = ()  # every distinct word with how often the query says it
    definitions: tuple[str, ...] = ()  # names the query points at as code: calls, `quoted`, dotted, frames, errors
    frames: tuple[tuple[str, str], ...] = ()  # traceback frames: (file name, function)
    locations: tuple[tuple[str, int], ...] = ()  # places compilers, linters and links name: (file name, line)
    meaning: tuple[str, ...] = ()  # what the embedding model reads: the text, or an issue's title and prose


@dataclass(frozen=True)
class ScoredGene:
    """A retrieval result: the gene, its fused score, and what each scorer gave it."""

    gene: Gene
    score: float
    signals: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Pointer:
    """One answer span: a symbol's lines (or a whole gene where no symbol applies)."""

    gene: Gene
    path: str | None
    symbol: str | None
    kind: str | None  # function / method / class / constant; None for a gene span
    start_line: int
    end_line: int
    score: float
    signals: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class FileHit:
    path: str
    score: float
    pointers: tuple[Pointer, ...]  # the file's best spans, best first


@dataclass(frozen=True)
class Retrieval:
    """The ranked, gated answer of the retrieval stage."""

    query: QuerySignals
    items: tuple[ScoredGene, ...]  # best first, already gated by floor / tier / zone
    tier: str  # tight | focused | broad | abstain
    candidates: int = 0  # genes any scorer found before gating
    zone_cap: int | None = None  # genes allowed by the budget zone, when it applied
    stage_seconds: dict[str, float] = field(default_factory=dict)
    pointers: tuple[Pointer, ...] = ()  # symbol-level answer spans, best first (when asked for)
    file_mass: dict[str, float] = field(default_factory=dict)  # path → share of the wider ranking (with pointers)
    project: str | None = None  # the project answered from: the scope named, else the one the evidence led to
    silence: str = ""  # why nothing is returned for a message about nothing indexed (weigh/silence.py)
    silence_features: dict[str, Any] = field(default_factory=dict)


# ContextHealth.status in the words a user reads (the CLI, the MCP tools)
STATUS_WORDS = {
    "aligned": "answer found",
    "refreshed": "answer found (some files were re-read from disk)",
    "sparse": "little relevant found",
    "stale": "answer found, but its files changed since they were indexed",
    "denatured": "nothing relevant found",
    "over_budget": "relevant excerpts found, but none fits the token budget",
    "silent": "nothing relevant found in this project",
}
