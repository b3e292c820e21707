"""Fixtures for the tray / status tests. The supervisor test kit is shared from tests/supervisor."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "supervisor"))

from supkit import ollama_stub, supervisors  # noqa: F401 - (shared fixtures)


@pytest.fixture(scope="session")
def pystray_dummy():
    """pystray's Menu/MenuItem/Icon without a display: imported the way the tray imports it (the
    `dummy` backend unless pystray was already imported with a real one; Menu/MenuItem are the same)."""
    from launcher.backends import import_pystray

    return import_pystray()
