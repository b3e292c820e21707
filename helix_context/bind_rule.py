"""The one bind rule: a backend that listens beyond this machine needs HELIX_API_KEY.

Why a module of its own, with nothing but the standard library: every way of starting
the backend must apply the same rule before anything listens — `helix serve`, the
supervisor (`helix supervise`, the tray) before it spawns a backend, and the backend's own
start-up, which is all that runs under `python -m uvicorn helix_context.server:app`.
The supervisor may not import the server (see DESIGN.md), so the rule lives here.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence

HOW_TO_SET_A_KEY = (
    "Set a key first: HELIX_API_KEY=<a long random secret> in the environment of the backend (and of the "
    "supervisor or tray that starts it), e.g. `HELIX_API_KEY=$(python -c \"import secrets; "
    "print(secrets.token_urlsafe(32))\") helix serve --host 0.0.0.0`; clients then send it as "
    "'Authorization: Bearer <key>'. Or bind 127.0.0.1 (the default)."
)


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host in ("localhost", "testclient"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def bind_refusal(host: str, api_key: str) -> str | None:
    """Why binding `host` is refused (None: allowed)."""
    if is_loopback(host) or api_key:
        return None
    shown = host or "every interface"
    return (f"refusing to listen on {shown}: a non-loopback address exposes the genome to the network, "
            f"and no HELIX_API_KEY is set. {HOW_TO_SET_A_KEY}")


def uvicorn_host(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str | None:
    """The host a `python -m uvicorn … --host H` command line binds (None: not uvicorn's command line).

    The backend's start-up reads it from its own command line: uvicorn does not tell the app where it
    listens, and `--host 0.0.0.0` there bypasses [server] host."""
    env = os.environ if env is None else env
    if not argv or "uvicorn" not in os.path.basename(os.path.dirname(argv[0]) or "") + os.path.basename(argv[0]):
        return None
    host = env.get("UVICORN_HOST") or "127.0.0.1"
    for i, arg in enumerate(argv):
        if arg == "--host" and i + 1 < len(argv):
            host = argv[i + 1]
        elif arg.startswith("--host="):
            host = arg.split("=", 1)[1]
    return host
