"""Silence reads the functions a stored gene packs, not only the gene's one vector.

A small module of two helpers is stored as one gene, embedded from the first words of both: the
hashing helper's. Asked "retry with backoff", the project holds every word and the gene holds
them all, but the gene's vector sits far from the question (cosine ~0.04), so the silence gate
used to withhold the context as if the message were chat about nothing indexed. It now looks,
in that case only, at the cosines of the spans the best genes pack (retrieve/span_dense.py).
Real ingest, a real SQLite genome, the real MiniLM model.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

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

ON_TOPIC = "retry with backoff"
CHAT = ("write a haiku about autumn leaves", "What is the capital of France?", "thanks, that's all for today",
        "how do I bake sourdough bread")


def _ingest(dense: HelixContextManager, root: Path) -> None:
    (root / "util.py").write_text(UTIL)
    dense.ingest_path(root)
    genes = dense.genome.conn.execute("SELECT count(DISTINCT gene) FROM symbols").fetchone()[0]
    assert genes == 1, "both helpers share one stored gene (else this test shows nothing)"


def test_a_question_about_one_function_of_a_packed_gene_is_answered(dense: HelixContextManager,
                                                                    tmp_path: Path) -> None:
    _ingest(dense, tmp_path)
    found = dense.retriever.retrieve(ON_TOPIC)
    assert found.items and not found.silence, found.silence
    packet = dense.packet(ON_TOPIC)
    assert [item.symbol for item in (*packet.verified, *packet.stale_risk)][:1] == ["again"], packet

    # the gene's own vector alone: the gate stays silent, which is what users got before
    ev = dense.retriever.evidence(ON_TOPIC)
    items = dense.retriever.retrieve(ON_TOPIC, gate=False).items
    alone = silence_gate.judge_query(dense.retriever, ev.qs, (), list(items), ev.per_signal, True)
    assert alone.silent and alone.features.dense_best < 0.2, alone


def test_chat_about_nothing_indexed_stays_silent_beside_it(dense: HelixContextManager, tmp_path: Path) -> None:
    _ingest(dense, tmp_path)
    for text in CHAT:
        found = dense.retriever.retrieve(text)
        assert not found.items and found.silence, text
