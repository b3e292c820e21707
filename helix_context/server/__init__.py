"""The backend: `create_app(settings)`; the module-level `app` uses the default settings.

`python -m uvicorn helix_context.server:app` and `helix serve` both end here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from helix_context.server.factory import create_app

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["create_app", "app"]


def __getattr__(name: str) -> Any:
    # Built on first access so importing the package (tests, the CLI) never reads
    # helix.toml or opens the genome as a side effect.
    if name == "app":
        application: FastAPI = create_app()
        globals()["app"] = application
        return application
    raise AttributeError(name)
