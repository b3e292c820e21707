"""JSON bytes for the wire that never fail on text Python holds but UTF-8 cannot encode.

Why: JSON may spell a lone surrogate (``"\\ud800"``); Python decodes it into a str that UTF-8
refuses to encode. A chat holding one must pass through to the model server as it came
(JSON's own escape), not end in a UnicodeEncodeError and a 500. Compact UTF-8 stays the
usual form; only such text falls back to ASCII escapes, which every JSON reader takes.
"""

from __future__ import annotations

import json
from typing import Any


def json_bytes(value: Any, *, allow_nan: bool = False) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=allow_nan).encode("ascii")
