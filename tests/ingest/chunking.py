"""What the chunking tests share: chunk a text and check the line-span invariant every chunk must keep."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from helix_context.ingest.chunk import chunk_text
from helix_context.models import Chunk

STDLIB = Path(sysconfig.get_paths()["stdlib"])


def lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def assert_spans(text: str, chunks: list[Chunk], max_chars: int) -> None:
    """content == original lines start..end (1-based, inclusive) joined, without the final line break;
    a line longer than max_chars is hard-split into slices of itself; every chunk fits max_chars."""
    lines = lines_of(text)
    prev_end = 0
    for c in chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines), (c.start_line, c.end_line, len(lines))
        assert len(c.content) <= max_chars
        assert c.content.strip(), "no whitespace-only chunks"
        assert c.start_line >= prev_end, "chunks are in order and do not overlap"
        prev_end = c.end_line
        joined = "\n".join(lines[c.start_line - 1 : c.end_line])
        if joined.endswith("\r"):
            joined = joined[:-1]
        if c.start_line == c.end_line and len(joined) > max_chars:
            assert c.content in joined
        else:
            assert c.content == joined


def chunk_with(text: str, content_type: str, language: str | None, max_chars: int = 2400) -> list[Chunk]:
    chunks = chunk_text(text, content_type, language, max_chars)
    assert_spans(text, chunks, max_chars)
    for c in chunks:
        assert c.content_type == content_type and c.language == language
    return chunks


def containing(chunks: list[Chunk], needle: str) -> Chunk:
    hits = [c for c in chunks if needle in c.content]
    assert len(hits) == 1, f"{needle!r} found in {len(hits)} chunks"
    return hits[0]


def line_no(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(lines_of(text), 1) if needle in ln)


def filler(name: str, n: int) -> str:
    body = "".join(f"    value_{i} = compute_{i}(value_{i - 1 if i else 0})\n" for i in range(n))
    return f"def {name}(x):\n    \"\"\"Docstring of {name}.\"\"\"\n{body}    return x\n"
