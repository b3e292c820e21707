"""Telling a PostgreSQL URL from a file path, and showing one safely — without importing the driver."""

from __future__ import annotations

from helix_context.redact import redact_url


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def safe_url(url: str) -> str:
    """The URL as logs, /health and the dashboard may show it: no user or password, no query values."""
    return redact_url(url)
