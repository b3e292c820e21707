"""Fixtures shared by the retrieval tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helix_context import HelixContextManager
from helix_context.config import Settings


@pytest.fixture
def dense(settings: Settings) -> Iterator[HelixContextManager]:
    """A manager with the real embedding model (no NER): the tests that rank by meaning need it."""
    manager = HelixContextManager(settings.replace(ner={"enabled": False}))
    if manager.embedder is None:
        pytest.skip(f"embeddings unavailable: {manager.embedder_part.detail}")
    yield manager
    manager.close()
