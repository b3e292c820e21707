"""Helix Context: a local context server for LLMs.

    from helix_context import HelixContextManager, load_config
    helix = HelixContextManager(load_config())
    helix.ingest_path("~/code/project")
    window = helix.build_context("where is the port configured?")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from helix_context.config import Settings, load_config

if TYPE_CHECKING:
    from helix_context.manager import HelixContextManager

__all__ = ["HelixContextManager", "Settings", "load_config"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # the manager pulls in numpy and the store: import it only when asked for
    if name == "HelixContextManager":
        from helix_context.manager import HelixContextManager

        return HelixContextManager
    raise AttributeError(name)
