"""Split a source text into chunks (future genes) along the lines of its type.

- code: Python at top-level def/class boundaries (a class too big for one chunk
  splits at its methods; decorators and the comments right above a def go with
  it; the module preamble — docstring, imports, constants — is a chunk of its
  own). Boundaries come from a one-pass scanner of strings and indentation, not
  ``ast.parse``: ``ast`` alone runs at ~9 MB/s, below the ingest budget, while
  the scanner gives the same boundaries as ``ast`` on 1777 of 1779 stdlib files
  (the other two differ only where an oversized run of statements is cut) and
  needs no valid syntax. Other languages split at top-level nodes via
  tree-sitter where a grammar loads (a parse slower than 2 MB/s — garbage in a
  code file — is abandoned); else at definition-looking lines and blank-line
  groups.
- markdown: by headings (the section keeps its heading; symbol = heading text).
- text: by paragraphs.  log: by records (a traceback stays with the line that
  started it).  config: by ``[sections]`` / top-level YAML keys.  json: by
  top-level keys or records.  diff: by file, then by hunk.

Every chunk satisfies two invariants the rest of the system relies on:

- ``content`` is exactly the original lines ``start_line..end_line`` (1-based,
  inclusive, lines split at ``\\n``) joined, without the final line terminator —
  except for the pieces of a single line longer than ``max_chars``, which are
  consecutive slices of that one line;
- ``len(content) <= max_chars``.

Adjacent small pieces (under a quarter of ``max_chars``) are merged so the store
does not fill with two-line genes, but never across the boundary of a class that
was split, and never into the module preamble. ``chunk_text`` never raises.
"""

from __future__ import annotations

from helix_context.ingest.chunk_code import segments_code_fallback, segments_python, segments_treesitter
from helix_context.ingest.chunk_kinds import (segments_config, segments_diff, segments_json, segments_log,
                                              segments_markdown)
from helix_context.ingest.chunk_lines import Doc, Seg, finish_chunks, segments_paragraphs, split_lines
from helix_context.ingest.py_layout import python_string_lines
from helix_context.models import Chunk

__all__ = ["chunk_text", "python_string_lines"]


def _segments(doc: Doc, text: str, content_type: str, language: str | None, max_chars: int) -> list[Seg]:
    if content_type == "code":
        segs = None
        lang = (language or "").lower()
        if lang == "python":
            segs = segments_python(doc, text, max_chars)
        elif lang:
            try:
                segs = segments_treesitter(doc, text, lang, max_chars)
            except Exception:
                segs = None
        if segs is None:
            segs = segments_code_fallback(doc, lang)
        return segs
    if content_type == "markdown":
        return segments_markdown(doc, language)
    if content_type == "log":
        return segments_log(doc)
    if content_type == "config":
        return segments_config(doc, (language or "").lower())
    if content_type == "json":
        return segments_json(doc, (language or "").lower())
    if content_type == "diff":
        return segments_diff(doc, max_chars)
    return segments_paragraphs(doc)


def chunk_text(text: str, content_type: str, language: str | None, max_chars: int = 2400) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_chars`` characters along its structure.

    Empty or whitespace-only text gives ``[]``. Never raises: a text that its
    type-specific splitter cannot handle is split by paragraphs / lines instead.
    """
    if not text or not text.strip():
        return []
    max_chars = max(1, int(max_chars))
    doc = Doc(text)
    try:
        segs = _segments(doc, text, content_type, language, max_chars)
        return finish_chunks(doc, segs, content_type, language, max_chars)
    except Exception:
        try:
            return finish_chunks(doc, segments_paragraphs(doc), content_type, language, max_chars)
        except Exception:
            out: list[Chunk] = []
            split_lines(doc, 0, doc.n, None, content_type, language, max_chars, out)
            return out

