"""A real genome, a real SourcesService and real file events (watchfiles), native or polling."""

from __future__ import annotations

import os
import subprocess
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


def git(cwd: Path, *args: str) -> str:
    """The real `git` in `cwd`, with no user or system configuration (a test's repositories are its own)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
           "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def git_repo(root: Path, files: dict[str, str], *, origin: bool = False) -> Path:
    """A repository on `main` holding `files`, committed; `origin`: its remote default branch recorded as
    main (what `git clone` writes: refs/remotes/origin/HEAD → refs/remotes/origin/main)."""
    for name, text in files.items():
        write(root / name, text)
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "main")
    if origin:
        git(root, "remote", "add", "origin", "https://example.com/repo.git")
        git(root, "update-ref", "refs/remotes/origin/main", "HEAD")
        git(root, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
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
