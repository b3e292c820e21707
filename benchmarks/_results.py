"""Where benchmark scripts write their JSON results (compare_ab.py reads two of them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(path: str | Path | None, results: dict[str, Any]) -> None:
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2))
