"""HelixContextManager: the one object that owns the genome and the optional parts.

The Python API of the original Helix (`HelixContextManager(load_config())`) and
the backend's app state are the same object, so the CLI, the server and the
tests exercise one code path.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from helix_context import signals
from helix_context.config import Settings, load_config


class HelixContextManager:
    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or load_config()
        self._health_history: collections.deque[dict[str, Any]] = collections.deque(maxlen=120)

    # ── ribosome ──
    def ribosome_state(self) -> dict[str, Any]:
        return {
            "enabled": self.settings.ribosome.enabled,
            "paused": signals.ribosome_paused(self.settings.home),
            "model": self.settings.ribosome.model,
        }

    def set_ribosome_paused(self, paused: bool) -> None:
        signals.set_ribosome_paused(paused, actor="backend", home=self.settings.home)

    # ── health ──
    def health(self) -> dict[str, Any]:
        report = {"status": "ok", "parts": {}, "at": time.time()}
        self._health_history.append({"at": report["at"], "status": report["status"]})
        return report

    def health_history(self) -> list[dict[str, Any]]:
        return list(self._health_history)

    def close(self) -> None:
        pass
