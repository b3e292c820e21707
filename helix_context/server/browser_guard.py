"""What a web page in the user's browser may ask of the server: the Host allow-list and the cross-site rule.

Why: every page the user opens can send requests to 127.0.0.1. Two attacks follow.
DNS rebinding: a page on ``evil.example`` re-points its own name at 127.0.0.1 and then
reads the genome as "same origin"; the only trace is the ``Host`` header, which still
says ``evil.example``. Cross-site requests: any page can *send* a POST (a form, a
``no-cors`` fetch) to 127.0.0.1 even though it cannot read the answer, which is enough
to shut the backend down or write to the genome. Browsers label such requests with
``Origin`` and ``Sec-Fetch-Site``; the CLI, the MCP server, the supervisor and the
OpenAI SDKs send neither, so refusing foreign labels costs them nothing.

Plain functions over header values, so the guard middleware (security.py) checks them
in the same pass as the API key, and every route, present or future, is covered.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})
LOOPBACK_NAMES = frozenset({"localhost"})
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """``name[:port]`` or ``[v6][:port]`` → (lower-case name without brackets, port); None when malformed."""
    value = value.strip()
    if not value:
        return None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[1:end], value[end + 1:]
        if rest and not rest.startswith(":"):
            return None
        port_text = rest[1:] if rest else None
    else:
        if value.count(":") > 1:  # a bare IPv6 address is not a valid Host
            return None
        name, _, port_text = value.partition(":")
        port_text = port_text if ":" in value else None
    port: int | None = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            return None
        port = int(port_text)
    name = name.lower().rstrip(".")
    return (name, port) if name else None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class HostPolicy:
    """The names this server answers to: loopback, the host it was configured with, and ``allowed_hosts``."""

    configured: str = "127.0.0.1"
    extra: frozenset[str] = frozenset()

    @classmethod
    def build(cls, configured_host: str, allowed_hosts: Iterable[str]) -> HostPolicy:
        names = set()
        for entry in allowed_hosts:
            parsed = split_host(entry)
            if parsed is not None:
                names.add(parsed[0])
        return cls(configured_host.strip().lower().strip("[]"), frozenset(names))

    def allows(self, name: str) -> bool:
        if name in LOOPBACK_NAMES or name in self.extra:
            return True
        address = _ip(name)
        if address is not None:
            if address.is_loopback:
                return True
            # bound to every interface: any address literal reaches it legitimately, and rebinding
            # needs a *name*, so only names must be listed in allowed_hosts
            if self.configured in WILDCARD_BINDS:
                return True
        return name == self.configured and self.configured not in WILDCARD_BINDS

    def host_refusal(self, host_header: str | None) -> str | None:
        """Why a request with this Host header is refused, or None when it is allowed."""
        if host_header is None:
            return "the request has no Host header; send one (every HTTP/1.1 client does)"
        parsed = split_host(host_header)
        if parsed is None:
            return f"the Host header {host_header[:100]!r} is malformed"
        if self.allows(parsed[0]):
            return None
        return (f"Host {host_header[:100]!r} is not one this server answers to (a page using DNS rebinding sends "
                "its own name). Use http://127.0.0.1 or http://localhost, or add the name to "
                "[server] allowed_hosts in helix.toml")


def _origin_authority(origin: str) -> tuple[str, str, int | None] | None:
    scheme, sep, rest = origin.partition("://")
    if not sep or "/" in rest:
        return None
    parsed = split_host(rest)
    if parsed is None:
        return None
    name, port = parsed
    return scheme.lower(), name, port if port is not None else _DEFAULT_PORTS.get(scheme.lower())


def cross_site_refusal(method: str, host_header: str | None, origin: str | None, fetch_site: str | None,
                       *, websocket: bool = False) -> str | None:
    """Why a browser request that could change state is refused (None: allowed).

    Reads (GET/HEAD) pass: without CORS headers a foreign page cannot read the answer.
    A state-changing request passes when it carries no browser labels at all (CLI, SDKs,
    MCP, supervisor) or when both labels say it comes from this server's own origin (the
    dashboard); whatever its content type or body.
    """
    if method in SAFE_METHODS and not websocket:
        return None
    site = (fetch_site or "").strip().lower()
    if site and site not in ("same-origin", "none"):
        return f"Sec-Fetch-Site: {site[:40]}"
    if origin is None:
        return None
    origin = origin.strip()
    here = split_host(host_header or "")
    there = _origin_authority(origin)
    if there is None or here is None:
        return f"Origin {origin[:100]!r}"
    scheme, name, port = there
    here_port = here[1] if here[1] is not None else _DEFAULT_PORTS.get(scheme)
    if (name, port) != (here[0], here_port):
        return f"Origin {origin[:100]!r}"
    return None


def cross_site_message(method: str, path: str, label: str) -> str:
    return (f"cross-site request refused: {method} {path[:200]} came from another site ({label}). Routes that "
            "change state answer only this server's own pages (the dashboard) and clients that send no Origin "
            "(the helix CLI, MCP server, supervisor, OpenAI SDKs, curl)")
