"""Fusing one more signal into a fused ranking gives exactly what fusing every signal again gives."""

from __future__ import annotations

import random

import pytest

from helix_context.retrieve.fusion import FUSERS, fuse_added


@pytest.mark.parametrize("fuser", sorted(FUSERS))
def test_co_activation_added_equals_fusing_everything_again(fuser: str) -> None:
    fuse = FUSERS[fuser]
    rng = random.Random(7)
    weights = {"fts": 1.0, "tags": 0.5, "dense": 0.8, "coactivation": 0.3, "path": 0.0}
    code_weights = {"fts": 0.7, "tags": 0.9, "dense": 1.2, "coactivation": 0.3, "path": 0.4}
    for _ in range(50):
        genes = list(range(1, 400))
        per_signal = {name: {g: rng.random() * 10 for g in rng.sample(genes, rng.randrange(1, 120))}
                      for name in ("fts", "tags", "path", "dense")}
        code_rows = set(rng.sample(genes, 150))
        first = fuse(per_signal, weights, code_rows, code_weights)
        co = {g: rng.random() for g in rng.sample(genes, 40)}  # some fused already, some new
        again = fuse({**per_signal, "coactivation": co}, weights, code_rows, code_weights)
        added = fuse_added(first, "coactivation", co, fuse, weights, code_rows, code_weights)
        assert added == again  # the same floats, bit for bit, and the same parts in the same order
        assert [list(p) for _, p in added.values()] == [list(p) for _, p in again.values()]
