"""`helix-tray`: the supervisor plus a system-tray icon (pystray).

The icon's colour is the state (running / starting / GPU pressure / stopped /
FATAL); the menu shows the status lines and offers the dashboard, ribosome
pause, a backend restart, the logs folder, Grafana and Quit.

Where no tray can work (no display, no usable pystray backend) it says what to
install and keeps supervising without an icon, so the backend and the web
dashboard still come up. `helix-tray --headless` is `helix supervise`.

On Linux the pystray backend is chosen before pystray is imported:
appindicator when its gi typelibs load, else gtk, else xorg (PYSTRAY_BACKEND
set by the user wins).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from helix_context.config import ConfigError, Settings, load_config

from launcher import desktop
from launcher.icons import STATE_LABELS, make_icon
from launcher.menu import build_menu
from supervisor import EXIT_LOCKED, LockHeld, Supervisor, install_stop_signals, run_supervisor
from supervisor.logs import setup_supervisor_logging
from supervisor.status import icon_state

log = logging.getLogger("helix.tray")

INSTALL_HINT = (
    "For a tray icon on Linux install the AppIndicator bindings and use a venv that sees them:\n"
    "  sudo apt install python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1\n"
    "  python3 -m venv --system-site-packages .venv   (start-helix-tray.sh does this when python3-gi is present)\n"
    "or, for the basic X11 icon without a menu, `pip install python-xlib` and a tray host (trayer, stalonetray).\n"
    "GNOME needs the 'AppIndicator and KStatusNotifierItem Support' extension to show tray icons."
)


# ── pystray backend choice (Linux) ────────────────────────────────────────────


def _gi_ok(with_indicator: bool) -> bool:
    try:
        import gi  # type: ignore[import-not-found]

        gi.require_version("Gtk", "3.0")
        from gi.repository import Gtk  # type: ignore[import-not-found]  # noqa: F401

        if not with_indicator:
            return True
        for name in ("AyatanaAppIndicator3", "AppIndicator3"):
            try:
                gi.require_version(name, "0.1")
                importlib.import_module(f"gi.repository.{name}")
                return True
            except (ValueError, ImportError):
                continue
        return False
    except (ImportError, ValueError, RuntimeError):
        return False


def _xlib_ok() -> bool:
    try:
        import Xlib.display  # noqa: F401
    except ImportError:
        return False
    return True


def _purge_pystray() -> None:
    for name in [m for m in sys.modules if m == "pystray" or m.startswith("pystray.")]:
        del sys.modules[name]


def backend_candidates(env: dict[str, str] | os._Environ = os.environ, platform: str = sys.platform,
                       probe_gi: Callable[[bool], bool] = _gi_ok,
                       probe_xlib: Callable[[], bool] = _xlib_ok) -> tuple[list[str], str]:
    """The pystray backends worth trying, best first, or ([], why not)."""
    chosen = env.get("PYSTRAY_BACKEND", "")
    if chosen:
        return [chosen], ""
    if platform in ("win32", "darwin"):
        return [""], ""  # pystray's own choice is the only one there
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return [], "no graphical session (DISPLAY / WAYLAND_DISPLAY are not set)"
    out = []
    if probe_gi(True):
        out.append("appindicator")
    if probe_gi(False):
        out.append("gtk")
    if env.get("DISPLAY") and probe_xlib():
        out.append("xorg")
    if not out:
        return [], "neither the gi typelibs (Gtk 3 / AppIndicator) nor python-xlib with an X display are available"
    return out, ""


def load_pystray() -> tuple[Any | None, str]:
    """Import pystray with the first backend that works; (module, "") or (None, why)."""
    candidates, why = backend_candidates()
    errors = []
    for name in candidates:
        if name:
            os.environ["PYSTRAY_BACKEND"] = name
        try:
            import pystray

            return pystray, ""
        except Exception as exc:  # noqa: BLE001 - ImportError, Xlib display errors, gi errors
            errors.append(f"{name or 'default'}: {exc}")
            _purge_pystray()
    if errors:
        why = "; ".join(errors)
    return None, why


# ── the app ───────────────────────────────────────────────────────────────────


class TrayApp:
    """Menu actions and icon updates around one Supervisor. No display needed to call the actions."""

    def __init__(self, settings: Settings, supervisor: Supervisor, *,
                 open_url: Callable[[str], Any] = desktop.open_url,
                 open_path: Callable[[Path], Any] = desktop.open_path) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self._open_url = open_url
        self._open_path = open_path
        self.snapshot: dict[str, Any] | None = supervisor.snapshot()
        self.icon: Any = None
        self._state = ""
        self._pressure_seen = False
        self._quit = threading.Event()
        self._dirty = threading.Event()
        supervisor.add_listener(self.on_snapshot)

    @property
    def grafana_url(self) -> str:
        return self.settings.telemetry.grafana_url

    @property
    def dashboard_url(self) -> str:
        return f"{self.settings.base_url}/dashboard"

    # menu actions
    def open_dashboard(self) -> None:
        self._open_url(self.dashboard_url)

    def toggle_ribosome(self) -> None:
        paused = bool(self.snapshot and self.snapshot.get("ribosome_paused"))
        self.supervisor.set_ribosome_paused(not paused, actor="tray")
        self.snapshot = self.supervisor.snapshot()
        self._refresh_menu()

    def restart_backend(self) -> None:
        self.supervisor.request_restart("Restart backend (tray)")

    def open_logs(self) -> None:
        self._open_path(self.settings.logs_dir)

    def open_grafana(self) -> None:
        if self.grafana_url:
            self._open_url(self.grafana_url)

    def quit(self, icon: Any = None) -> None:
        """Hide the icon, then stop supervising; the backend stops only if this tray started it."""
        self.request_quit(icon)
        self.supervisor.shutdown()

    def request_quit(self, icon: Any = None) -> None:
        """Hide the icon and end its loop (safe in a signal handler); main() then shuts down."""
        self._quit.set()
        self._dirty.set()
        for target in {id(t): t for t in (icon, self.icon) if t is not None}.values():
            try:
                target.stop()
            except Exception:  # noqa: BLE001 - gtk may raise GLib.GError on stop
                log.debug("icon stop failed", exc_info=True)

    @property
    def quitting(self) -> bool:
        return self._quit.is_set()

    # icon
    def title(self, snap: dict[str, Any] | None = None) -> str:
        state = icon_state(snap if snap is not None else self.snapshot)
        return f"Helix Context - {STATE_LABELS.get(state, state)}"  # ASCII: X11 window names are latin-1

    def image(self) -> Any:
        return make_icon(icon_state(self.snapshot))

    def on_snapshot(self, snap: dict[str, Any]) -> None:
        """Supervisor listener: never touches the UI itself (a backend may need the UI thread,
        which may be waiting for the supervisor); the updater thread applies the change."""
        self.snapshot = snap
        self._dirty.set()

    def _updater(self) -> None:
        while not self._quit.is_set():
            self._dirty.wait()
            self._dirty.clear()
            if self._quit.is_set():
                return
            self.apply_snapshot()

    def apply_snapshot(self) -> None:
        icon, snap = self.icon, self.snapshot
        if icon is None or snap is None:
            return
        state = icon_state(snap)
        try:
            if state != self._state:
                # title first: pystray's xorg backend sets the window name without flushing the display;
                # the icon update that follows draws and flushes, carrying the new name with it
                icon.title = self.title(snap)
                icon.icon = make_icon(state)
                # only now: an update that failed (the icon window not ready yet) is retried on the
                # next snapshot instead of being taken as done
                self._state = state
            pressure = bool((snap.get("pressure") or {}).get("active"))
            if pressure and not self._pressure_seen and getattr(icon, "HAS_NOTIFICATION", False):
                icon.notify("; ".join(snap["pressure"]["reasons"]), "Helix: GPU pressure")
            self._pressure_seen = pressure
        except Exception:  # noqa: BLE001 - a display hiccup must not stop supervising
            log.warning("icon update failed (retried on the next snapshot)", exc_info=True)
        self._refresh_menu()

    def _refresh_menu(self) -> None:
        icon = self.icon
        if icon is None or not getattr(icon, "HAS_MENU", False) or self._quit.is_set():
            return
        try:
            icon.update_menu()
        except Exception:  # noqa: BLE001
            log.debug("menu update failed", exc_info=True)

    def make_icon(self, pystray: Any) -> Any:
        menu = build_menu(self, pystray.Menu, pystray.MenuItem)
        self._state = icon_state(self.snapshot)
        self.icon = pystray.Icon("helix-context", self.image(), self.title(), menu=menu)
        return self.icon

    def start_updates(self) -> None:
        """Apply snapshots to the icon from a thread of our own (call once the icon loop runs)."""
        threading.Thread(target=self._updater, name="helix-tray-updater", daemon=True).start()
        self._dirty.set()


def _wait_headless(sup: Supervisor) -> int:
    stop = threading.Event()
    install_stop_signals(stop.set, lambda: sup.request_restart("SIGHUP"))
    try:
        while not sup.wait(0.25) and not stop.is_set():
            pass
    except KeyboardInterrupt:
        pass
    sup.shutdown()
    return sup.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="helix-tray", description="Helix Context: supervisor + tray icon")
    parser.add_argument("--headless", action="store_true",
                        help="no tray icon: supervise the backend only (same as `helix supervise`)")
    parser.add_argument("--config", help="helix.toml to use (default: HELIX_CONFIG, HELIX_HOME, the repo's)")
    args = parser.parse_args(argv)
    if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>` prints every thread's stack: a stuck icon can be diagnosed
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        settings = load_config(args.config)
    except ConfigError as exc:
        print(f"helix-tray: {exc}", file=sys.stderr)
        return 2
    if args.headless:
        return run_supervisor(settings, headless=True)

    pystray, why = load_pystray()
    if pystray is None:
        print(f"helix-tray: no system tray available ({why}).\n{INSTALL_HINT}\n"
              f"Running the supervisor without an icon; the dashboard is {settings.base_url}/dashboard",
              file=sys.stderr, flush=True)
        return run_supervisor(settings, headless=True)

    setup_supervisor_logging(settings.logs_dir, max_bytes=settings.supervisor.log_max_bytes,
                             backups=settings.supervisor.log_backups, stderr=True)
    sup = Supervisor(settings, headless=False)
    app = TrayApp(settings, sup)
    try:
        sup.start()
    except LockHeld as exc:
        print(f"helix-tray: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    log.info("tray backend: %s", os.environ.get("PYSTRAY_BACKEND") or "platform default")
    try:
        icon = app.make_icon(pystray)
        install_stop_signals(lambda: app.request_quit(icon), lambda: sup.request_restart("SIGHUP"))

        def setup(ic: Any) -> None:
            ic.visible = True
            app.start_updates()

        icon.run(setup=setup)
    except Exception as exc:  # noqa: BLE001 - a tray that cannot start is not a reason to stop serving
        if not app.quitting:
            print(f"helix-tray: the tray icon failed ({type(exc).__name__}: {exc}).\n{INSTALL_HINT}\n"
                  f"Supervising without an icon; the dashboard is {settings.base_url}/dashboard",
                  file=sys.stderr, flush=True)
            app.icon = None
            return _wait_headless(sup)
    if not app.quitting and sup.running:
        # the icon loop ended on its own (tray host gone): keep serving until Ctrl-C
        log.warning("the tray icon loop ended; supervising without an icon")
        app.icon = None
        return _wait_headless(sup)
    sup.shutdown()
    return sup.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
