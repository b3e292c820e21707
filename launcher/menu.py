"""The tray menu as plain data, built from a list of item providers.

Every tray backend shows the same entries: pystray's own menus (AppIndicator,
GTK) get them through `to_pystray`, Helix's own pop-up (the XEmbed icon, whose
pystray backend has no menu) gets them through `launcher.popup`. Nothing here
needs a display, so a test builds the real menu and calls an entry's action
exactly as a click does.

A provider is `provider(app) -> list[Entry]`; each entry names its section, and
sections are laid out in SECTION_ORDER with a separator between them, so status
lines always come first whichever provider adds them. Another part of Helix
adds its entries ("Add folder…", "Pause indexing", an indexing status line) by
appending one provider to PROVIDERS.

An entry that does nothing in the current state is either left out (the helper
model's pause when no helper model is configured) or shown greyed with the
reason in its text (menus have no tooltips on every desktop).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol
from collections.abc import Callable, Sequence

from launcher import sources_menu

log = logging.getLogger("helix.tray")

GIB = 1024 ** 3

SECTION_ORDER = ("status", "actions", "sources", "places", "app")


@dataclass(frozen=True)
class Entry:
    """One menu line. `action` None + enabled False is a status line."""

    text: str
    action: Callable[[], Any] | None = None
    section: str = "actions"
    enabled: bool = True
    default: bool = False  # the icon's click / activate runs this one

    @property
    def is_status(self) -> bool:
        return self.action is None


class TrayActions(Protocol):
    snapshot: dict[str, Any] | None

    def open_dashboard(self) -> None: ...
    def toggle_ribosome(self) -> None: ...
    def restart_backend(self) -> None: ...
    def open_logs(self) -> None: ...
    def open_grafana(self) -> None: ...
    def quit(self, icon: Any = None) -> None: ...
    @property
    def grafana_url(self) -> str: ...
    @property
    def helper_model_configured(self) -> bool: ...


# ── status lines (also used by `helix-status`) ────────────────────────────────


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / GIB:.1f}"


def _size(n: int | None) -> str:
    if not n:
        return "0 B"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _clip(text: str, limit: int) -> str:
    """At most `limit` characters for a menu line, cut at a word and marked (a cut mid-word read as a typo)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def status_lines(snapshot: dict[str, Any] | None) -> dict[str, str]:
    """Snapshot → the menu's status lines (also used by `helix-status`)."""
    if not snapshot:
        return {"backend": "Backend: no supervisor status yet", "genes": "Indexed chunks: unknown",
                "reembed": "", "gpu": "GPU: unknown", "models": "Models: unknown", "pressure": ""}
    b = snapshot.get("backend") or {}
    status = b.get("status", "stopped")
    backend = f"Backend: {status}"
    details = []
    if b.get("pid") and status in ("running", "starting"):
        details.append(f"pid {b['pid']}")
    if b.get("adopted"):
        details.append("adopted")
    if status == "running" and b.get("started_at"):
        details.append("since " + time.strftime("%H:%M", time.localtime(b["started_at"])))
    if b.get("restarts"):
        details.append(f"{b['restarts']} restart{'s' if b['restarts'] != 1 else ''}")
    if details:
        backend += f" ({', '.join(details)})"
    if status == "fatal" and b.get("last_error"):
        backend += f": {_clip(b['last_error'], 160)}"
    link = (b.get("health") or {}).get("genome_link") or {}
    if status == "running" and link.get("status") == "reconnecting":  # the team genome's server is away
        since = time.strftime("%H:%M", time.localtime(link["since"])) if link.get("since") else "now"
        backend += f" — team genome unreachable since {since}, retrying"

    genes = snapshot.get("genes")
    genes_line = f"Indexed chunks: {genes:,}" if isinstance(genes, int) else "Indexed chunks: unknown"
    job = (b.get("health") or {}).get("reembed") or {}
    reembed = ""
    if status == "running" and isinstance(job.get("done"), int) and isinstance(job.get("total"), int):
        # after [embedding] model changed: until done, genes not yet reached answer with less dense evidence
        reembed = f"Re-embedding for the new model: {job['done']:,} of {job['total']:,} chunks"
        if isinstance(job.get("percent"), int | float):
            reembed += f" ({job['percent']:.0f} %)"

    g = snapshot.get("gpu") or {}
    if g.get("available"):
        pct = g.get("used_pct")
        gpu = f"GPU: {_gib(g.get('used_bytes'))} / {_gib(g.get('total_bytes'))} GiB"
        if pct is not None:
            gpu += f" ({pct:.0f}%)"
    else:
        gpu = "GPU: none detected"

    o = snapshot.get("ollama") or {}
    models = snapshot.get("resident_models") or []
    if models:
        names = ", ".join(f"{m.get('name')} ({_size(m.get('size_vram') or m.get('size'))})" for m in models[:4])
        more = f" +{len(models) - 4}" if len(models) > 4 else ""
        models_line = f"Models: {names}{more}"
    elif o.get("reachable") is False:
        models_line = "Models: Ollama not reachable"
    elif o.get("reachable"):
        models_line = "Models: none resident"
    else:
        models_line = "Models: unknown"

    p = snapshot.get("pressure") or {}
    pressure = ("Pressure: " + "; ".join(p.get("reasons") or [])[:160]) if p.get("active") else ""
    return {"backend": backend, "genes": genes_line, "reembed": reembed, "gpu": gpu, "models": models_line,
            "pressure": pressure}


def backend_status(snapshot: dict[str, Any] | None) -> str:
    return ((snapshot or {}).get("backend") or {}).get("status", "stopped")


def helper_model_label(snapshot: dict[str, Any] | None) -> str:
    return "Resume helper model" if snapshot and snapshot.get("ribosome_paused") else "Pause helper model"


# ── providers ─────────────────────────────────────────────────────────────────


def supervisor_status(app: TrayActions) -> list[Entry]:
    lines = status_lines(app.snapshot)
    sources = getattr(app, "sources_menu", None)
    if sources is not None:  # GET /sources, polled every few seconds: the count /stats and the dashboard show
        genes, disk_full = sources.indexed()
        if genes is not None:
            lines["genes"] = f"Indexed chunks: {genes:,}"
        if disk_full:
            lines["genes"] += " — DISK FULL: reads only, indexing stopped"
    return [Entry(lines[key], section="status", enabled=False)
            for key in ("backend", "genes", "reembed", "gpu", "models", "pressure") if lines[key]]


def notice_lines(app: TrayActions) -> list[Entry]:
    """What the last failed action said (launcher/notices.py), as status lines above the rest."""
    notices = getattr(app, "notices", None)
    return [Entry(line, section="status", enabled=False) for line in (notices.lines() if notices else [])]


def backend_actions(app: TrayActions) -> list[Entry]:
    status = backend_status(app.snapshot)
    serving = status == "running"
    dash = "Open dashboard" if serving else f"Open dashboard (backend {status})"
    out = [Entry(dash, app.open_dashboard, enabled=serving, default=True)]
    if app.helper_model_configured:
        out.append(Entry(helper_model_label(app.snapshot), app.toggle_ribosome))
    if status in ("starting", "restarting"):
        out.append(Entry(f"Restart backend ({status}…)", app.restart_backend, enabled=False))
    elif status in ("stopped", "fatal"):
        out.append(Entry("Start backend", app.restart_backend))
    else:
        out.append(Entry("Restart backend", app.restart_backend))
    return out


def places(app: TrayActions) -> list[Entry]:
    out = [Entry("Open logs folder", app.open_logs, section="places")]
    if app.grafana_url:
        out.append(Entry("Open Grafana", app.open_grafana, section="places"))
    return out


def indexing(app: TrayActions) -> list[Entry]:
    """The living index (launcher/sources_menu.py): its status line, "Add folder…", pause / resume."""
    sources = sources_menu.for_app(app)
    sources.start_polling()  # once: later calls find the poller running
    return [Entry(sources.status_line(), section="status", enabled=False),
            Entry("Add folder…", sources.add_folder, section="sources"),
            Entry(sources.pause_label(), sources.toggle_pause, section="sources")]


def quit_entry(app: TrayActions) -> list[Entry]:
    return [Entry("Quit", app.quit, section="app")]


Provider = Callable[[TrayActions], Sequence[Entry]]

# The one place where menu entries come from. Add a provider here for new entries.
PROVIDERS: list[Provider] = [notice_lines, supervisor_status, backend_actions, indexing, places, quit_entry]


def collect(app: TrayActions, providers: Sequence[Provider] | None = None) -> list[Entry | None]:
    """Every provider's entries in section order; None marks a separator."""
    by_section: dict[str, list[Entry]] = {name: [] for name in SECTION_ORDER}
    for provider in (PROVIDERS if providers is None else providers):
        try:
            entries = list(provider(app))
        except Exception:  # one broken provider must not take the whole menu away
            log.warning("menu provider %s failed", getattr(provider, "__name__", provider), exc_info=True)
            continue
        for entry in entries:
            by_section.setdefault(entry.section, []).append(entry)
    out: list[Entry | None] = []
    for section in [*SECTION_ORDER, *(s for s in by_section if s not in SECTION_ORDER)]:
        if by_section[section]:
            if out:
                out.append(None)
            out.extend(by_section[section])
    return out


def default_entry(entries: Sequence[Entry | None]) -> Entry | None:
    return next((e for e in entries if e is not None and e.default), None)


def to_pystray(app: TrayActions, Menu: Any, MenuItem: Any,
               providers: Sequence[Provider] | None = None) -> Any:
    """A pystray Menu whose items are re-collected each time a backend renders it."""

    def item(entry: Entry | None) -> Any:
        if entry is None:
            return Menu.SEPARATOR
        action = entry.action
        return MenuItem(entry.text, (lambda _icon, _item: action()) if action else None,
                        enabled=entry.enabled, default=entry.default)

    def items() -> list[Any]:
        return [item(e) for e in collect(app, providers)]

    return Menu(items)


def find_entry(entries: Sequence[Entry | None], text: str) -> Entry:
    """The first entry whose text starts with `text` (tests, scripting)."""
    for entry in entries:
        if entry is not None and entry.text.startswith(text):
            return entry
    raise KeyError(text)
