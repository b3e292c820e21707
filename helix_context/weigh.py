"""Trust verdicts for the agent-facing packet (`/context/packet`).

Retrieval says *what* is relevant; this stage says *how far an agent may trust
it right now*. Per delivered gene it computes

    live_truth = freshness × authority × specificity

and runs a live check that the gene's source file still holds what was indexed.
For the whole answer it computes a coordinate confidence: how well the delivered
items cover the files and directories the query names. From these, and from the
task the agent is doing, each item gets a verdict:

- ``verified``       trust it for this task;
- ``stale_risk``     probably right, but re-read the source before acting on it;
- ``needs_refresh``  the source changed or vanished since ingest — do not use it.

The packet also carries a refresh plan (which files to re-ingest, which genes to
re-verify, which paths the index is missing) and, when retrieval found nothing,
says so first-class (``known_empty``) instead of returning an empty list.

Everything here is a pure function over plain data, except for the live source
check, which stats (and, when needed, hashes) the source files. No SQL, no HTTP.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import stat as stat_mod
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from helix_context.config import WeighSettings
from helix_context.models import Gene, QuerySignals, Retrieval, ScoredGene

__all__ = [
    "TASK_TYPES",
    "VERDICTS",
    "SourceCheck",
    "SourceCache",
    "PacketItem",
    "RefreshTarget",
    "Packet",
    "freshness",
    "authority",
    "specificity",
    "live_truth",
    "check_source",
    "coordinate_confidence",
    "uncovered_path_tokens",
    "verified_threshold",
    "validate_task_type",
    "weigh_retrieval",
    "refresh_targets",
]

VERDICTS = ("verified", "stale_risk", "needs_refresh")
SOURCE_STATUSES = ("unchanged", "changed", "missing", "unknown")

# Task types and how strict each one is, as a multiplier of
# WeighSettings.verified_threshold. Planning and explaining survive a slightly
# dated or indirect item (the agent will read the code before acting anyway);
# editing, debugging, operating and quoting act on the exact text, so they need
# more. "review" sits at the configured threshold.
TASK_TYPES = ("plan", "explain", "review", "edit", "debug", "ops", "quote")
_TOLERANT = 0.6
_STANDARD = 1.0
_STRICT = 1.2
_TASK_FACTOR: dict[str, float] = {
    "plan": _TOLERANT,
    "explain": _TOLERANT,
    "review": _STANDARD,
    "edit": _STRICT,
    "debug": _STRICT,
    "ops": _STRICT,
    "quote": _STRICT,
}
# tasks for which a source that cannot be checked live is never "verified"
_NEEDS_CHECKED_SOURCE = frozenset({"quote", "edit"})

_AUTHORITY: dict[str, float] = {"primary": 1.0, "derived": 0.75, "inferred": 0.45}
_UNKNOWN_AUTHORITY = 0.45  # an unlabelled claim is worth no more than a guess

# A file whose mtime is this close to (or after) the moment it was indexed may
# have been rewritten within the same mtime tick right after ingest hashed it
# (FAT keeps 2 s, some network filesystems 1 s). Such files are hashed even
# when the recorded mtime still matches ("racy clean", as git calls it).
_RACY_WINDOW_S = 2.0
_MTIME_TOLERANCE_S = 1e-6
_HASH_BLOCK = 1 << 20
_PREVIEW_CHARS = 200
# reasons for a downgrade that concern the answer as a whole, not the item's own
# source: such items get no per-item refresh target (the "query" target covers them)
_OFF_TARGET_PREFIX = "off target:"
_ABSTAIN_PREFIX = "retrieval abstained:"
_QUERY_LEVEL_PREFIXES = (_OFF_TARGET_PREFIX, _ABSTAIN_PREFIX)


# --------------------------------------------------------------------------- scores


def _half_life(volatility: str, settings: WeighSettings) -> float:
    if volatility == "stable":
        return settings.half_life_stable_s
    if volatility == "medium":
        return settings.half_life_medium_s
    # "hot", and anything unrecognised: assume the fastest decay rather than
    # trusting a value nobody vouched for.
    return settings.half_life_hot_s


def _verified_at(gene: Gene) -> float:
    prov = gene.provenance
    return prov.last_verified_at or prov.observed_at or 0.0


def freshness(gene: Gene, now: float, settings: WeighSettings, *, verified_at: float | None = None) -> float:
    """exp(-age / half_life), half-life chosen by the gene's volatility class.

    age = now - provenance.last_verified_at (or observed_at when it was never
    re-verified). ``verified_at`` lets a caller that has just re-verified the
    gene (e.g. by a matching live source check) use that moment instead when it
    is later. A gene with no timestamp at all was never observed and gets 0.0;
    a timestamp in the future (clock skew) counts as age 0.
    """
    settings = _weigh_settings(settings)
    seen = _verified_at(gene)
    if verified_at is not None and verified_at > seen:
        seen = verified_at
    if not seen or not math.isfinite(seen):
        return 0.0
    age = max(0.0, now - seen)
    half_life = _half_life(gene.provenance.volatility_class, settings)
    if half_life <= 0:
        return 0.0 if age > 0 else 1.0
    return math.exp(-age / half_life)


def authority(gene: Gene) -> float:
    """How directly the content came from its source.

    primary 1.0 (read verbatim from the source), derived 0.75 (computed from it:
    extracted facts, summaries of a parsed structure — faithful but one step
    removed), inferred 0.45 (guessed, e.g. an LLM summary: useful for orientation,
    never on its own enough to act on under the default threshold).
    """
    return _AUTHORITY.get(gene.provenance.authority_class, _UNKNOWN_AUTHORITY)


def specificity(gene: Gene) -> float:
    """How precisely the gene pins down something an agent can act on.

    The scale asks: if this item is right, can the agent point at the exact thing
    (a line to edit, a value to set) without reading around it?

    - code with a symbol 0.95: a whole function/class, named and line-addressed;
      the unit an agent edits or quotes.
    - config / any gene carrying key=value facts 0.95; config without facts 0.90:
      settings are exact values with exact keys.
    - json 0.85, diff 0.85: exact data, but json chunks are often fragments of a
      larger document and a diff describes a change rather than the current state.
    - code without a symbol 0.85: module-level code (imports, constants, glue) —
      exact, but not a self-contained unit.
    - markdown under a heading 0.80, markdown 0.75, plain text 0.70: prose
      explains and is addressable by section, but states things approximately.
    - log 0.65: exact strings and timestamps, but a log block is mostly noise
      around the one line that matters, and it records events, not current state.
    - anything else 0.50.

    The spread is deliberately narrow (0.65-0.95): specificity separates kinds of
    evidence, while freshness and the live source check decide whether it is
    still true.
    """
    kind = gene.content_type
    if kind == "code":
        return 0.95 if gene.symbol else 0.85
    if gene.facts or kind == "config":
        return 0.95 if gene.facts else 0.90
    if kind in ("json", "diff"):
        return 0.85
    if kind == "markdown":
        return 0.80 if gene.symbol else 0.75
    if kind == "text":
        return 0.70
    if kind == "log":
        return 0.65
    return 0.50


def live_truth(gene: Gene, now: float, settings: WeighSettings, *, verified_at: float | None = None) -> float:
    """freshness × authority × specificity, in [0, 1]."""
    return freshness(gene, now, settings, verified_at=verified_at) * authority(gene) * specificity(gene)


# --------------------------------------------------------------------------- live source check


@dataclass(frozen=True)
class SourceCheck:
    status: str  # unchanged | changed | missing | unknown
    detail: str


class SourceCache:
    """Per-packet memo of stat() and sha256 results, keyed by absolute path.

    Many genes come from the same file; each file is stat'ed at most once and
    hashed at most once per packet. ``stats`` and ``hashes`` count the real
    system calls made (useful to check the cache does its job).
    """

    def __init__(self) -> None:
        self._stat: dict[str, os.stat_result | OSError] = {}
        self._hash: dict[str, str | OSError] = {}
        self.stats = 0
        self.hashes = 0

    @staticmethod
    def key(path: str) -> str:
        return os.path.abspath(os.path.expanduser(path))

    def stat(self, path: str) -> os.stat_result | OSError:
        key = self.key(path)
        if key not in self._stat:
            self.stats += 1
            try:
                self._stat[key] = os.stat(key)
            except OSError as exc:
                self._stat[key] = exc
        return self._stat[key]

    def sha256(self, path: str) -> str | OSError:
        key = self.key(path)
        if key not in self._hash:
            self.hashes += 1
            digest = hashlib.sha256()
            try:
                with open(key, "rb") as fh:
                    while block := fh.read(_HASH_BLOCK):
                        digest.update(block)
                self._hash[key] = digest.hexdigest()
            except OSError as exc:
                self._hash[key] = exc
        return self._hash[key]


def _normal_hash(value: str) -> str:
    value = value.strip().lower()
    return value[len("sha256:"):] if value.startswith("sha256:") else value


def _is_gone(exc: OSError) -> bool:
    return isinstance(exc, (FileNotFoundError, NotADirectoryError))


def check_source(gene: Gene, cache: SourceCache | None = None) -> SourceCheck:
    """Does the gene's source file still hold what was indexed?

    - ``unknown``: not a file source, or nothing was recorded at ingest to
      compare with, or the file cannot be read (permissions, I/O error).
    - ``missing``: the file (or a directory on its path) is gone, or it is no
      longer a regular file.
    - ``changed``: the content differs from the sha256 recorded at ingest (or the
      mtime moved and no hash was recorded, so it cannot be shown unchanged).
    - ``unchanged``: the recorded mtime still matches and the file was not
      rewritten right around ingest time, or the content hash matches (a
      ``touch`` or a save without edits moves the mtime but changes nothing).

    Relative source paths are resolved against the current directory.
    """
    cache = cache if cache is not None else SourceCache()
    prov = gene.provenance
    path = gene.source_path
    if prov.source_kind != "file" or not path:
        what = f"source kind {prov.source_kind!r}" if prov.source_kind != "file" else "gene"
        return SourceCheck("unknown", f"{what} has no file to check")

    st = cache.stat(path)
    if isinstance(st, OSError):
        if _is_gone(st):
            return SourceCheck("missing", f"{path} no longer exists")
        return SourceCheck("unknown", f"cannot stat {path}: {st.strerror or st}")
    if not stat_mod.S_ISREG(st.st_mode):
        return SourceCheck("missing", f"{path} is no longer a regular file")

    recorded_hash = _normal_hash(prov.source_hash) if prov.source_hash else None
    recorded_mtime = prov.source_mtime
    if recorded_hash is None and recorded_mtime is None:
        return SourceCheck("unknown", f"no mtime or hash of {path} was recorded at ingest")

    # ingest may record st_mtime or st_mtime_ns / 1e9, which differ in the last
    # bits of a double; anything within a microsecond is the same stamp
    mtime_same = recorded_mtime is not None and abs(st.st_mtime_ns / 1e9 - recorded_mtime) <= _MTIME_TOLERANCE_S
    indexed_at = prov.observed_at or prov.last_verified_at
    racy = mtime_same and (not indexed_at or st.st_mtime >= indexed_at - _RACY_WINDOW_S)
    if mtime_same and not racy:
        return SourceCheck("unchanged", "mtime matches ingest")

    if recorded_hash is None:
        # mtime moved (or is racy) and there is no content hash to settle it
        if mtime_same:
            return SourceCheck("unknown", f"{path} was written around ingest time and no hash was recorded")
        return SourceCheck("changed", f"mtime of {path} moved since ingest and no hash was recorded to compare")

    digest = cache.sha256(path)
    if isinstance(digest, OSError):
        if _is_gone(digest):
            return SourceCheck("missing", f"{path} no longer exists")
        return SourceCheck("unknown", f"cannot read {path}: {digest.strerror or digest}")
    if digest == recorded_hash:
        why = "mtime moved" if not mtime_same else "mtime unchanged"
        return SourceCheck("unchanged", f"content hash matches ingest ({why})")
    return SourceCheck("changed", f"content of {path} differs from what was indexed")


# --------------------------------------------------------------------------- coordinate confidence

# weights of the kinds of path token a query can name: an exact file or a path
# fragment pins the answer down; a bare name (a directory or a file stem) less;
# an extension hardly at all.
_W_FILE = 1.0
_W_NAME = 0.6
_W_EXT = 0.2
_EXT_RE = re.compile(r"^\.[a-z0-9_+-]{1,10}$")
_STRIP = " \t\r\n\"'`()[]{}<>,;:!?"
_WRITTEN_PATH_RE = re.compile(r"[\w.~:-]*(?:/[\w.-]+)+/?")


@dataclass(frozen=True)
class _Token:
    text: str
    kind: str  # file | path | name | ext
    weight: float


def _norm_path(path: str) -> str:
    p = path.replace("\\", "/").lower()
    while "//" in p:
        p = p.replace("//", "/")
    return p


def _classify(raw: str) -> _Token | None:
    t = _norm_path(raw.strip(_STRIP))
    while t.startswith("./"):
        t = t[2:]
    if not t.strip("./~"):
        return None  # ".", "..", "/", "~": where the user stands, not a coordinate
    if "/" in t.strip("/"):
        return _Token(t.strip("/"), "path", _W_FILE)
    t = t.strip("/")
    if _EXT_RE.match(t):
        return _Token(t, "ext", _W_EXT)
    if "." in t.strip("."):
        return _Token(t, "file", _W_FILE)
    return _Token(t.strip("."), "name", _W_NAME)


def _written_paths(query: QuerySignals, token_texts: set[str]) -> tuple[list[str], set[str]]:
    """Whole paths as written in the query ("retrieve/fusion.py"), when the
    extractor passed on only their segments; kept only if their last segment is
    one of the path tokens.

    Returns (paths, prose segments). Slash-joined words with no extension and
    no anchor ("and/or", "client/server", "read/write") are prose, not paths:
    their segments are dropped rather than counted as directories.
    """
    paths: list[str] = []
    prose: set[str] = set()
    for match in _WRITTEN_PATH_RE.finditer(_norm_path(query.text)):
        raw = match.group(0)
        text = raw.rstrip("/")
        # "~/", "./" and "../" say where the user stands, not where the file is:
        # keep the part that can be matched as a suffix of an indexed path
        text = re.sub(r"^(?:~/|\./|\.\./)+", "", text).strip("/")
        if "/" not in text:
            continue
        segments = text.split("/")
        if segments[-1] not in token_texts:
            continue
        if segments[0].endswith(":") and len(segments[0]) > 2:
            continue  # a URL ("https://…"), not a place on disk; a drive ("c:") is
        anchored = raw.startswith(("/", "./", "../", "~")) or ":" in segments[0]
        if "." in segments[-1].strip(".") or anchored or len(segments) > 2:
            paths.append(text)
        else:
            prose.update(segments)
    return paths, prose


def _query_tokens(query: QuerySignals) -> list[_Token]:
    seen: dict[str, _Token] = {}
    for raw in query.path_tokens:
        tok = _classify(raw)
        if tok is not None and tok.text not in seen:
            seen[tok.text] = tok
    if seen:
        written, prose = _written_paths(query, set(seen))
        for text in prose:
            if seen.get(text) is not None and seen[text].kind == "name":
                del seen[text]
        for text in written:
            seen.setdefault(text, _Token(text, "path", _W_FILE))
    tokens = list(seen.values())
    strong = [t for t in tokens if t.kind in ("file", "path")]
    # a file name that ends a path written out in full is counted by that path
    path_bases = {t.text.rsplit("/", 1)[-1] for t in strong if t.kind == "path"}
    implied_ext = {"." + t.text.rsplit(".", 1)[1] for t in strong if "." in t.text.rsplit("/", 1)[-1]}
    implied_names: set[str] = set()
    for t in strong:
        parts = t.text.split("/")
        implied_names.update(parts)
        base = parts[-1]
        if "." in base:
            implied_names.add(base.split(".", 1)[0])
    out = []
    for t in tokens:
        if t.kind == "file" and t.text in path_bases:
            continue  # "fusion.py" split out of "retrieve/fusion.py"
        if t.kind == "ext" and t.text in implied_ext:
            continue  # "server.py" already says ".py"
        if t.kind == "name" and (t.text in implied_names or ("." + t.text) in implied_ext):
            continue  # "server" or "py" split out of "server.py" / "src/server.py"
        out.append(t)
    return out


def _covers(token: _Token, path: str) -> bool:
    p = _norm_path(path).rstrip("/")
    parts = [s for s in p.split("/") if s]
    if not parts:
        return False
    base = parts[-1]
    if token.kind == "path":
        return p == token.text or p.endswith("/" + token.text) or f"/{token.text}/" in f"/{p}/"
    if token.kind == "file":
        return base == token.text
    if token.kind == "ext":
        return base.endswith(token.text)
    # a bare name: a directory on the path, the file's stem, or an extension without its dot
    stem = base.split(".", 1)[0]
    return token.text in parts or token.text == stem or base.endswith("." + token.text)


def _item_path(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, ScoredGene):
        return item.gene.source_path
    if isinstance(item, Gene):
        return item.source_path
    return getattr(item, "source_id", None)


def _coverage(query: QuerySignals, items: Iterable[Any]) -> tuple[float, list[str]]:
    tokens = _query_tokens(query)
    if not tokens:
        return 1.0, []
    paths = [p for p in (_item_path(i) for i in items) if p]
    total = sum(t.weight for t in tokens)
    covered = 0.0
    missing: list[str] = []
    for t in tokens:
        if any(_covers(t, p) for p in paths):
            covered += t.weight
        elif t.kind in ("file", "path", "name"):
            missing.append(t.text)
    return covered / total, missing


def coordinate_confidence(query: QuerySignals, items: Iterable[Any]) -> float:
    """How well the delivered items' source paths cover the paths the query names.

    Weighted share of the query's path tokens (file names and path fragments
    1.0, bare directory names / stems 0.6, extensions 0.2) found among the
    items' source paths; tokens implied by a longer one ("py" and "server" by
    "server.py") are not counted twice. 1.0 when the query names no path.
    ``items``: ScoredGene, Gene, PacketItem or plain path strings.
    """
    return _coverage(query, items)[0]


def uncovered_path_tokens(query: QuerySignals, items: Iterable[Any]) -> list[str]:
    """The files / paths / names the query mentions that no item comes from."""
    return _coverage(query, items)[1]


# --------------------------------------------------------------------------- packet


@dataclass(frozen=True)
class PacketItem:
    gene_id: str
    source_id: str | None  # the source path, None for non-file genes
    start_line: int
    end_line: int
    src: str  # "path:a-b"
    verdict: str  # verified | stale_risk | needs_refresh
    live_truth: float
    freshness: float
    authority: float
    specificity: float
    source_check: str  # unchanged | changed | missing | unknown
    score: float
    signals: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    preview: str = ""
    symbol: str | None = None  # the function / method / class that matched (its span is start..end)
    kind: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "gene_id": self.gene_id,
            "source_id": self.source_id,
            "symbol": self.symbol,
            "kind": self.kind,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "src": self.src,
            "verdict": self.verdict,
            "live_truth": round(self.live_truth, 4),
            "freshness": round(self.freshness, 4),
            "authority": round(self.authority, 4),
            "specificity": round(self.specificity, 4),
            "source_check": self.source_check,
            "score": round(float(self.score), 4),
            "signals": {k: round(float(v), 4) for k, v in self.signals.items()},
            "reason": self.reason,
            "preview": self.preview,
        }


@dataclass(frozen=True)
class RefreshTarget:
    target_kind: str  # file | gene | query
    source_id: str | None  # a path (file), a gene id (gene), a path to ingest or None (query)
    reason: str
    priority: int  # 1 = most urgent

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_kind": self.target_kind,
            "source_id": self.source_id,
            "reason": self.reason,
            "priority": self.priority,
        }


@dataclass(frozen=True)
class Packet:
    query: str
    task_type: str
    verified: tuple[PacketItem, ...]
    stale_risk: tuple[PacketItem, ...]  # includes needs_refresh items (their verdict says so)
    refresh_targets: tuple[RefreshTarget, ...]
    notes: tuple[str, ...]
    coordinate_confidence: float
    known_empty: bool
    tier: str
    files: tuple[dict[str, Any], ...] = ()  # with group_by="file": files ranked by their symbols' evidence

    @property
    def needs_refresh(self) -> tuple[PacketItem, ...]:
        return tuple(i for i in self.stale_risk if i.verdict == "needs_refresh")

    @property
    def items(self) -> tuple[PacketItem, ...]:
        return self.verified + self.stale_risk

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "task_type": self.task_type,
            "tier": self.tier,
            "known_empty": self.known_empty,
            "coordinate_confidence": round(self.coordinate_confidence, 4),
            "verified": [i.to_dict() for i in self.verified],
            "stale_risk": [i.to_dict() for i in self.stale_risk],
            "refresh_targets": [t.to_dict() for t in self.refresh_targets],
            "notes": list(self.notes),
            **({"files": list(self.files)} if self.files else {}),
        }


def validate_task_type(task_type: str) -> str:
    """Normalise a task type; ValueError naming the valid ones otherwise."""
    name = task_type.strip().lower() if isinstance(task_type, str) else ""
    if name not in _TASK_FACTOR:
        raise ValueError(f"unknown task_type {task_type!r}; valid task types: {', '.join(TASK_TYPES)}")
    return name


def verified_threshold(task_type: str, settings: WeighSettings) -> float:
    """The live_truth an item needs to be "verified" for this task."""
    settings = _weigh_settings(settings)
    return min(1.0, settings.verified_threshold * _TASK_FACTOR[validate_task_type(task_type)])


def _weigh_settings(settings: Any) -> WeighSettings:
    # accept the whole Settings object too, so callers cannot pass the wrong layer by accident
    inner = getattr(settings, "weigh", None)
    return inner if isinstance(inner, WeighSettings) else settings


def _age_text(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _preview(text: str) -> str:
    if len(text) <= _PREVIEW_CHARS:
        return text
    return text[:_PREVIEW_CHARS].rstrip() + "…"


def _weigh_item(
    sg: ScoredGene,
    task: str,
    threshold: float,
    settings: WeighSettings,
    now: float,
    cache: SourceCache,
    cap: str | None,
) -> PacketItem:
    gene = sg.gene
    check = check_source(gene, cache)
    # A byte-for-byte match with the file just now is a re-verification for
    # sources whose file *is* the truth (code, docs, config: stable / medium).
    # A hot source (a log, a status dump) goes stale because the world moves on,
    # not because the file is edited, so it keeps its ingest age.
    reverified = check.status == "unchanged" and gene.provenance.volatility_class in ("stable", "medium")
    fr = freshness(gene, now, settings, verified_at=now if reverified else None)
    au = authority(gene)
    sp = specificity(gene)
    lt = fr * au * sp

    if check.status == "changed":
        verdict, reason = "needs_refresh", f"source changed since ingest: {check.detail}"
    elif check.status == "missing":
        verdict, reason = "needs_refresh", f"source is gone: {check.detail}"
    elif lt >= threshold:
        verdict = "verified"
        how = "source re-checked unchanged" if check.status == "unchanged" else f"source not checkable ({check.detail})"
        reason = f"live_truth {lt:.2f} >= {threshold:.2f} for {task}; {how}"
    else:
        verdict = "stale_risk"
        seen = _verified_at(gene)
        age = f"{_age_text(max(0.0, now - seen))} since last verified" if seen else "never verified"
        parts = []
        if fr < 0.999:
            parts.append(f"{gene.provenance.volatility_class} source, {age}")
        if au < 1.0:
            parts.append(f"{gene.provenance.authority_class} content")
        reason = f"live_truth {lt:.2f} < {threshold:.2f} for {task}" + (f" ({'; '.join(parts)})" if parts else "")

    if verdict == "verified" and check.status == "unknown" and task in _NEEDS_CHECKED_SOURCE:
        verdict = "stale_risk"
        reason = f"{task} needs a source checked live, and this one cannot be: {check.detail}"
    if verdict == "verified" and cap is not None:
        # a reason about the whole answer (off-target coordinates, abstention)
        verdict = "stale_risk"
        reason = cap

    return PacketItem(
        gene_id=gene.gene_id,
        source_id=gene.source_path,
        start_line=gene.start_line,
        end_line=gene.end_line,
        src=gene.src,
        verdict=verdict,
        live_truth=lt,
        freshness=fr,
        authority=au,
        specificity=sp,
        source_check=check.status,
        score=float(sg.score),
        signals=dict(sg.signals),
        reason=reason,
        preview=_preview(gene.content),
    )


def refresh_targets(
    items: "Packet | Iterable[PacketItem]",
    *,
    uncovered_paths: Iterable[str] = (),
    query_text: str = "",
    known_empty: bool = False,
) -> tuple[RefreshTarget, ...]:
    """The refresh plan, most urgent first, one target per source.

    Given a Packet, returns its plan. Given items: changed / missing files →
    "file" targets, priority 1; stale_risk items → their file (or, without a
    file, the gene) at priority 2; paths the query names that nothing came from
    (``uncovered_paths``) → "query" targets at priority 3. With ``known_empty``
    and no uncovered path, one "query" target for the query as a whole.
    A file named by several items appears once, at its most urgent priority.
    """
    if isinstance(items, Packet):
        return items.refresh_targets
    best: dict[tuple[str, str | None], RefreshTarget] = {}

    def add(target: RefreshTarget) -> None:
        key = (target.target_kind, target.source_id)
        old = best.get(key)
        if old is None or target.priority < old.priority:
            best[key] = target

    for item in items:
        if item.verdict == "needs_refresh":
            if item.source_check == "missing":
                why = "source file is gone; restore it or re-ingest its folder so its genes are retired"
            else:
                why = "source file changed since ingest; re-ingest it before using these lines"
            add(RefreshTarget("file", item.source_id, why, 1) if item.source_id
                else RefreshTarget("gene", item.gene_id, why, 1))
        elif item.verdict == "stale_risk" and not item.reason.startswith(_QUERY_LEVEL_PREFIXES):
            why = f"stale: {item.reason}; re-read the source or re-ingest it to re-verify"
            if item.source_id:
                add(RefreshTarget("file", item.source_id, why, 2))
            else:
                add(RefreshTarget("gene", item.gene_id, why, 2))
    for path in uncovered_paths:
        add(RefreshTarget(
            "query", path,
            f"the query names {path!r} but nothing indexed comes from it; ingest the file or folder that holds it",
            1 if known_empty else 3,
        ))
    if known_empty and not any(t.target_kind == "query" for t in best.values()):
        what = f" for {query_text!r}" if query_text else ""
        add(RefreshTarget(
            "query", None,
            f"nothing relevant is indexed{what}; ingest the files that hold the answer or broaden the query",
            1,
        ))
    return tuple(sorted(best.values(), key=lambda t: t.priority))



def weigh_retrieval(
    retrieval: Retrieval,
    task_type: str,
    settings: WeighSettings,
    now: float | None = None,
) -> Packet:
    """Turn a retrieval into the agent-facing packet for ``task_type``.

    ValueError (listing the valid task types) for an unknown task type. Each
    source file is stat'ed — and hashed only when its mtime moved or it was
    written right around ingest — at most once per call.

    An abstaining or empty retrieval gives ``known_empty=True`` with a note and a
    "query" refresh target. Items that an abstaining retrieval still carried are
    listed, but never as verified.
    """
    task = validate_task_type(task_type)
    settings = _weigh_settings(settings)
    now = time.time() if now is None else now
    threshold = verified_threshold(task, settings)
    query = retrieval.query
    items = tuple(retrieval.items)
    known_empty = not items or retrieval.tier == "abstain"
    notes: list[str] = []

    conf, uncovered = _coverage(query, items)
    low_coordinates = conf < settings.coordinate_floor
    # an item that is itself at a coordinate the query names is on target even
    # when the answer as a whole misses most of them
    named_tokens = [t for t in _query_tokens(query) if t.kind != "ext"]
    cache = SourceCache()
    weighed: list[PacketItem] = []
    for sg in items:
        cap = None
        path = sg.gene.source_path
        if known_empty:
            cap = f"{_ABSTAIN_PREFIX} retrieval judged nothing relevant enough; this item is a weak lead only"
        elif low_coordinates and not (path and any(_covers(t, path) for t in named_tokens)):
            cap = (
                f"{_OFF_TARGET_PREFIX} the query names {', '.join(uncovered) or 'other paths'} but this item comes "
                f"from {path or 'no file'} (coordinate confidence {conf:.2f} < {settings.coordinate_floor:.2f})"
            )
        weighed.append(_weigh_item(sg, task, threshold, settings, now, cache, cap))

    verified = tuple(i for i in weighed if i.verdict == "verified")
    stale = tuple(i for i in weighed if i.verdict != "verified")
    n_refresh = sum(1 for i in stale if i.verdict == "needs_refresh")

    if known_empty:
        named = f" (the query names {', '.join(uncovered)})" if uncovered else ""
        notes.append(
            "known empty: nothing relevant is indexed for this query"
            + named
            + ". Ingest the files that hold the answer (helix ingest PATH) or broaden the query."
        )
    else:
        notes.append(
            f"{len(verified)} verified, {len(stale) - n_refresh} stale_risk, {n_refresh} needs_refresh "
            f"for task {task!r} (verified needs live_truth >= {threshold:.2f})"
        )
    if n_refresh:
        notes.append(
            f"{n_refresh} item(s) come from files that changed or vanished since ingest; "
            "do not use their text: re-read those files or re-ingest them"
        )
    if uncovered and not known_empty:
        notes.append(
            f"the query names {', '.join(uncovered)} but no delivered item comes from "
            + ("it" if len(uncovered) == 1 else "them")
            + (f"; coordinate confidence {conf:.2f} is below {settings.coordinate_floor:.2f}, so verdicts were downgraded"
               if low_coordinates else "")
        )
    if items and not verified and not n_refresh and not known_empty:
        notes.append("nothing here is verified for this task; treat every item as a lead to re-read, not as fact")

    targets = refresh_targets(
        weighed,
        uncovered_paths=uncovered if (low_coordinates or known_empty) else (),
        query_text=query.text,
        known_empty=known_empty,
    )
    return Packet(
        query=query.text,
        task_type=task,
        verified=verified,
        stale_risk=stale,
        refresh_targets=targets,
        notes=tuple(notes),
        coordinate_confidence=conf,
        known_empty=known_empty,
        tier=retrieval.tier,
    )
