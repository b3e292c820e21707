"""`term_rowid_lists` (many words' genes in one statement) answers what `term_rowids` answers word by word.

The silence gate counts a pasted issue's words in the scoped project through it; the PostgreSQL
genome's version is compared in tests/genome/pg/test_pg_lexical.py."""

from __future__ import annotations

from pathlib import Path

from helix_context.config import Settings
from helix_context.manager import HelixContextManager

REPO = Path(__file__).resolve().parents[2]


def awkward_words() -> list[str]:
    """Common, rare, absent and awkward words, more than one statement's worth (100 per statement)."""
    common = ["def", "return", "self", "import", "the", "none"]
    rare = ["redact_url", "split_identifier", "quote_term", "helixerror", "atomic"]
    odd = ['it"s', "", "no_such_word_anywhere", "ünïcode", "a b"]
    return common + rare + odd + [f"filler{i}" for i in range(120)]


def test_many_words_at_once_equal_each_word_alone(settings: Settings, tmp_path: Path) -> None:
    root = tmp_path / "tree"
    for rel in ("helix_context/genome/fts_text.py", "helix_context/redact.py", "helix_context/errors.py", "README.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text((REPO / rel).read_text(encoding="utf-8"), encoding="utf-8")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    try:
        helix.ingest_path(root)
        genome = helix.genome
        words = awkward_words()
        for limit in (3, 20_000):
            lists = genome.term_rowid_lists(words, limit)
            assert set(lists) == set(words)
            for word in words:
                assert sorted(lists[word].tolist()) == sorted(genome.term_rowids(word, limit)), (word, limit)
            assert len(lists["def"]) == min(limit, len(genome.term_rowids("def", 20_000))) > 0
            assert len(lists["no_such_word_anywhere"]) == 0
        assert genome.term_rowid_lists(words, 0)["def"].size == 0
        assert genome.term_rowid_lists([], 10) == {}
    finally:
        helix.close()
