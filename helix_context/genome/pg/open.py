"""`open_team_genome(url)`: the PostgreSQL genome, as the `GenomeStore` every caller is written against.

No cast: mypy checks here that PgGenome implements the whole interface (genome/storage.py).
psycopg is imported only when a team genome is asked for.
"""

from __future__ import annotations

from helix_context.errors import ConfigError
from helix_context.genome.retention import WriteCaps
from helix_context.genome.storage import GenomeStore


def open_team_genome(url: str, *, readonly: bool = False, party: str = "", caps: WriteCaps | None = None) -> GenomeStore:
    """`party` (user@device) keys the per-person rows: sessions, co-activation, activity."""
    try:
        from helix_context.genome.pg.store import PgGenome
    except ImportError as exc:
        raise ConfigError(f"[genome] url asks for PostgreSQL, but its client is not installed ({exc}): "
                          "pip install 'helix-context[postgres]'") from None
    genome: GenomeStore = PgGenome(url, readonly=readonly, party=party, caps=caps)
    return genome
