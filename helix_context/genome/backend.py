"""What a genome answers besides its interface (storage.py): whether its connection is up.

Why a Protocol of its own: only a genome behind a network connection (the PostgreSQL one) has a
link that can be down; /health and the tray ask for it where a genome has one.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ConnectionHealth(Protocol):
    """A genome behind a network connection (the PostgreSQL one): up, or reconnecting with backoff."""

    def connection_state(self) -> dict[str, Any]:
        ...
