"""One error tree for everything Helix refuses or cannot do, and one map from it to HTTP.

Why: a route that catches ``ValueError`` turns a bug into "bad request". Library code raises a
``HelixError`` subclass that names what went wrong and what to do; the server maps the class (not
the message) to a status in exactly one place, ``http_status``. Anything that is not a
``HelixError`` is a bug and answers 500 with the details in the log, never in the body.

The classes keep ``ValueError`` as a second base where callers outside the server (the CLI, tests,
older scripts) already catch ``ValueError`` for bad input; the server never relies on that.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ExportFormatError",
    "Forbidden",
    "GenomeError",
    "GenomeVersionError",
    "HelixError",
    "IngestRefused",
    "InvalidRequest",
    "NotFound",
    "SourceError",
    "SourceNotFound",
    "Unavailable",
    "UnprocessableRequest",
    "UpstreamError",
    "http_status",
]


class HelixError(Exception):
    """Root of every error Helix raises on purpose; the message says what to do about it."""

    status: int = 400
    kind: str = "invalid_request_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(HelixError, ValueError):
    """The caller sent something that cannot be answered as asked (an empty query, a bad range)."""


class UnprocessableRequest(InvalidRequest):
    """The request parsed but its fields do not fit together (both or neither of two, empty content)."""

    status = 422


class Forbidden(HelixError, PermissionError):
    """The request is understood and refused by policy (a path outside the allowed ingest roots)."""

    status = 403
    kind = "forbidden"


class Unavailable(HelixError, RuntimeError):
    """A part the request needs is not running yet (the backend is starting); retrying later helps."""

    status = 503
    kind = "unavailable"


class NotFound(HelixError, LookupError):
    """The named thing (a gene, a source, a project) does not exist here."""

    status = 404
    kind = "not_found"


class ConfigError(HelixError, ValueError):
    """A setting is unknown, has the wrong type, or the file cannot be parsed."""

    status = 500
    kind = "config_error"


class GenomeError(HelixError, RuntimeError):
    """The genome cannot be opened or written (locked, full disk, damaged)."""

    status = 503
    kind = "genome_error"


class GenomeVersionError(GenomeError):
    """Written by a newer Helix: refused, never modified."""

    status = 409
    kind = "genome_version_error"


class SourceError(HelixError, ValueError):
    """A folder cannot be a source (missing, not a folder, outside the allowed roots)."""


class SourceNotFound(NotFound, SourceError):
    """The folder named is not a source here (``helix sources list`` shows them)."""


class IngestRefused(HelixError, ValueError):
    """Text or a file that will not be stored (API text that would shadow a file, a refused path)."""

    status = 409
    kind = "conflict"


class ExportFormatError(HelixError, ValueError):
    """The file is not a Helix genome export this Helix can read; nothing was written."""


class UpstreamError(HelixError):
    """A model server (Ollama, an OpenAI-compatible server, the ribosome's model) could not answer."""

    status = 502
    kind = "upstream_error"


def http_status(exc: HelixError) -> int:
    """The HTTP status for a Helix error: the class decides, so one place maps all of them."""
    return int(getattr(exc, "status", 400))
