"""The tray menu: pure text formatting + a pystray Menu whose items call the app's actions.

Nothing here needs a display: `status_lines(snapshot)` is plain data → text,
and `build_menu(app, Menu, MenuItem)` takes pystray's Menu/MenuItem classes
(any backend, the `dummy` one included), so a test can build the real menu and
call `menu.items[i](icon)` exactly as a click would.

Layout (indices of `menu.items`, which keeps hidden items and separators):
  0 Backend: …          (disabled status lines)
  1 Genes: …
  2 GPU: …
  3 Models: …
  4 Pressure: …         (only while there is pressure)
  5 ----
  6 Open dashboard      (default action: a click on the icon)
  7 Pause ribosome / Resume ribosome
  8 Restart backend
  9 Open logs folder
 10 Open Grafana        (only when [telemetry] grafana_url is set)
 11 ----
 12 Indexing … / Index up to date, N folders   (sources_menu.py: the living index)
 13 Add folder…
 14 Pause indexing / Resume indexing
 15 ----
 16 Quit
"""

from __future__ import annotations

import time
from typing import Any, Callable, Protocol

from launcher import sources_menu

GIB = 1024 ** 3


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


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / GIB:.1f}"


def _size(n: int | None) -> str:
    if not n:
        return "0 B"
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def status_lines(snapshot: dict[str, Any] | None) -> dict[str, str]:
    """Snapshot → the menu's status lines (also used by `helix-status`)."""
    if not snapshot:
        return {"backend": "Backend: no supervisor status yet", "genes": "Genes: unknown",
                "gpu": "GPU: unknown", "models": "Models: unknown", "pressure": ""}
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
        backend += f": {b['last_error'][:120]}"

    genes = snapshot.get("genes")
    genes_line = f"Genes: {genes:,}" if isinstance(genes, int) else "Genes: unknown"

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
    return {"backend": backend, "genes": genes_line, "gpu": gpu, "models": models_line, "pressure": pressure}


def ribosome_label(snapshot: dict[str, Any] | None) -> str:
    return "Resume ribosome" if snapshot and snapshot.get("ribosome_paused") else "Pause ribosome"


def build_menu(app: TrayActions, Menu: Any, MenuItem: Any) -> Any:
    """The tray's pystray Menu. Texts and visibility are read from `app.snapshot` at render time."""

    def line(key: str) -> Callable[[Any], str]:
        return lambda _item: status_lines(app.snapshot)[key]

    sources = sources_menu.for_app(app)
    sources.start_polling()

    return Menu(
        MenuItem(line("backend"), None, enabled=False),
        MenuItem(line("genes"), None, enabled=False),
        MenuItem(line("gpu"), None, enabled=False),
        MenuItem(line("models"), None, enabled=False),
        MenuItem(line("pressure"), None, enabled=False,
                 visible=lambda _item: bool(status_lines(app.snapshot)["pressure"])),
        Menu.SEPARATOR,
        MenuItem("Open dashboard", lambda _icon, _item: app.open_dashboard(), default=True),
        MenuItem(lambda _item: ribosome_label(app.snapshot), lambda _icon, _item: app.toggle_ribosome()),
        MenuItem("Restart backend", lambda _icon, _item: app.restart_backend()),
        MenuItem("Open logs folder", lambda _icon, _item: app.open_logs()),
        MenuItem("Open Grafana", lambda _icon, _item: app.open_grafana(),
                 visible=lambda _item: bool(app.grafana_url)),
        Menu.SEPARATOR,
        *sources.items(Menu, MenuItem),
        Menu.SEPARATOR,
        MenuItem("Quit", lambda icon, _item: app.quit(icon)),
    )


def find_item(menu: Any, text: str) -> Any:
    """The first item of `menu.items` whose text starts with `text` (tests, scripting)."""
    for item in menu.items:
        if item.text.startswith(text):
            return item
    raise KeyError(text)
