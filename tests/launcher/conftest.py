"""Fixtures for the tray / status tests. The supervisor test kit is shared from tests/supervisor."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "supervisor"))

from supkit import ollama_stub, supervisors  # noqa: E402,F401  (shared fixtures)


@pytest.fixture(scope="session")
def pystray_dummy():
    """pystray's Menu/MenuItem/Icon without a display: the `dummy` backend (unless pystray
    was already imported with a real one, whose Menu/MenuItem are the same classes)."""
    if "pystray" not in sys.modules:
        previous = os.environ.get("PYSTRAY_BACKEND")
        os.environ["PYSTRAY_BACKEND"] = "dummy"
        try:
            import pystray
        finally:
            if previous is None:
                os.environ.pop("PYSTRAY_BACKEND", None)
            else:
                os.environ["PYSTRAY_BACKEND"] = previous
    import pystray

    return pystray

