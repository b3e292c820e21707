"""A real genome, a real SourcesService and real file events (watchfiles), native or polling."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helix_context.config import Settings


def wait_until(check: Callable[[], object], timeout: float = 15.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def fast_settings(settings: Settings, *, polling: bool = False, watch: bool = True) -> Settings:
    """No models (each test stays seconds long), one parsing process, short debounce."""
    return settings.replace(embedding={"enabled": False}, ner={"enabled": False}, ingest={"workers": 1},
                            sources={"watch": watch, "force_polling": polling, "poll_interval_ms": 100,
                                     "debounce_ms": 400, "quiet_ms": 60, "missing_check_s": 1.0})


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def make_tree(root: Path, n: int = 5) -> Path:
    for i in range(n):
        write(root / "src" / f"mod_{i}.py", f"def function_{i}():\n    \"\"\"Module {i} of the tree.\"\"\"\n"
                                              f"    return {i}\n")
    write(root / "README.md", "# Demo\n\nThe demo project keeps its settings in settings.toml.\n")
    return root


@pytest.fixture(params=["native", "polling"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def service_factory(settings: Settings) -> Iterator[Callable[..., object]]:
    from helix_context.manager import HelixContextManager, open_genome
    from helix_context.sources.service import SourcesService

    made: list[tuple[object, object]] = []

    def make(*, polling: bool = False, watch: bool = True, start: bool = True, with_manager: bool = False):
        """A started SourcesService (and, with_manager=True, the manager it indexes through)."""
        cfg = fast_settings(settings, polling=polling, watch=watch)
        genome = open_genome(cfg)
        service = SourcesService(genome, cfg)
        helix = HelixContextManager(cfg, genome=genome, sources=service)
        if start:
            service.start(helix)
        made.append((service, helix))
        return (service, helix) if with_manager else service

    yield make
    for service, helix in made:
        service.stop()
        helix.close()
