"""A small HTTP client for the backend's health and admin routes (never raises on a down backend)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Probe:
    ok: bool
    body: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    status_code: int | None = None

    @property
    def pid(self) -> int | None:
        pid = self.body.get("pid")
        return pid if isinstance(pid, int) else None


class BackendClient:
    """One per thread (httpx pools are cheap); proxies from the environment are ignored: it is loopback."""

    def __init__(self, base_url: str, *, api_key: str = "", timeout: float = 2.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, trust_env=False)

    def _get(self, path: str, timeout: float | None) -> Probe:
        try:
            r = self._http.get(path, timeout=self.timeout if timeout is None else timeout)
        except httpx.HTTPError as exc:
            return Probe(False, error=f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        try:
            body = r.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):
            body = {}
        return Probe(r.status_code == 200, body, "" if r.status_code == 200 else f"HTTP {r.status_code}",
                     r.status_code)

    def health(self, timeout: float | None = None) -> Probe:
        """200 with a JSON status ok|degraded counts as serving."""
        p = self._get("/health", timeout)
        if p.ok and p.body.get("status") not in ("ok", "degraded"):
            p.ok = False
            p.error = f"unexpected /health body: {str(p.body)[:200]}"
        return p

    def stats(self, timeout: float | None = None) -> Probe:
        return self._get("/stats", timeout)

    def post(self, path: str, json: dict[str, Any] | None = None, timeout: float | None = None) -> Probe:
        try:
            r = self._http.post(path, json=json or {}, timeout=self.timeout if timeout is None else timeout)
        except httpx.HTTPError as exc:
            return Probe(False, error=f"{type(exc).__name__}: {exc}")
        try:
            body = r.json()
        except ValueError:
            body = {}
        return Probe(200 <= r.status_code < 300, body if isinstance(body, dict) else {},
                     "" if r.status_code < 300 else f"HTTP {r.status_code}", r.status_code)

    def close(self) -> None:
        self._http.close()
