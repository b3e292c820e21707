"""Every failure leaves the server as a JSON body with a message that says what to fix.

Why one handler per family: library code raises a ``HelixError`` subclass (helix_context/errors.py)
and ``http_status`` decides its status, so routes never translate exceptions themselves. Anything
else is a bug: it answers 500 with the exception's class name only; the traceback goes to the log.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from helix_context.errors import HelixError, http_status

log = logging.getLogger("helix.server")


def error_body(message: str, kind: str, **extra: object) -> dict[str, dict[str, object]]:
    return {"error": {"message": message, "type": kind, **extra}}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors()[:10]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        message = "invalid request: " + "; ".join(problems)
        return JSONResponse(error_body(message, "invalid_request_error"), status_code=422)

    @app.exception_handler(HelixError)
    async def _helix(request: Request, exc: HelixError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.kind), status_code=http_status(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(exc.detail), "http_error"), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(
            error_body(f"internal error ({type(exc).__name__}); the server logged the details and keeps serving",
                       "internal_error"),
            status_code=500,
        )
