"""`open_team_genome(url)`: the PostgreSQL genome typed as the `Genome` its callers expect.

Why a cast: PgGenome answers every `Genome` method that ingest, retrieval and the manager
call (tests/genome/pg check each path against a real server), but the two classes share no
declared Protocol yet; writing one means changing every caller's annotations, left for the
storage-seam step of issue 27 so concurrent work on store.py and retrieve/ is not disturbed.
"""

from __future__ import annotations

from typing import cast

from helix_context.errors import ConfigError
from helix_context.genome.retention import WriteCaps
from helix_context.genome.store import Genome


def open_team_genome(url: str, *, readonly: bool = False, party: str = "", caps: WriteCaps | None = None) -> Genome:
    """`party` (user@device) keys the per-person rows: sessions, co-activation, activity."""
    try:
        from helix_context.genome.pg.store import PgGenome
    except ImportError as exc:
        raise ConfigError(f"[genome] url asks for PostgreSQL, but its client is not installed ({exc}): "
                          "pip install 'helix-context[postgres]'") from None
    return cast(Genome, PgGenome(url, readonly=readonly, party=party, caps=caps))
