"""Which project a proxied chat is scoped to, and what the proxy tells the caller about its context.

Why its own module: chat.py stays about forwarding; the rules of scoping a chat live here and
chat.py calls them with a line each.

The project comes from the `X-Helix-Project` header (one name or a comma-separated list), else
the first `[proxy] model_projects` entry ("model=project"; a model ending in `*` matches a
prefix) that names the chat's model, else `[proxy] project`; none of these: evidence decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from helix_context.config import ProxySettings

HEADER = "x-helix-project"
CONTEXT_HEADER = "X-Helix-Context"  # "injected" or "none": whether the forwarded chat carries Helix context


def chat_project(headers: Mapping[str, str], model: str, settings: ProxySettings) -> str | None:
    """The project names for this chat ("a" or "a,b"), or None: the evidence decides."""
    named = (headers.get(HEADER) or "").strip()
    if named:
        return named
    for entry in settings.model_projects:
        pattern, sep, project = entry.partition("=")
        pattern, project = pattern.strip(), project.strip()
        if not sep or not project:
            continue
        if pattern == model or (pattern.endswith("*") and model.startswith(pattern[:-1])):
            return project
    return settings.project.strip() or None


def context_headers(injected: bool, window: Any) -> dict[str, str]:
    """Response headers: whether context went upstream, and from which project."""
    headers = {CONTEXT_HEADER: "injected" if injected else "none"}
    project = getattr(window, "project", None)
    if project:
        headers["X-Helix-Project"] = quote(str(project), safe=",-_. ")  # header values are latin-1
    return headers
