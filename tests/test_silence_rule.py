"""The silence rule on plain numbers: what makes a message speak in a small code-only project."""

from __future__ import annotations

from helix_context.weigh.silence import SilenceFeatures, SilenceRule, judge


def _features(words: int, best: float, held: float, dense: float | None) -> SilenceFeatures:
    return SilenceFeatures(words=words, held_share=held, best_share=best, specific=0, identifiers=0,
                           dense_best=dense, dense_gap=0.0 if dense is not None else None)


def test_every_word_in_one_gene_speaks_even_far_in_meaning() -> None:
    # "unsafe member name climbing out" against a zip module's code digest: all words held, cosine 0.18
    assert not judge(_features(4, 1.0, 1.0, 0.18), SilenceRule(), "lib").silent


def test_a_greeting_held_by_a_gene_stays_silent() -> None:
    # "hello there!" in a docs folder: one word, fully held, little meaning in common
    verdict = judge(_features(1, 1.0, 1.0, 0.3), SilenceRule(), "docs")
    assert verdict.silent and "not about anything in project 'docs'" in verdict.reason


def test_a_message_mostly_absent_from_the_project_stays_silent() -> None:
    assert judge(_features(6, 0.4, 0.5, 0.2), SilenceRule(), "lib").silent
