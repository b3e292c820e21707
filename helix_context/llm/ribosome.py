"""The ribosome: an optional small-LLM helper, and session consolidation.

The data path is LLM-free; the ribosome only ever *adds* to it:

- query expansion — a few extra search terms for a chat's retrieval;
- consolidation summaries — a short digest of a session's exchanges.

It is off by default (``[ribosome] enabled``), talks to the same upstream as the
proxy through :class:`helix_context.llm.upstream.UpstreamClient`, and honours the pause
switch (``helix.ribosome_state()["paused"]`` — a signal file, so pause/resume
survive restarts). Every call has ``[ribosome] timeout_s`` and, on any failure,
returns ``None`` / ``[]`` so the caller takes its LLM-free path.

:func:`consolidate` distils the session buffer into genes: LLM-free by default
(compact "session notes"), with a ribosome summary when one is available.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from helix_context.config import Settings
from helix_context.llm.profiles import num_ctx_for, profile
from helix_context.llm.upstream import UpstreamClient
from helix_context.tokens import count_tokens

if TYPE_CHECKING:  # typing only: the manager sits above this wing and is passed in; nothing here calls its module
    from helix_context.manager import HelixContextManager

log = logging.getLogger("helix.ribosome")

_EXPAND_PROMPT = ("List up to 6 short search keywords or synonyms (identifiers, file names, technical terms) "
                  "that would help find documents answering the question. Answer with the keywords only, "
                  "comma-separated, no explanation.")
_SUMMARY_PROMPT = ("Summarise this conversation between a user and an assistant as compact notes for later "
                   "retrieval: the questions asked, the facts, decisions, names, paths and numbers established. "
                   "Use short bullet points. No preamble.")
_WORD_RE = re.compile(r"[\w./:-]+")


class Ribosome:
    """LLM helper calls with a timeout and a fallback; available only when enabled, not paused, with a model."""

    def __init__(self, settings: Settings, upstream: UpstreamClient,
                 state: Callable[[], dict[str, Any]]) -> None:
        self.settings = settings
        self.upstream = upstream
        self._state = state
        self.calls = 0
        self.failures = 0

    @property
    def model(self) -> str:
        return (self.settings.ribosome.model or self.settings.proxy.default_model or "").strip()

    def available(self) -> bool:
        if not self.settings.ribosome.enabled or not self.model:
            return False
        try:
            return not self._state().get("paused", False)
        except Exception as exc:  # an unreadable signal file means "don't"
            log.warning("cannot read the ribosome state (%s); treating it as paused", exc)
            return False

    async def _ask(self, system: str, user: str, max_tokens: int) -> str | None:
        if not self.available():
            return None
        model = self.model
        prof = profile(model, self.settings.assembly.small_model_max_params_b)
        if prof.no_think:
            system = f"{system}\n/no_think"
        payload = {"model": model, "temperature": 0.0, "max_tokens": max_tokens,
                   "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
        num_ctx = num_ctx_for(count_tokens(system) + count_tokens(user), max_tokens)
        self.calls += 1
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.settings.ribosome.timeout_s):
                data, answer = await self.upstream.chat(payload, num_ctx=num_ctx)
        except TimeoutError:
            self.failures += 1
            log.info("ribosome timed out after %.1f s; using the LLM-free path", self.settings.ribosome.timeout_s)
            return None
        except Exception as exc:  # upstream down, bad answer, …: the caller falls back
            self.failures += 1
            log.info("ribosome call failed (%s); using the LLM-free path", exc)
            return None
        text = _strip_think(answer.text).strip()
        log.debug("ribosome answered in %.2f s", time.perf_counter() - started)
        return text or None

    async def expand_query(self, query: str) -> list[str]:
        """A few extra retrieval terms, or [] (off, paused, timed out, failed)."""
        text = await self._ask(_EXPAND_PROMPT, query[:2000], 48)
        if not text:
            return []
        seen = {w.lower() for w in _WORD_RE.findall(query)}
        terms: list[str] = []
        for piece in re.split(r"[,\n;]+", text):
            term = piece.strip().strip("-*•\"'`").strip()
            if term and len(term) <= 60 and term.lower() not in seen:
                seen.add(term.lower())
                terms.append(term)
        return terms[:6]

    async def summarize(self, exchanges: Sequence[tuple[str, str]]) -> str | None:
        """A digest of (role, content) exchanges, or None (off, paused, timed out, failed)."""
        transcript = "\n".join(f"{role.upper()}: {_clip(content, 1200)}" for role, content in exchanges)
        return await self._ask(_SUMMARY_PROMPT, _clip(transcript, 12_000), 400)


def _strip_think(text: str) -> str:
    return re.sub(r"<think>.*?</think>", "", text or "", flags=re.S)


def _clip(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ── consolidation ───────────────────────────────────────────────────────────────

MAX_EXCHANGES_PER_NOTE = 40


def session_notes(session_id: str, exchanges: Sequence[tuple[str, str]]) -> str:
    """LLM-free notes: every question, and the start of every answer, one compact line each."""
    lines = [f"# Session notes: {session_id}", ""]
    for role, content in exchanges:
        if role == "user":
            lines.append(f"- Q: {_clip(content, 300)}")
        elif role == "assistant":
            lines.append(f"  A: {_clip(content, 500)}")
        else:
            lines.append(f"  {role}: {_clip(content, 200)}")
    return "\n".join(lines) + "\n"


@dataclass
class ConsolidationReport:
    sessions: int = 0
    exchanges: int = 0
    genes_added: int = 0
    method: dict[str, str] = field(default_factory=dict)  # session → "notes" | "ribosome"
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "exchanges": self.exchanges, "genes_added": self.genes_added,
                "method": self.method, "seconds": round(self.seconds, 3)}


def _safe(session_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", session_id)[:80] or "session"


async def consolidate(helix: HelixContextManager, ribosome: Ribosome | None = None, *,
                      limit: int = 2000) -> ConsolidationReport:
    """Distil pending session-buffer rows into one "session notes" gene per session (and batch).

    Genes carry source_kind "session", authority_class "inferred", volatility_class
    "medium", and a path ``sessions/<id>/<first-row>-<last-row>.md`` (a new path per
    batch, so earlier notes are kept). Rows are marked consolidated only after their
    gene is written.
    """
    started = time.perf_counter()
    report = ConsolidationReport()
    pending = await anyio.to_thread.run_sync(helix.genome.pending_exchanges, limit)
    by_session: dict[str, list[tuple[int, str, str]]] = {}
    for row_id, session_id, role, content in pending:
        by_session.setdefault(session_id, []).append((row_id, role, content))
    use_ribosome = ribosome is not None and ribosome.available()
    for session_id, rows in by_session.items():
        for start in range(0, len(rows), MAX_EXCHANGES_PER_NOTE * 2):
            batch = rows[start:start + MAX_EXCHANGES_PER_NOTE * 2]
            exchanges = [(role, content) for _, role, content in batch]
            text = None
            method = "notes"
            if use_ribosome:
                summary = await ribosome.summarize(exchanges)  # type: ignore[union-attr]
                if summary:
                    questions = "\n".join(f"- Q: {_clip(c, 200)}" for r, c in exchanges if r == "user")
                    text = f"# Session summary: {session_id}\n\n{summary}\n\nQuestions:\n{questions}\n"
                    method = "ribosome"
                else:  # timed out or failed: don't make every remaining session wait for it too
                    use_ribosome = False
            if text is None:
                text = session_notes(session_id, exchanges)
            metadata = {"path": f"sessions/{_safe(session_id)}/{batch[0][0]}-{batch[-1][0]}.md",
                        "source_kind": "session", "authority_class": "inferred", "volatility_class": "medium"}
            ingest = await anyio.to_thread.run_sync(
                functools.partial(helix.ingest, text, content_type="text", metadata=metadata))
            await anyio.to_thread.run_sync(helix.genome.mark_consolidated, [row_id for row_id, _, _ in batch])
            report.genes_added += getattr(ingest, "genes_added", 0)
            report.exchanges += len(batch)
            report.method[session_id] = method
        report.sessions += 1
    if pending:  # their text lives on in the notes genes: the buffer keeps no second copy
        await anyio.to_thread.run_sync(helix.genome.delete_consolidated)
    report.seconds = time.perf_counter() - started
    return report


__all__ = ["Ribosome", "consolidate", "session_notes", "ConsolidationReport"]
