"""Fixtures for the supervisor tests (helpers live in supkit.py, shared with tests/launcher)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from supkit import ollama_stub, supervisors  # noqa: F401 - (shared fixtures)

