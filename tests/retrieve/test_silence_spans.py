"""Silence reads the functions a stored gene packs, not only the gene's one vector.

A small module of two helpers is stored as one gene, embedded from the first words of both: the
hashing helper's. Asked "retry with backoff", the project holds every word and the gene holds
them all, but the gene's vector sits far from the question (cosine ~0.04), so the silence gate
used to withhold the context as if the message were chat about nothing indexed; asked in other
words than the code's, neither the words nor the gene's vector spoke. Where the genes' vectors
leave a message silent, the gate now looks at the cosines of the spans the best genes pack
(retrieve/span_dense.py). Real ingest, a real SQLite genome, the real MiniLM model.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helix_context import HelixContextManager
from helix_context.retrieve import silence_gate

UTIL = textwrap.dedent('''\
    import hashlib
    import time


    # Compute the sha256 of a file in 64 KB blocks so that big files do not fill the memory.
    def digest(path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(65536), b""):
                h.update(block)
        return h.hexdigest()


    # Sleep with exponential backoff between the retries of a flaky call.
    def again(call, tries=5):
        for i in range(tries):
            try:
                return call()
            except OSError:
                time.sleep(2 ** i)
        return call()
    ''')

ON_TOPIC = ("retry with backoff",  # every word held, the gene's vector far
            "wait with exponential backoff before retrying a flaky call")  # 71 % of the words, the span close
CHAT = ("write a haiku about autumn leaves", "What is the capital of France?", "thanks, that's all for today",
        "how do I bake sourdough bread")


def _ingest(dense: HelixContextManager, root: Path) -> None:
    # a folder of its own: the path's words are part of what each gene is embedded from (pytest's folder
    # names, "test_a_question_about_...", would be the module header's)
    (root / "helpers").mkdir()
    (root / "helpers" / "util.py").write_text(UTIL)
    dense.ingest_path(root / "helpers")
    genes = dense.genome.conn.execute("SELECT count(DISTINCT gene) FROM symbols").fetchone()[0]
    assert genes == 1, "both helpers share one stored gene (else this test shows nothing)"


@pytest.mark.parametrize("question", ON_TOPIC)
def test_a_question_about_one_function_of_a_packed_gene_is_answered(dense: HelixContextManager, tmp_path: Path,
                                                                    question: str) -> None:
    _ingest(dense, tmp_path)
    found = dense.retriever.retrieve(question)
    assert found.items and not found.silence, found.silence
    packet = dense.packet(question)
    assert [item.symbol for item in packet.items][:1] == ["again"], packet

    # the gene's own vector alone: the gate stays silent, which is what users got before
    ev = dense.retriever.evidence(question)
    items = dense.retriever.retrieve(question, gate=False).items
    alone = silence_gate.judge_query(dense.retriever, ev.qs, (), list(items), ev.per_signal, True)
    assert alone.silent and alone.features.dense_best < 0.2, alone


def test_chat_about_nothing_indexed_stays_silent_beside_it(dense: HelixContextManager, tmp_path: Path) -> None:
    _ingest(dense, tmp_path)
    for text in CHAT:
        found = dense.retriever.retrieve(text)
        assert not found.items and found.silence, text
