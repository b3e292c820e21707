"""The path scorer counts path words up to its budget first, and up to MAX_PATH_WORD_DOCS only when every
word is over the budget: it searches exactly the words that counting all of them up to the maximum chose."""

from __future__ import annotations

from pathlib import Path

import pytest

from helix_context.config import Settings
from helix_context.genome import lexicon
from helix_context.manager import HelixContextManager
from helix_context.models import QuerySignals
from helix_context.retrieve import scorers
from helix_context.retrieve.terms import WeighedTerms


def chosen_by_full_counts(genome, wanted: list[str]) -> list[str]:
    """The rule as it read before: every word counted up to the maximum, rarest first, within the budget."""
    held = genome.word_doc_counts_upto(wanted, scorers.MAX_PATH_WORD_DOCS)
    chosen: list[str] = []
    spent = 0
    for word in sorted((t for t in wanted if 0 < held.get(t, 0) <= scorers.MAX_PATH_WORD_DOCS), key=lambda t: held[t]):
        if chosen and spent + held[word] > scorers.PATH_POSTING_BUDGET:
            break
        chosen.append(word)
        spent += held[word]
    return chosen


def test_the_same_path_words_are_searched(settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tree"
    for folder, files in (("alpha", 12), ("bravo", 5), ("charlie", 3), ("delta", 1)):
        for i in range(files):
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / folder / f"mod{folder}{i}.py").write_text(f"def f{i}():\n    return {i}\n", encoding="utf-8")
    helix = HelixContextManager(settings.replace(embedding={"enabled": False}, ner={"enabled": False}))
    searched: list[str] = []
    try:
        helix.ingest_path(root)
        genome = helix.genome
        monkeypatch.setattr(genome, "fts_search", lambda match, limit, column=None: searched.append(match) or [])
        # genes per folder word: alpha 12, bravo 5, charlie 3, delta 1; (budget, most) scaled down from (6k, 20k)
        for budget, most in ((4, 10), (2, 10), (3, 6), (1, 3)):
            monkeypatch.setattr(scorers, "PATH_POSTING_BUDGET", budget)
            monkeypatch.setattr(scorers, "MAX_PATH_WORD_DOCS", most)
            cache = lexicon.CappedCounts(genome.generation)  # kept across the questions, as a retriever keeps it
            for words in (["alpha", "bravo", "charlie", "delta"], ["alpha", "bravo"], ["alpha", "charlie"], ["alpha"],
                          ["bravo", "charlie", "nowhere"], ["nowhere"], ["charlie", "alpha", "bravo"]):
                want = chosen_by_full_counts(genome, words)
                qs = QuerySignals(text=" ".join(words), path_tokens=tuple(words))
                for counts in (None, cache):
                    searched.clear()
                    scorers.path_scorer(genome, qs, 10, WeighedTerms(), counts)
                    assert searched == ([scorers._or(want)] if want else []), (words, budget, most)
    finally:
        helix.close()
