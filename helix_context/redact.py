"""Keep secrets out of the access log: query-string values are replaced before a line is written.

Why: a browser can only hand the dashboard its API key in the URL (``/dashboard?api_key=…``),
and uvicorn's access log writes every request's full path; the supervisor keeps that output
in backend.log. The names of the parameters stay (useful when reading the log), their values
do not.
"""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "***"


# scheme://, then everything up to the LAST "@": a password may hold "?", "#", "/" or "@" unencoded (a typo in a
# URL), and splitting at those first showed part of it
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)(.*)@", re.DOTALL)


def redact_url(url: str) -> str:
    """``/path?a=1&api_key=s`` → ``/path?a=***&api_key=***``; a URL's user:password part likewise."""
    found = _USERINFO.match(url)
    if found:
        url = f"{found.group(1)}{REDACTED}@{url[found.end():]}"
    path, sep, query = url.partition("?")
    if not sep:
        return path
    fields = []
    for field in query.split("&"):
        name, eq, _value = field.partition("=")
        fields.append(f"{name}={REDACTED}" if eq else name)
    return f"{path}?{'&'.join(fields)}"


class RedactQueryStrings(logging.Filter):
    """uvicorn access records carry (client, method, full_path, http_version, status): redact the path."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], redact_url(args[2]), *args[3:])
        return True


def install() -> None:
    """Once per process (the app factory may run many times in one test session)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactQueryStrings) for f in logger.filters):
        logger.addFilter(RedactQueryStrings())
