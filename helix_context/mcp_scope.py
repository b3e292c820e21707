"""MCP scoping: the client's workspace roots (MCP `roots/list`) → the projects of the sources holding them.

Why: an agent working in one checkout should get that checkout's code, not a look-alike from
another project in the same genome. The MCP server asks its client for the roots on each
scoped tool call (roots change when the user opens another folder), and scopes to the projects
of the sources that contain a root or lie inside one. A client without roots (or one that
fails to answer) gets no scope: the backend's evidence decides.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
from mcp import types

from helix_context.sources.projects import projects_for_paths

log = logging.getLogger("helix.mcp")

ROOTS_TIMEOUT_S = 5.0


def root_path(uri: str) -> Path | None:
    """A `file://` root as a local path (other schemes name nothing on this machine)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = unquote(parsed.path)
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # file:///C:/work → C:/work
        path = path[1:]
    return Path(path)


async def client_roots(ctx: Any) -> list[Path]:
    """The client's workspace roots, or [] when it has none, does not offer them, or does not answer."""
    if ctx is None:
        return []
    try:
        session = ctx.request_context.session
        with warnings.catch_warnings():  # roots are deprecated in newer protocol revisions, still what clients send
            warnings.simplefilter("ignore")
            # asked only of a client that declared roots (as the protocol says): one that ignores the request
            # cost every scoped call ROOTS_TIMEOUT_S
            if not session.check_client_capability(types.ClientCapabilities(roots=types.RootsCapability())):
                return []
            with anyio.fail_after(ROOTS_TIMEOUT_S):
                result = await session.list_roots()
    except Exception as exc:  # no roots capability, an old client, a timeout: no scope (never a failed tool)
        log.info("client roots unavailable (%s): no project scope", exc)
        return []
    paths = [root_path(str(root.uri)) for root in getattr(result, "roots", []) or []]
    return [p for p in paths if p is not None]


def roots_project(sources: Iterable[Mapping[str, Any]], roots: Iterable[Path]) -> str | None:
    """'a,b' for the projects of the sources (GET /sources rows) that hold a root or lie inside one."""
    # "folder": where the source is on this machine (a team genome stores `@ROOT/…`: sources/names.py)
    names = projects_for_paths(((str(s.get("folder") or s.get("path", "")), s.get("project")) for s in sources
                                if s.get("state") != "removing"), roots)
    return ",".join(names) or None
