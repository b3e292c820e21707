"""/stats is polled every few seconds: the genes table is counted again only when the genome changed, and rarely."""

from __future__ import annotations

import time
from pathlib import Path

from helix_context.genome import polled_stats
from helix_context.genome.polled_stats import PolledStats
from helix_context.genome.store import Genome
from tests.genome.test_ann import clustered, fill


def test_counts_are_reused_until_an_ingest_changes_the_genome(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(polled_stats, "DUTY", 0)  # a cheap count here: no duty-cycle wait (next test)
    g = Genome(tmp_path / "g.db")
    fill(g, clustered(100))
    computed = []
    stats = PolledStats(lambda: computed.append(1) or g.stats(), g.generation)
    assert stats.get()["total_genes"] == 100 and stats.get()["total_genes"] == 100
    assert len(computed) == 1 and stats.get()["stats_age_s"] >= 0
    fill(g, clustered(50, seed=1), first=100)  # a later ingest: the next poll counts again
    assert stats.get()["total_genes"] == 150 and len(computed) == 2
    g.close()


def test_a_costly_count_is_not_repeated_sooner_than_its_duty_cycle_allows(monkeypatch) -> None:
    generation = [0]

    def slow() -> dict:
        time.sleep(0.05)  # a count that costs 50 ms (seconds on a 1M-gene genome)
        return {"generation_counted": generation[0]}

    monkeypatch.setattr(polled_stats, "DUTY", 10)
    stats = PolledStats(slow, lambda: generation[0])
    assert stats.get()["generation_counted"] == 0
    generation[0] = 1  # writes keep coming (an ingest in progress)
    assert stats.get()["generation_counted"] == 0  # younger than 10 x 50 ms: the last answer stands
    deadline = time.monotonic() + 5  # ~10 x the count's cost (more on a loaded machine): then it counts again
    while stats.get()["generation_counted"] != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert stats.get()["generation_counted"] == 1
