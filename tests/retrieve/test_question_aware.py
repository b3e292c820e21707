"""Ranking that fits the question, and pointers that match symbols (issue 23).

Each test ingests a small real tree into a real genome with the real MiniLM model and
asks what a user would ask. Two behaviours are pinned:

* a question in plain words leans on the embedding model and an issue full of the
  genome's names leans on the lexical signals (retrieve/question.py, fusion.blend_weights);
* where one stored gene packs several small functions, the one the question means is
  the first pointer, because each span is embedded on its own (retrieve/span_dense.py).

Each ranking test also runs with the feature switched off and asserts the answer a user
would get is then wrong, so the test fails if the feature stops working.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.config import Settings
from helix_context.retrieve.question import QueryKind

from tests.retrieve.packed_genes import ingest_files, neutral_root, symbols_sharing_gene

# one small module, stored as one gene: three short functions with nothing in common with the
# question's words but what they do
HOUSEKEEPING = textwrap.dedent('''\
    def count_vowels(word):
        """How many of the letters of a word are vowels."""
        return sum(1 for letter in word.lower() if letter in "aeiou")


    def roll_over(handler):
        """Close the current output and start a fresh one once it grows past the byte limit."""
        if handler.stream.tell() >= handler.max_bytes:
            handler.stream.close()
            handler.stream = handler.open_next()


    def deliver_mail(message, relay):
        """Hand a message to the relay host over SMTP and wait for it to be accepted."""
        relay.sendmail(message["From"], message["To"], message.as_string())
    ''')

QUESTION = "rotate log files when they reach a certain size"


def _with(manager: HelixContextManager, **retrieval: float) -> HelixContextManager:
    """The same genome ranked under other retrieval settings (a fresh retriever, nothing else changes)."""
    other = HelixContextManager(manager.settings.replace(retrieval=retrieval, ner={"enabled": False}))
    return other


def test_each_small_function_in_a_packed_gene_is_scored_on_its_own(dense: HelixContextManager,
                                                                   tmp_path: Path) -> None:
    ingest_files(dense, tmp_path, {"housekeeping.py": HOUSEKEEPING})
    assert symbols_sharing_gene(dense, "roll_over") == 3, "the three functions share one stored gene (else this test shows nothing)"
    top = dense.fingerprint(QUESTION, max_results=3)
    assert top[0]["symbol"] == "roll_over", [(p["symbol"], p["signals"]) for p in top]
    assert top[0]["signals"]["span_dense"] > max(p["signals"].get("span_dense", 0.0) for p in top[1:])

    off = _with(dense, locate_dense=0.0)
    try:
        first = off.fingerprint(QUESTION, max_results=3)[0]
        assert first["symbol"] != "roll_over", "without span scoring the gene's first function comes first"
    finally:
        off.close()


def _tree(tmp_path: Path) -> Path:
    """Code that does what the question asks, in other words, beside code that shares the question's words, in a
    neutral folder (returned)."""
    root = neutral_root(tmp_path)
    (root / "logs").mkdir()
    (root / "logs" / "handlers.py").write_text(textwrap.dedent('''\
        class SizeCappedWriter:
            """Write records to disk, switching to a new output once the current one grows past a byte limit."""

            def should_switch(self, record):
                """True when writing this record would push the output past its limit."""
                return self.stream.tell() + len(record) >= self.max_bytes
        '''))
    (root / "maths").mkdir()
    (root / "maths" / "shapes.py").write_text(textwrap.dedent('''\
        def rotate_points(points, angle, size=1.0):
            """Rotate points by an angle: steps of a certain size reach it in log time."""
            return [turn(p, angle, size) for p in points]
        '''))
    for i in range(12):  # other code, so that word rarity means something
        (root / f"module{i}.py").write_text(f"def convert_{i}(value):\n    \"\"\"Parse the value.\"\"\"\n"
                                           f"    return int(value) + {i}\n")
    return root


def test_a_question_in_plain_words_leans_on_meaning(dense: HelixContextManager, tmp_path: Path) -> None:
    dense.ingest_path(_tree(tmp_path))
    kind = dense.retriever.evidence(QUESTION).kind
    assert kind.lexicality < 0.2, kind
    top = dense.fingerprint(QUESTION, max_results=3, group_by="file")
    assert top[0]["source_id"].endswith("logs/handlers.py")

    fixed = _with(dense, question_dense=1.0, question_lexical=1.0)
    try:
        first = fixed.fingerprint(QUESTION, max_results=3, group_by="file")[0]
        assert first["source_id"].endswith("maths/shapes.py"), "fixed weights let the shared words win"
    finally:
        fixed.close()


CACHE = textwrap.dedent('''\
    class Cache:
        """An in-memory cache of values by key."""

        def get(self, key):
            """Return the cached value for a key, or None when the cache holds none."""
            return self.entries.get(key)

        def put(self, key, value):
            """Store a value in the cache under a key."""
            self.entries[key] = value

        def clear(self):
            """Remove every entry from the cache."""
            self.entries.clear()
    ''')
CHORES = textwrap.dedent('''\
    def format_money(cents):
        """Show an amount of cents as dollars with two decimals."""
        return f"${cents / 100:.2f}"


    def purge_expired(entries, now):
        """Drop the entries whose time to live has run out."""
        for key in [k for k, (_, deadline) in entries.items() if deadline <= now]:
            del entries[key]


    def parse_color(text):
        """Read a color written as #rrggbb into its red, green and blue parts."""
        return tuple(int(text[i:i + 2], 16) for i in (1, 3, 5))
    ''')


def test_a_question_in_words_picks_the_function_by_its_own_evidence(dense: HelixContextManager,
                                                                    tmp_path: Path) -> None:
    """A gene about caches scores higher as a whole than a gene of chores, one of which is what the question means:
    for a question in words the span's own words and cosine outweigh the score of the gene around it."""
    others = {f"module{i}.py": f"def convert_{i}(value):\n    \"\"\"Parse the value.\"\"\"\n    return int(value) + {i}\n"
              for i in range(12)}  # other code, so that word rarity means something
    ingest_files(dense, tmp_path, {"store.py": CACHE, "chores.py": CHORES, **others})
    question = "remove cache entries whose time to live has passed"
    assert dense.fingerprint(question, max_results=3)[0]["symbol"] == "purge_expired"

    gene_led = _with(dense, question_span_lexical=0.4, question_span_dense=1.5)
    try:
        first = gene_led.fingerprint(question, max_results=3)[0]
        assert first["symbol"] != "purge_expired", "weighed as an issue's, the cache gene's score wins"
    finally:
        gene_led.close()


def test_an_issue_full_of_names_and_a_traceback_is_read_lexically(dense: HelixContextManager,
                                                                   tmp_path: Path) -> None:
    dense.ingest_path(_tree(tmp_path))
    issue = textwrap.dedent('''\
        rotate_points() fails when size=0

        ```
        Traceback (most recent call last):
          File "maths/shapes.py", line 3, in rotate_points
        ZeroDivisionError: float division by zero
        ```
        ''')
    kind = dense.retriever.evidence(issue).kind
    assert kind.frames and kind.program_share > 0.3 and kind.lexicality > 0.9, kind
    top = dense.fingerprint(issue, max_results=3)
    assert top[0]["symbol"] == "rotate_points"


def test_lexicality_is_read_against_this_genome(dense: HelixContextManager, tmp_path: Path) -> None:
    """`should_switch` is an identifier this genome holds; `frobnicate_widget` is not: it weighs nothing."""
    dense.ingest_path(_tree(tmp_path))
    held = dense.retriever.evidence("why does should_switch return true for an empty record").kind
    absent = dense.retriever.evidence("why does frobnicate_widget return true for an empty record").kind
    assert held.identifier_share > 0.2 and held.defined_names
    assert absent.identifier_share == 0.0 and not absent.defined_names
    assert held.lexicality > absent.lexicality + 0.3


@pytest.mark.parametrize("query", ["", "   \n\t", "{}()[];:,.", "x" * 1_000_000,
                                   "def f(x):\n    return x + 1\n" * 40_000])
def test_empty_huge_and_code_only_queries_get_an_answer(dense: HelixContextManager, tmp_path: Path,
                                                        query: str) -> None:
    dense.ingest_path(_tree(tmp_path))
    started = time.perf_counter()
    found = dense.retriever.retrieve(query, pointers=True)
    pointers = dense.fingerprint(query, max_results=5) if query.strip() else []
    assert time.perf_counter() - started < 30  # bounded, on a loaded 2-core machine; the benchmark times it
    assert found.tier in ("abstain", "tight", "focused", "broad")
    assert all(p["start_line"] >= 1 for p in pointers)
    if not query.strip():
        assert found.tier == "abstain" and found.items == ()


def test_query_kind_of_plain_text_without_genome_words_is_zero() -> None:
    assert QueryKind().lexicality == 0.0
    assert QueryKind(frames=True).lexicality == 1.0
    assert 0.0 < QueryKind(identifier_share=0.3).lexicality < QueryKind(identifier_share=0.3, paths=True).lexicality


def test_span_vectors_keep_a_bounded_memory_per_model(dense: HelixContextManager, tmp_path: Path) -> None:
    """Span vectors are remembered for the next question, least recently used out first, never across models."""
    from helix_context.retrieve.span_dense import SpanVectors

    ingest_files(dense, tmp_path, {"housekeeping.py": HOUSEKEEPING})
    memory = dense.retriever.span_vectors
    dense.fingerprint(QUESTION, max_results=3)
    remembered = len(memory)
    assert remembered >= 3  # the three functions of the packed gene
    dense.fingerprint(QUESTION, max_results=3)
    assert len(memory) == remembered  # the same spans are not embedded again

    small = SpanVectors(capacity=2)
    vec = dense.embedder.embed(["a"])[0]
    for i in range(3):
        small.put(("model-a", "gene", i, i), vec)
    assert len(small) == 2 and small.get(("model-a", "gene", 0, 0)) is None
    assert small.get(("model-b", "gene", 2, 2)) is None and small.get(("model-a", "gene", 2, 2)) is not None


def _span_weight(settings: Settings, model: str, **retrieval: float) -> tuple[str, float]:
    """(the model the backend embeds with, the span cosine's weight for a plain-words question)."""
    manager = HelixContextManager(settings.replace(embedding={"model": model}, retrieval=retrieval,
                                                   ner={"enabled": False}))
    try:
        if manager.embedder is None:
            pytest.skip(f"embeddings unavailable: {manager.embedder_part.detail}")
        return manager.embedder.model_key, manager.retriever.locate_weights_for(QueryKind()).dense
    finally:
        manager.close()


def test_the_span_weight_follows_the_model_in_use_unless_set(settings: Settings, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """`locate_dense` unset: the code-trained model's span cosines count more than MiniLM's (it ranks
    functions better); a value in helix.toml is kept whatever the model; a code model that cannot load
    serves MiniLM's vectors, so MiniLM's weight."""
    from helix_context.ingest import embed_models

    model, plain = _span_weight(settings, "minilm")
    assert model == "minilm"
    model, code = _span_weight(settings, "code-minilm")
    assert model == "code-minilm" and code == pytest.approx(1.5 * plain)
    assert _span_weight(settings, "code-minilm", locate_dense=0.7)[1] == pytest.approx(0.7 * plain)

    monkeypatch.setattr(embed_models, "CODE_MODEL_DIR", tmp_path / "no_model")  # the artifact is gone
    assert _span_weight(settings, "code-minilm") == ("minilm", pytest.approx(plain))


def test_an_empty_environment_value_leaves_the_span_weight_to_the_model(tmp_path: Path) -> None:
    from helix_context.config import load_config

    cfg = tmp_path / "helix.toml"
    cfg.write_text("[retrieval]\nlocate_dense = 2.0\n")
    assert load_config(cfg, env={}).retrieval.locate_dense == 2.0
    assert load_config(cfg, env={"HELIX_RETRIEVAL_LOCATE_DENSE": "0.5"}).retrieval.locate_dense == 0.5
    assert load_config(cfg, env={"HELIX_RETRIEVAL_LOCATE_DENSE": ""}).retrieval.locate_dense is None


def test_a_pointers_own_evidence_is_weighed_as_for_an_issue_from_lexicality_one_half() -> None:
    """The span factors serve questions in words; text as full of names as an issue (every swe-dev issue reads 0.5 or
    more) keeps the pointer weights chosen on issues, and a question in words gets the full factors."""
    from helix_context.retrieve.locate import LocateWeights, QuestionFactors

    weights, factors = LocateWeights(symbol=0.6, dense=1.0), QuestionFactors(0.4, 2.4, 4.5)
    for lexicality in (0.5, 0.8, 1.0):
        issue = weights.blended(lexicality, factors)
        assert (issue.symbol, issue.dense) == (0.6, 1.0), lexicality
    question = weights.blended(0.0, factors)
    assert question.symbol == pytest.approx(0.6 * 2.4) and question.dense == pytest.approx(4.5)
    halfway = weights.blended(0.25, factors)
    assert 0.6 < halfway.symbol < question.symbol and 1.0 < halfway.dense < question.dense
