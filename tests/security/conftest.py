"""Fixtures for the attack tests: the real app on uvicorn with the slow optional parts off."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from helix_context.config import Settings

_STUB = Path(__file__).resolve().parents[1] / "server" / "upstream_stub.py"


def load_upstream_stub():
    """tests/server/upstream_stub.py (a real HTTP server speaking Ollama's and OpenAI's wire formats)."""
    module = sys.modules.get("helix_upstream_stub")
    if module is None:
        spec = importlib.util.spec_from_file_location("helix_upstream_stub", _STUB)
        module = importlib.util.module_from_spec(spec)
        sys.modules["helix_upstream_stub"] = module
        spec.loader.exec_module(module)
    return module.UpstreamStub


@pytest.fixture
def lean(settings: Settings) -> Settings:
    """No embeddings, NER model or headroom: the attacks do not need them and the tests stay fast."""
    return settings.replace(embedding={"enabled": False}, ner={"enabled": False}, assembly={"headroom": False})


@pytest.fixture
def server(lean: Settings, server_factory):
    return server_factory(lean)


@pytest.fixture
def upstream_stub():
    """A started stub upstream (OpenAI and Ollama wire formats); stopped after the test."""
    stub = load_upstream_stub()().start()
    yield stub
    stub.stop()
