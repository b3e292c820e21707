"""The sources service's units of work (sources/service.py): what is queued per source, the progress shown,
and the ingest it indexes through. Plain data, kept apart so the service reads as its life cycle and rules."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from helix_context.ingest.pipeline import IngestReport


class Interrupted(Exception):
    """Raised from the ingest's progress callback: pause or removal stops it between two files."""


@dataclass
class Work:
    """What is queued for one source, merged while it waits: forget, a full pass, or changed paths."""

    forget: bool = False
    full: bool = False
    paths: set[str] = field(default_factory=set)

    def merge(self, other: Work) -> None:
        self.forget |= other.forget
        self.full |= other.full
        self.paths |= other.paths


@dataclass
class Progress:
    source: str | None = None
    done: int = 0
    total: int = 0
    kind: str = ""


class Indexer(Protocol):
    """The ingest the service indexes through (HelixContextManager), so a watched file becomes
    exactly the genes a manual `helix ingest` would make."""

    def ingest_path(self, path: str | Path | Sequence[str | Path], *, project: str | None = None,
                    embed: bool = True, progress: Callable[[int, int, str], None] | None = None,
                    confine_to: Sequence[str | Path] | None = None) -> IngestReport: ...

    def start_parse_workers(self) -> None: ...
