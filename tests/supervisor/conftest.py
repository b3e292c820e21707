"""Fixtures for the supervisor tests (helpers live in supkit.py, shared with tests/launcher)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from supkit import OllamaStub, SupervisorFactory  # noqa: E402


@pytest.fixture
def supervisors():
    factory = SupervisorFactory()
    yield factory
    factory.close()


@pytest.fixture
def ollama_stub():
    stub = OllamaStub().start()
    yield stub
    stub.stop()
