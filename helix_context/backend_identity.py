"""Whether a backend answering on a port serves this HELIX_HOME's genome.

Why: a port is not an identity. Two HELIX_HOMEs configured with the same port (or a backend of another
workspace still running there) answered the supervisor, which adopted it and showed its index as this one's,
and the `helix sources` CLI, which changed the other index. Both now compare the genome a backend's
/health names with their own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helix_context.config import Settings
from helix_context.genome.pg.url import safe_url


def own_genome(settings: Settings) -> str:
    """This HELIX_HOME's genome as /health names it: the file, or the team genome's URL without credentials."""
    return safe_url(settings.genome.url) if settings.genome.url else str(settings.genome_path)


def other_genome(health: dict[str, Any], settings: Settings) -> str | None:
    """The genome a backend's /health body says it serves, when that is not ours; None when ours or unsaid."""
    genome = health.get("genome")
    served = genome.get("path") if isinstance(genome, dict) else None
    if not isinstance(served, str) or not served:
        return None
    ours = own_genome(settings)
    if served == ours:
        return None
    try:
        return None if Path(served).resolve() == Path(ours).resolve() else served
    except (OSError, ValueError):
        return served
