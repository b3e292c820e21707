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
from helix_context.server.security import BodyTooLarge

log = logging.getLogger("helix.server")


def error_body(message: str, kind: str, **extra: object) -> dict[str, dict[str, object]]:
    return {"error": {"message": message, "type": kind, **extra}}


def _unreadable_body(cause: BaseException) -> str:
    """What to fix in a body FastAPI could not read (it says only "There was an error parsing the body")."""
    if isinstance(cause, UnicodeDecodeError):
        return "the body is not UTF-8: send JSON encoded as UTF-8"
    if isinstance(cause, RecursionError):
        return "the body's JSON is nested too deeply to read: send a flatter document"
    return f"the body could not be read as JSON ({type(cause).__name__}): send a JSON object"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors()[:10]:
            if err.get("type") == "json_invalid":  # loc holds a character offset, not a field
                problems.append(f"the body is not valid JSON ({(err.get('ctx') or {}).get('error', 'invalid')} "
                                f"at character {err.get('loc', ('', '?'))[-1]})")
                continue
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        message = "invalid request: " + "; ".join(problems)
        return JSONResponse(error_body(message, "invalid_request_error"), status_code=422)

    @app.exception_handler(HelixError)
    async def _helix(request: Request, exc: HelixError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.kind), status_code=http_status(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        cause = exc.__cause__  # FastAPI turns any failure while reading a body into a bare 400
        if isinstance(cause, BodyTooLarge):  # a chunked body past the limit, stopped by the guard's receive
            return JSONResponse(BodyTooLarge.body(cause.limit), status_code=413)
        if exc.status_code == 400 and cause is not None:
            return JSONResponse(error_body(_unreadable_body(cause), "invalid_request_error"), status_code=400)
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
