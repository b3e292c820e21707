"""/sources: the folders kept indexed and watched (list, add, remove, pause, resume).

Thin: each route calls one method of the app's SourcesService (sources/service.py).
Adding answers at once (202); the folder is indexed in the background and
GET /sources shows the progress.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from helix_context.errors import Unavailable, UnprocessableRequest
from helix_context.sources.service import SourcesService


class AddSource(BaseModel):
    path: str = Field(..., min_length=1, max_length=4096, description="a folder on this machine")
    project: str | None = Field(None, max_length=200, description="project name (default: the repository's)")


class RemoveSource(BaseModel):
    path: str = Field(..., min_length=1, max_length=4096)
    forget: bool = Field(False, description="also retire the folder's genes (default: they stay, unwatched)")


def _service(request: Request) -> SourcesService:
    service = getattr(request.app.state, "sources", None)
    if service is None:
        raise Unavailable("sources are not running yet (the backend is starting); retry in a moment")
    return service


def list_sources(request: Request) -> dict[str, Any]:
    return _service(request).status()


def add_source(body: AddSource, request: Request) -> dict[str, Any]:
    return _service(request).add(body.path, body.project)  # SourceError: 400


async def remove_source(request: Request, path: str | None = Query(None, max_length=4096),
                        forget: bool = Query(False)) -> JSONResponse:
    """The folder in a JSON body {"path", "forget"} or in the query string (?path=…&forget=true)."""
    service = _service(request)
    if path is None:
        try:
            body = RemoveSource.model_validate_json(await request.body() or b"{}")
        except ValidationError:
            raise UnprocessableRequest('send {"path": "<folder>", "forget": false} or ?path=<folder>') from None
        path, forget = body.path, body.forget
    return JSONResponse(await asyncio.to_thread(service.remove, path, forget=forget))  # SourceNotFound: 404


def pause(request: Request) -> dict[str, Any]:
    return _service(request).pause()


def resume(request: Request) -> dict[str, Any]:
    return _service(request).resume()
