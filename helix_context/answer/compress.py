"""Compress one gene's text for its content type, offline, keeping every critical token.

headroom-ai does the compressing, one compressor per content type, called
directly (its one-call router barely compresses offline):

    code      CodeAwareCompressor (tree-sitter; Kompress fallback and CCR off)
    log       LogCompressor (max_errors raised so ERROR lines stay; CCR off)
    diff      DiffCompressor (CCR off)
    json      SmartCrusher (with the query; CCR markers off)
    markdown  TextCrusher (extractive, order-neutral, query-weighted)
    text      TextCrusher
    config    pass-through, chosen by measurement: TextCrusher keeps about half
              the lines, the critical-token floor then puts back nearly every
              key = value line (a TOML file: 254 -> 231 tokens, a YAML file:
              133 -> 119), and the result has lost its [section] / parent-key
              lines and YAML indentation; the unchanged file is worth the ~10 %

Critical-token floor: the tokens `critical_tokens` finds in the input (paths,
identifiers, numbers, hex, versions, URLs, key=value pairs) that the compressor
dropped are put back by re-inserting the input lines (sentences, for prose) that
held them, in source order, with "…" marking elided stretches. For Python that
parsed before, the result must still parse: restored lines go in as comments
when they would not parse as code. If the result is not smaller than the input,
the input is returned.

headroom is imported lazily on first use, after the offline environment
variables are set (HEADROOM_OFFLINE, HF_HUB_OFFLINE, HEADROOM_CCR_BACKEND=memory,
HEADROOM_TELEMETRY=off, HEADROOM_TOIN_BACKEND=none, TIKTOKEN_CACHE_DIR). litellm
is never imported, and nothing that needs a model hub (Kompress) is ever built.
When headroom is disabled, missing or raises, the text is truncated to
max_tokens (or passed through); `compress` never raises.

This module drives headroom; the floor's parts live beside it: `compress_critical` (which
tokens), `compress_restore` (putting lines back), `compress_python` (keeping Python parseable),
`compress_fit` (the max_tokens cut).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from helix_context.answer.compress_critical import contains_token, critical_for, critical_tokens
from helix_context.answer.compress_fit import fit_to_budget
from helix_context.answer.compress_python import PY_LANGS, parses, py_closure, python_prefix
from helix_context.answer.compress_restore import commented, marker_for, restore, split_units
from helix_context.tokens import count_tokens, ensure_tiktoken_cache_env, truncate_to_tokens

log = logging.getLogger(__name__)

__all__ = ["SMALL_TOKENS", "Compressed", "Compressor", "critical_tokens"]

# inputs under this many tokens pass through unchanged
SMALL_TOKENS = 60


@dataclass(frozen=True)
class Compressed:
    text: str
    # headroom:code|log|diff|json|text (a max_tokens cut keeps the name), "truncate"
    # (plain cut: headroom off / failed, or a pass-through input over max_tokens), "none"
    method: str
    original_tokens: int
    tokens: int
    critical_total: int  # critical tokens in the input
    critical_kept_raw: int  # kept by the compressor itself, before restoration
    critical_kept: int  # after restoration (== critical_total unless max_tokens forced a cut)


# --------------------------------------------------------------------------- #
# the compressor
# --------------------------------------------------------------------------- #

_OFFLINE_ENV = {
    "HEADROOM_OFFLINE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HEADROOM_CCR_BACKEND": "memory",
    "HEADROOM_TELEMETRY": "off",
    "HEADROOM_TOIN_BACKEND": "none",  # TOIN learning stays in memory: no ~/.headroom/toin.json
}


def set_offline_env() -> None:
    """The environment headroom needs to run without a network; set before importing it."""
    for key, value in _OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    ensure_tiktoken_cache_env()


def _env_disabled() -> bool:
    return os.environ.get("HELIX_DISABLE_HEADROOM", "").strip().lower() in ("1", "true", "yes", "on")


_PY_PROBE = '''import os


def probe_function(alpha_value: int, beta_value: int) -> int:
    """Add two numbers after some checks."""
    total_sum = alpha_value + beta_value
    if total_sum > 100:
        total_sum = total_sum - 100
    for index_value in range(10):
        total_sum += index_value
        total_sum -= index_value
    result_value = total_sum * 2
    result_value = result_value // 2
    return result_value


def other_function(name_value: str) -> str:
    """Return the name."""
    cleaned_name = name_value.strip()
    cleaned_name = cleaned_name.lower()
    if not cleaned_name:
        cleaned_name = "anonymous"
    for _ in range(3):
        cleaned_name = cleaned_name.replace("  ", " ")
    return cleaned_name
'''


class Compressor:
    """Per-content-type compression with a critical-token floor. Thread-safe;
    build one per process and reuse it."""

    def __init__(self, use_headroom: bool = True) -> None:
        self._use = bool(use_headroom)
        self._lock = threading.RLock()
        self._detected = False
        self._available = False
        self._reason = ""
        self._code_ok = False
        self.import_seconds: float | None = None
        self.version: str | None = None
        self._impl: dict[str, Any] = {}
        self._call_locks: dict[str, threading.Lock] = {}
        if not self._use:
            self._detected = True
            self._reason = "disabled by settings (assembly.headroom = false / HELIX_DISABLE_HEADROOM=1)"
        elif _env_disabled():
            self._use = False
            self._detected = True
            self._reason = "disabled by HELIX_DISABLE_HEADROOM"

    # ---- availability -------------------------------------------------------

    @property
    def available(self) -> bool:
        self._detect()
        return self._available

    @property
    def reason(self) -> str:
        self._detect()
        return self._reason

    def info(self) -> dict[str, Any]:
        """For /health."""
        self._detect()
        return {
            "available": self._available,
            "reason": self._reason,
            "version": self.version,
            "code_compression": self._code_ok,
            "import_seconds": self.import_seconds,
        }

    def _detect(self) -> None:
        if self._detected:
            return
        with self._lock:
            if self._detected:
                return
            try:
                self._load()
            except ImportError as exc:
                self._available = False
                self._reason = f"headroom-ai not installed ({exc})"
                log.info("headroom unavailable: %s", self._reason)
            except Exception as exc:  # a broken install must not take the server down
                self._available = False
                self._reason = f"headroom-ai failed to load: {type(exc).__name__}: {exc}"
                log.warning("headroom unavailable: %s", self._reason)
            finally:
                self._detected = True

    def _load(self) -> None:
        set_offline_env()
        started = time.perf_counter()
        import headroom  # slow: ~0.1 s; SmartCrusher's import adds ~0.6 s, done on first JSON)
        from headroom.transforms.code_compressor import CodeAwareCompressor, CodeCompressorConfig
        from headroom.transforms.diff_compressor import DiffCompressor, DiffCompressorConfig
        from headroom.transforms.log_compressor import LogCompressor, LogCompressorConfig
        from headroom.transforms.text_crusher import TextCrusher, TextCrusherConfig

        self.version = getattr(headroom, "__version__", None)
        self._impl["code"] = CodeAwareCompressor(
            CodeCompressorConfig(
                enable_ccr=False, fallback_to_kompress=False, min_tokens_for_compression=SMALL_TOKENS
            )
        )
        self._impl["log"] = LogCompressor(
            LogCompressorConfig(max_errors=1000, max_warnings=50, max_stack_traces=20, enable_ccr=False)
        )
        self._impl["diff"] = DiffCompressor(DiffCompressorConfig(enable_ccr=False))
        # retrieved passages have no recency: weigh sentences by the query, not by position
        self._impl["text"] = TextCrusher(TextCrusherConfig(w_recency=0.0))
        self.import_seconds = round(time.perf_counter() - started, 4)

        probe = self._impl["code"].compress(_PY_PROBE, language="python")
        self._code_ok = probe.compressed != _PY_PROBE
        self._available = True
        self._reason = (
            "ok" if self._code_ok else "ok, but code passes through (tree-sitter missing: install headroom-ai[code])"
        )
        log.info("headroom %s loaded in %.3f s (%s)", self.version, self.import_seconds, self._reason)

    def warm_up(self) -> None:
        """Load everything now (SmartCrusher's import alone takes ~0.5 s), e.g. in a
        background thread at server start, so no request pays for it."""
        if self.available:
            try:
                self._smart_crusher()
            except Exception as exc:
                log.warning("headroom SmartCrusher failed to load: %s", exc)

    def _smart_crusher(self) -> Any:
        sc = self._impl.get("json")
        if sc is None:
            with self._lock:
                sc = self._impl.get("json")
                if sc is None:
                    started = time.perf_counter()
                    from headroom.config import CCRConfig
                    from headroom.transforms.smart_crusher import SmartCrusher

                    sc = SmartCrusher(ccr_config=CCRConfig(enabled=False, inject_retrieval_marker=False))
                    self._impl["json"] = sc
                    log.info("headroom SmartCrusher loaded in %.3f s", time.perf_counter() - started)
        return sc

    # ---- compressing --------------------------------------------------------

    def compress(
        self,
        text: str,
        content_type: str,
        language: str | None = None,
        *,
        query: str = "",
        max_tokens: int | None = None,
    ) -> Compressed:
        """Compress text for its content type; never raises."""
        text = text or ""
        try:
            return self._compress(text, content_type, language, query or "", max_tokens)
        except Exception:
            log.exception("compression of a %s gene failed; falling back to truncation", content_type)
            try:
                return self._plain(text, max_tokens, critical_tokens(text), count_tokens(text))
            except Exception:
                log.exception("fallback truncation failed")
                n = len(text) // 4
                return Compressed(text, "none", n, n, 0, 0, 0)

    def _plain(self, text: str, max_tokens: int | None, crit: list[str], original: int) -> Compressed:
        if max_tokens is not None and original > max_tokens:
            out = truncate_to_tokens(text, max(0, max_tokens))
            kept = sum(1 for t in crit if contains_token(out, t))
            return Compressed(out, "truncate", original, count_tokens(out), len(crit), kept, kept)
        return Compressed(text, "none", original, original, len(crit), len(crit), len(crit))

    def _compress(
        self, text: str, content_type: str, language: str | None, query: str, max_tokens: int | None
    ) -> Compressed:
        ctype = (content_type or "text").lower()
        original = count_tokens(text)
        crit = critical_for(text, ctype)
        is_python = ctype == "code" and (language or "").lower() in PY_LANGS
        marker = marker_for(ctype, language)

        if not self.available:
            return self._plain(text, max_tokens, crit, original)
        py_ok = is_python and parses(text)
        # Python that does not parse is passed through: headroom would return it
        # unchanged anyway, and its process-wide syntax breaker counts each such
        # call as a failure and pauses Python compression after a few of them
        if original < SMALL_TOKENS or ctype == "config" or not text.strip() or (is_python and not py_ok):
            if max_tokens is not None and original > max_tokens:
                return self._cut(text, text, "none", original, crit, len(crit), query, max_tokens, marker, py_ok)
            return Compressed(text, "none", original, original, len(crit), len(crit), len(crit))

        raw, method, detected_python = self._run_headroom(text, ctype, language, query)
        py_input_ok = py_ok or (detected_python and parses(text))

        check_raw = raw.replace("\\n", "\n") if ctype == "json" else raw
        lost = [t for t in crit if not contains_token(check_raw, t)]
        kept_raw = len(crit) - len(lost)

        out = raw
        if lost or ctype == "markdown":
            units = split_units(text, ctype)
            out = restore(units, raw, lost, ctype, language, expand=py_closure(text) if py_input_ok else None)
            if py_input_ok and not parses(out):
                out = restore(units, raw, lost, ctype, language, render=lambda s: commented(s, ctype, language))
        if py_input_ok and not parses(out):
            log.debug("restored python did not parse; keeping the input")
            out = text

        tokens = count_tokens(out)
        if tokens >= original:
            out, method, tokens = text, "none", original

        if max_tokens is not None and tokens > max_tokens:
            return self._cut(text, out, method, original, crit, kept_raw, query, max_tokens, marker, py_input_ok)
        kept = len(crit) if out is text else sum(1 for t in crit if contains_token(out, t))
        return Compressed(out, method, original, tokens, len(crit), kept_raw, kept)

    def _cut(
        self, text: str, out: str, method: str, original: int, crit: list[str], kept_raw: int,
        query: str, max_tokens: int, marker: str, py_input_ok: bool,
    ) -> Compressed:
        fitted = fit_to_budget(out, max(0, max_tokens), crit, query, marker, keep_first=method == "headroom:json")
        if py_input_ok and not parses(fitted):
            fitted = python_prefix(out, max_tokens) or ""
            if not fitted:  # not even one top-level statement fits: show the start as comments
                fitted = truncate_to_tokens("\n".join("# " + line for line in out.split("\n")), max_tokens)
        if method == "none":
            method = "truncate"
        kept = sum(1 for t in crit if contains_token(fitted, t))
        return Compressed(fitted, method, original, count_tokens(fitted), len(crit), kept_raw, kept)

    def _run_headroom(self, text: str, ctype: str, language: str | None, query: str) -> tuple[str, str, bool]:
        """(compressed text, method, detected-as-python)."""
        if ctype == "code":
            lock = self._call_lock("code")
            with lock:
                r = self._impl["code"].compress(text, language=language, context=query)
            lang = getattr(getattr(r, "language", None), "value", "")
            return r.compressed, "headroom:code", lang == "python"
        if ctype == "log":
            with self._call_lock("log"):
                r = self._impl["log"].compress(text)
            return r.compressed, "headroom:log", False
        if ctype == "diff":
            with self._call_lock("diff"):
                r = self._impl["diff"].compress(text, query)
            return r.compressed, "headroom:diff", False
        if ctype == "json":
            sc = self._smart_crusher()
            with self._call_lock("json"):
                r = sc.crush(text, query=query)
            out = r.compressed
            if out.startswith('"'):  # a top-level array comes back as a JSON string holding the table
                try:
                    decoded = json.loads(out)
                    if isinstance(decoded, str):
                        out = decoded
                except ValueError:
                    pass
            return out.rstrip("\n"), "headroom:json", False
        # markdown, text, and anything unknown: extractive prose
        with self._call_lock("text"):
            r = self._impl["text"].compress(text, query, None)
        return r.compressed, "headroom:text", False

    def _call_lock(self, kind: str) -> threading.Lock:
        lock = self._call_locks.get(kind)
        if lock is None:
            with self._lock:
                lock = self._call_locks.setdefault(kind, threading.Lock())
        return lock
