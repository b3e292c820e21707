"""The text the full-text index derives from a gene is pinned to FTS_VERSION.

The index is contentless: a row is deleted by deriving its values again from the genes row.
If a change to the derivation (identifier splitting, path words, tags) ships without a new
FTS_VERSION, rows indexed before it are deleted with other values after it, and searches
meeting their stale postings fail. Changing the derivation on purpose: bump FTS_VERSION
(genome/schema.py; every genome re-indexes once at its next open) and add its fingerprint here.
"""

from __future__ import annotations

import hashlib

from helix_context.genome.fulltext import FullTextMixin
from helix_context.genome.schema import FTS_VERSION
from helix_context.genome.stored_form import pack_text

SAMPLE = [
    ("def parse_header_list(value, *, maxSplit=2):\n    return HTTPHeaderParser(value).split_all()", "http, header",
     "src/http_client/HeaderParser.py"),
    ("class XMLHttpRequest2D(object):\n    MAX_RETRIES_V2 = 3\n    __slots__ = ('_raw', 'utf8Name')", "",
     "lib/xml/xmlHTTPRequest.ts"),
    ("#define REG_ADDR_MASK_0x3F 0x3f\nstatic int dcn32_get_clk_info(struct dc *dc) { return 0; }", "kernel\nC",
     "drivers/gpu/drm/amd/display/dcn32_resource.c"),
    ("Ünïcode naïve café: the résumé of getURLForÆther() and snake_case_ids", "prose", "docs/Ünïcode notes.md"),
    ("SELECT user_id, COUNT(*) FROM orders_2024 GROUP BY user_id;", "", None),
    ("plain words only, nothing to split", "", "README"),
]

FINGERPRINTS = {3: "64e20be49c3c027aff63321939de5280e84415ff108f8b2d80a0a41576dccb2c"}  # FTS_VERSION → sha256 of the derived rows of SAMPLE


def derivation_digest() -> str:
    h = hashlib.sha256()
    for content, tags, path in SAMPLE:
        for value in FullTextMixin.fts_values(pack_text(content), tags, path):
            h.update(value.encode("utf-8", "surrogatepass") + b"\x00")
    return h.hexdigest()


def test_the_full_text_derivation_is_pinned_to_its_version() -> None:
    assert FINGERPRINTS.get(FTS_VERSION) == derivation_digest(), (
        "the text the full-text index derives from a gene changed: bump FTS_VERSION and record the new fingerprint")
