"""Put this checkout first on sys.path, so a bench measures the code beside it.

Why: a bench run as `python benchmarks/x.py` has its own folder, not the repository, first on
sys.path, so `helix_context` came from the installed (editable) package: a bench run in a second
worktree to compare two versions measured the main checkout's code twice. Each bench imports this
module before anything of helix_context.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if sys.path[:1] != [str(REPO)]:
    sys.path.insert(0, str(REPO))
