"""The identifier split that the full-text index is built from must not drift: a contentless FTS5 row
can only be deleted by replaying exactly the text that was indexed."""

from __future__ import annotations

import re
from pathlib import Path

from helix_context.genome import fts_text

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z0-9]+|[A-Z]+")


def reference_split(name: str) -> tuple[str, ...]:
    """The derivation as FTS_VERSION 3 defines it: each '_' piece through the camel-case regex."""
    parts = [m.group(0).lower() for piece in name.split("_") if piece for m in _CAMEL.finditer(piece)]
    return tuple(parts) if len(parts) >= 2 else ()


EDGE_CASES = ["getHTTPResponse_code", "REG2", "REG2_FIELD", "a1b_C2d", "ÉtéBon_x", "naïve_name", "x$y_z", "__init__",
              "_a_", "A_B", "ABCdef_ghi", "aB1_2", "X11_abc", "mmSDMA0_DEC_START_BASE_IDX", "x00001234L",
              "regGCVM_L2_CNTL__ENABLE_L2_CACHE_MASK", "snake_case_name", "UPPER_CASE", "lower", "UPPER",
              "Mixed_Case_Words", "with9_digits99", "9lives_cat", "ﬁle_name", "ǅemal_x", "İstanbul_x"]


def test_split_matches_the_indexed_derivation_on_real_identifiers() -> None:
    words = set(EDGE_CASES)
    for path in Path(fts_text.__file__).resolve().parents[1].rglob("*.py"):
        for token in fts_text._TOKEN_RE.findall(path.read_text(encoding="utf-8")):
            words.update(token.split("."))
    assert len(words) > 2000
    differ = [w for w in words if fts_text._split_cached.__wrapped__(w) != reference_split(w)]
    assert differ == []


def test_body_text_appends_the_parts_of_compound_identifiers() -> None:
    body = fts_text.body_text("int mmSDMA0_DEC_START = getHTTPResponse(x);")
    assert body.startswith("int mmSDMA0_DEC_START = getHTTPResponse(x);\n")
    # (the camel rule reads "SDMA0" as SDM + A0: odd, but it is what every stored row was indexed with)
    assert body.split("\n", 1)[1].split() == ["mm", "sdm", "a0", "dec", "start", "get", "http", "response"]


def test_the_word_table_stays_bounded_on_a_huge_vocabulary() -> None:
    """A kernel-sized tree has millions of distinct identifiers; the per-process word table must not keep them."""
    words = " ".join(f"reg_block{i}_FIELD_mask" for i in range(fts_text._WordParts.limit + 5_000))
    parts = fts_text.identifier_parts(words)
    assert len(fts_text._WORD_PARTS) <= fts_text._WordParts.limit
    assert "block123" in parts and "field" in parts and "mask" in parts
