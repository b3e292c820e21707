"""The symbols tree-sitter finds in a source text, for tests that compare them with what a reader would name."""

from __future__ import annotations

import pytest

from helix_context.ingest.symbols import find_symbols
from helix_context.ingest.treesitter import parser_for


def symbols_of(language: str, source: str) -> dict[str, tuple[str, int, int]]:
    """name → (kind, first line, last line); the test is skipped where this install has no grammar for `language`."""
    if parser_for(language) is None:
        pytest.skip(f"no tree-sitter grammar for {language} in this install")
    return {s.name: (s.kind, s.start_line, s.end_line) for s in find_symbols(source, "code", language)}
