"""An answer's delivery record is written off the request path, in batches, and means what it meant.

The genome learns from each answer which genes were delivered together (co-activation, usage counts).
Queued (`queue_delivery`, what /context does), the record is written by a worker within half a
second, many answers in one transaction; these tests check that what is learned is the same as
writing each answer at once, that readers of what was learned see every answer, and that the
queue stays bounded and survives a failing write.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from helix_context.errors import GenomeError
from helix_context.genome.deliveries import Delivery, DeliveryBatcher
from helix_context.genome.store import Genome

from .test_store import gene, rec

TEXTS = ("A = 1", "B = 2", "C = 3", "D = 4")


def _genome(path: Path) -> tuple[Genome, list[int]]:
    g = Genome(path)
    g.replace_source(rec("a.py"), "a.py", [(gene(t, start=i + 1), None) for i, t in enumerate(TEXTS)])
    rows = [g.get_gene(gene(t).gene_id).rowid for t in TEXTS]
    return g, [r for r in rows if r is not None]


def _learned(g: Genome) -> tuple[list[tuple[str, str, int]], list[int]]:
    links = sorted((a, b, int(n)) for a, b, n, _ in g.coactivation_links())
    uses = [g.get_gene(gene(t).gene_id).access_count for t in TEXTS]
    return links, uses


ANSWERS = [[0, 1], [0, 1, 2], [2, 3], [0, 1], [3, 1]]


def test_queued_answers_teach_what_answers_written_at_once_teach(tmp_path: Path) -> None:
    now, queued = _genome(tmp_path / "now.db"), _genome(tmp_path / "queued.db")
    for answer in ANSWERS:
        now[0].record_delivery([now[1][i] for i in answer])
        queued[0].queue_delivery([queued[1][i] for i in answer])
    assert _learned(queued[0]) == _learned(now[0])  # coactivation_links writes what is queued first
    assert _learned(now[0])[1] == [3, 4, 2, 2]


def test_a_queued_answer_is_learned_within_half_a_second_without_asking(tmp_path: Path) -> None:
    g, rows = _genome(tmp_path / "g.db")
    g.queue_delivery([rows[0], rows[1]])
    deadline = time.monotonic() + 5
    while g.coactivated([rows[0]]) != {rows[1]: 1.0}:  # a plain read: it does not write the queue
        assert time.monotonic() < deadline, "the worker never wrote the delivery"
        time.sleep(0.05)


def test_closing_the_genome_writes_what_was_queued(tmp_path: Path) -> None:
    g, rows = _genome(tmp_path / "g.db")
    g.queue_delivery([rows[2], rows[3]])
    g.close()
    again = Genome(tmp_path / "g.db")
    assert again.coactivated([rows[2]]) == {rows[3]: 1.0}


def test_a_gene_retired_before_the_write_learns_nothing(tmp_path: Path) -> None:
    g, rows = _genome(tmp_path / "g.db")
    g._deliveries()._flush_after_s = 60.0  # held in the queue while the file goes
    g.queue_delivery(rows[:2])
    g.retire_source("a.py")
    assert g.coactivation_links() == []
    assert g.retention_rows()["coactivation"] == 0


def test_the_queue_is_bounded_and_a_failing_write_does_not_stop_it() -> None:
    written: list[list[Delivery]] = []
    fail = threading.Event()
    fail.set()

    def write(batch):
        if fail.is_set():
            fail.clear()
            raise GenomeError("database is locked")
        written.append(list(batch))

    batcher = DeliveryBatcher(write, flush_after_s=60.0, max_batch=1000, max_pending=3)
    for i in range(5):
        batcher.add([i, i + 1])
    assert batcher.pending() == 3  # the two oldest were dropped
    batcher.flush()  # fails: logged, dropped
    assert written == [] and batcher.pending() == 0
    batcher.add([7, 8])
    batcher.close()
    assert [d.genes for batch in written for d in batch] == [(7, 8)]
    batcher.add([9, 10])  # after close: ignored
    assert batcher.pending() == 0


def test_a_failing_genome_is_reported_once_until_it_takes_writes_again(caplog) -> None:
    """A full disk fails every batch: one warning, not one every half second while questions come."""
    broken = threading.Event()
    broken.set()

    def write(batch):
        if broken.is_set():
            raise GenomeError("database or disk is full")

    batcher = DeliveryBatcher(write, flush_after_s=60.0)
    with caplog.at_level("DEBUG", logger="helix.genome.deliveries"):
        for _ in range(3):
            batcher.add([1, 2])
            batcher.flush()
        broken.clear()
        batcher.add([1, 2])
        batcher.flush()
    levels = [r.levelname for r in caplog.records]
    assert levels == ["WARNING", "DEBUG", "DEBUG", "INFO"], levels
    batcher.close()


def test_a_read_only_genome_queues_nothing(tmp_path: Path) -> None:
    g, rows = _genome(tmp_path / "g.db")
    g.close()
    ro = Genome(tmp_path / "g.db", readonly=True)
    ro.queue_delivery(rows[:2])
    assert "_delivery_batcher" not in ro.__dict__


def test_an_idle_worker_ends_and_the_next_answer_starts_one() -> None:
    """A backend nobody asks holds no thread (nor, through it, a connection) for its delivery records."""
    written: list[tuple[int, ...]] = []
    batcher = DeliveryBatcher(lambda batch: written.extend(d.genes for d in batch), flush_after_s=0.01,
                              idle_exit_s=0.2)
    batcher.add([1, 2])
    deadline = time.monotonic() + 5
    while batcher.working() or not written:
        assert time.monotonic() < deadline, "the worker never ended"
        time.sleep(0.02)
    batcher.add([3, 4])
    while len(written) < 2:
        assert time.monotonic() < deadline, "no worker wrote the second answer"
        time.sleep(0.02)
    assert written == [(1, 2), (3, 4)]
    batcher.close()
