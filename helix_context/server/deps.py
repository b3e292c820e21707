"""FastAPI dependencies: how a route reaches the configured Helix object."""

from __future__ import annotations

from fastapi import Request

from helix_context.config import Settings
from helix_context.manager import HelixContextManager


# async: a plain `def` dependency would send every request through the threadpool just to read app state
async def get_helix(request: Request) -> HelixContextManager:
    return request.app.state.helix


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings
