"""What a metric attribute may carry: bounded label values, finite numbers, and hashed queries.

Why apart: these are the privacy and cardinality rules every recorder follows (no query text
unless asked for, no unbounded label sets from caller-chosen names).
"""

from __future__ import annotations

import hashlib
import math
import threading
from typing import Any


def hash_query(text: str, settings: Any = None) -> str:
    """How a query may be named in telemetry: ``sha256:<16 hex>`` of the text, unless
    ``[telemetry] include_query_text = true`` (then the text itself).

    ``settings`` may be a :class:`Settings`, its ``telemetry`` section, or None (hash).
    """
    section = getattr(settings, "telemetry", settings)
    if section is not None and bool(getattr(section, "include_query_text", False)):
        return text
    data = (text or "").encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


class BoundedValues:
    """Caps the distinct values an attribute may take (model names come from callers)."""

    def __init__(self, limit: int, max_len: int = 96) -> None:
        self._limit = limit
        self._max_len = max_len
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: Any) -> str:
        text = str(value if value is not None else "").strip()[: self._max_len] or "unknown"
        if text in self._seen:
            return text
        with self._lock:
            if text in self._seen:
                return text
            if len(self._seen) >= self._limit:
                return "_OTHER"
            self._seen.add(text)
            return text


def finite_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None
