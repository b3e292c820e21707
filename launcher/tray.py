"""`helix-tray`: the supervisor plus a system-tray icon (pystray).

The icon's colour is the state (running / starting / GPU pressure / stopped /
FATAL); the menu (launcher.menu) shows the status lines first, then what can be
done now. A click on the icon opens the menu or runs its default action (Open
dashboard) on every backend: where pystray's backend has no menu (the XEmbed
icon), Helix posts its own (launcher.popup).

On Linux the backends are tried at run time, best first (appindicator, gtk,
xorg; launcher.backends): one that fails to start gives way to the next, and the
log says which one serves and why the others were skipped.

Where no icon is possible at all (no display, no backend importable) it says
what to install and keeps supervising without an icon, so the backend and the
web dashboard still come up. An icon that fails once running ends the tray and
the backend it started. SIGTERM, SIGINT and Quit end everything within 5 s
whatever the backend (launcher.stopping). `helix-tray --headless` is `helix
supervise`.
"""

from __future__ import annotations

import argparse
import faulthandler
import functools
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any
from collections.abc import Callable

import psutil

from helix_context.config import Settings, load_config
from helix_context.errors import ConfigError

from launcher import backends, desktop
from launcher.notices import Notices
from launcher.icons import STATE_LABELS, make_icon
from launcher.menu import collect, to_pystray
from launcher.popup import TkPopupMenu
from launcher.stopping import StopDeadline, install_stop_signals
from supervisor import EXIT_LOCKED, LockHeld, Supervisor, run_supervisor
from supervisor.logs import setup_supervisor_logging, unwritable_home
from supervisor.process import kill_all, tree_of
from supervisor.status import icon_state

log = logging.getLogger("helix.tray")

EXIT_ICON_FAILED = 4  # the tray icon failed: the tray and the backend it started have ended

INSTALL_HINT = (
    "For a tray icon with a menu on Linux install the desktop bindings and use a Python that sees them:\n"
    f"  sudo apt install {backends.GI_PACKAGES}\n"
    "  start-helix-tray.sh then makes its venv from the system Python with --system-site-packages\n"
    "or, for the classic X11 tray icon, `pip install python-xlib` (and python3-tk for its menu) and a tray host.\n"
    "GNOME needs the 'AppIndicator and KStatusNotifierItem Support' extension to show tray icons."
)

NO_DISPLAY_HINT = (
    "This session has no display: DISPLAY (X11) and WAYLAND_DISPLAY are unset, so no tray icon or window can "
    "show here (an SSH login, a service, a container). Start helix-tray from a desktop session, or run "
    "`ssh -X` / set DISPLAY to reach one; `helix supervise` is the way to run Helix without a desktop."
)

# ── the app ───────────────────────────────────────────────────────────────────


class TrayApp:
    """Menu actions and icon updates around one Supervisor. No display needed to call the actions."""

    def __init__(self, settings: Settings, supervisor: Supervisor, *,
                 open_url: Callable[[str], Any] | None = None,
                 open_path: Callable[[Path], Any] = desktop.open_path,
                 on_stop: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.supervisor = supervisor
        self.notices = Notices(self._show_notice)
        # the real opener reports a browser that fails at once (and reaps it); a test's recorder needs none
        self._open_url = open_url or functools.partial(desktop.open_url, on_failure=self.notices.post)
        self._open_path = open_path
        self.on_stop = on_stop  # told of the first stop request (main: arms the stop deadline)
        self.snapshot: dict[str, Any] | None = supervisor.snapshot()
        self.icon: Any = None
        self.popup: TkPopupMenu | None = None
        self._state = ""
        self._pressure_seen = False
        self._quit = threading.Event()
        self._dirty = threading.Event()
        self._updater_started = False
        supervisor.add_listener(self.on_snapshot)

    @property
    def grafana_url(self) -> str:
        return self.settings.telemetry.grafana_url

    @property
    def dashboard_url(self) -> str:
        return f"{self.settings.base_url}/dashboard"

    @property
    def helper_model_configured(self) -> bool:
        """The ribosome (helper model) is set up in helix.toml: only then can it be paused."""
        return bool(self.settings.ribosome.enabled or self.settings.ribosome.model)

    def entries(self) -> list[Any]:
        return collect(self)

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
        self.request_quit(icon, reason="Quit")
        self.supervisor.shutdown()

    def request_quit(self, icon: Any = None, reason: str = "stop requested") -> None:
        """Hide the icon and end its loop; main() then shuts the supervisor down."""
        if self.on_stop is not None:
            self.on_stop(reason)
        self._quit.set()
        self._dirty.set()
        if self.popup is not None:
            self.popup.close()
        for target in {id(t): t for t in (icon, self.icon) if t is not None}.values():
            try:
                target.stop()
            except Exception:  # gtk may raise GLib.GError on stop
                log.debug("icon stop failed", exc_info=True)

    @property
    def quitting(self) -> bool:
        return self._quit.is_set()

    def kill_owned_backend(self) -> None:
        """The last resort of a stop that hung: kill the tree of the backend this tray started."""
        backend = self.supervisor.backend
        if backend is None or not backend.owned or backend.pid is None:
            return
        try:
            kill_all(tree_of(psutil.Process(backend.pid)), timeout_s=0.5)
        except psutil.NoSuchProcess:
            pass

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
                # the icon first, then the name: a user (and the tray tests) read the state from the name,
                # so it changes only once the icon is drawn in the new colour. The XEmbed loop sends the
                # name at its next wait (it flushes every time it waits, at least every 0.5 s)
                icon.icon = make_icon(state)
                icon.title = self.title(snap)
                # only now: an update that failed (the icon window not ready yet) is retried on the
                # next snapshot instead of being taken as done
                self._state = state
            pressure = bool((snap.get("pressure") or {}).get("active"))
            if pressure and not self._pressure_seen and getattr(icon, "HAS_NOTIFICATION", False):
                icon.notify("; ".join(snap["pressure"]["reasons"]), "Helix: GPU pressure")
            self._pressure_seen = pressure
        except Exception:  # a display hiccup must not stop supervising
            log.warning("icon update failed (retried on the next snapshot)", exc_info=True)
        self._refresh_menu()

    def _show_notice(self, text: str) -> None:
        """A notice also as a desktop notification where the backend has them; the menu shows it anyway."""
        icon = self.icon
        if icon is not None and getattr(icon, "HAS_NOTIFICATION", False):
            icon.notify(text, "Helix Context")
        self._refresh_menu()

    def _refresh_menu(self) -> None:
        icon = self.icon
        if icon is None or not getattr(icon, "HAS_MENU", False) or self._quit.is_set():
            return
        try:
            icon.update_menu()
        except Exception:
            log.debug("menu update failed", exc_info=True)

    def make_icon(self, pystray: Any, candidate: backends.Candidate | None = None) -> Any:
        """The icon of `candidate`'s backend (pystray's default Icon class without one)."""
        menu = to_pystray(self, pystray.Menu, pystray.MenuItem)
        self._state = icon_state(self.snapshot)
        icon_class = (candidate.icon_class if candidate is not None else None) or pystray.Icon
        icon = icon_class("helix-context", self.image(), self.title(), menu=menu)
        if candidate is not None and candidate.menu == "popup":
            icon.popup = self._start_popup()
        self.icon = icon
        return icon

    def _start_popup(self) -> TkPopupMenu | None:
        if self.popup is None:
            popup = TkPopupMenu(self.entries)
            try:
                popup.start()
            except Exception as exc:  # no tkinter in this Python, or Tk cannot open the display
                log.warning("the tray menu window cannot open (%s: %s): a click on the icon opens the dashboard, "
                            "the dashboard offers the rest. For the menu install Tk for this Python "
                            "(Debian/Ubuntu: sudo apt install python3-tk)", type(exc).__name__, exc)
                return None
            self.popup = popup
        return self.popup

    def start_updates(self) -> None:
        """Apply snapshots to the icon from a thread of our own (call once the icon loop runs)."""
        if not self._updater_started:
            self._updater_started = True
            threading.Thread(target=self._updater, name="helix-tray-updater", daemon=True).start()
        self._dirty.set()


def run_icon(app: TrayApp, pystray: Any, cands: list[backends.Candidate]) -> str:
    """Run the first backend that starts, in this (the main) thread, until the icon stops.
    Returns '' when it was stopped on purpose, else why the icon failed."""
    skipped = [f"{c.name}: {c.why}" for c in cands if c.icon_class is None]
    for cand in cands:
        if cand.icon_class is None:
            continue
        if app.quitting:
            return ""
        try:
            icon = app.make_icon(pystray, cand)
        except Exception as exc:  # e.g. the X server refused the window
            skipped.append(f"{cand.name}: could not create the icon ({type(exc).__name__}: {exc})")
            continue

        def setup(ic: Any, name: str = cand.name) -> None:
            ic.visible = True
            log.info("tray backend: %s%s", name, f" (skipped: {'; '.join(skipped)})" if skipped else "")
            app.start_updates()

        error: BaseException | None = None
        try:
            icon.run(setup=setup)
        except Exception as exc:  # a backend that cannot start gives way to the next
            error = exc
        if app.quitting:
            return ""
        if not getattr(icon, "helix_ready", True):
            skipped.append(f"{cand.name}: failed to start ({type(error).__name__}: {error})" if error
                           else f"{cand.name}: its loop ended before it was ready")
            log.warning("tray backend %s", skipped[-1])
            app.icon = None
            continue
        return f"the {cand.name} tray icon stopped ({type(error).__name__}: {error})" if error \
            else f"the {cand.name} tray icon's loop ended (the tray host went away?)"
    return "no tray backend could start: " + "; ".join(skipped)


def _explain_skips(cands: list[backends.Candidate]) -> None:
    """Plain-words advice for the skips a user can fix (a Python without gi, no D-Bus)."""
    if any("cannot load gi" in c.why for c in cands):
        from launcher.pick_python import gi_hint

        log.warning("%s", gi_hint())
    reason = backends.dbus_reason(os.environ) if sys.platform.startswith("linux") else ""
    if reason:
        log.warning("tray: %s", reason)


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

    why = backends.no_display_reason(os.environ)
    cands = [] if why else backends.candidates(os.environ)
    if not any(c.icon_class for c in cands):
        # with no display at all, packages are not the cause: installing them would change nothing
        hint = NO_DISPLAY_HINT if why else INSTALL_HINT
        why = why or "; ".join(f"{c.name}: {c.why}" for c in cands)
        print(f"helix-tray: no system tray available ({why}).\n{hint}\n"
              f"Running the supervisor without an icon; the dashboard is {settings.base_url}/dashboard",
              file=sys.stderr, flush=True)
        return run_supervisor(settings, headless=True)

    problem = unwritable_home(settings.logs_dir, settings.signals_dir)
    if problem is not None:
        print(f"helix-tray: {problem}: HELIX_HOME ({settings.home}) must be a writable folder; set HELIX_HOME to one",
              file=sys.stderr)
        return 2
    setup_supervisor_logging(settings.logs_dir, max_bytes=settings.supervisor.log_max_bytes,
                             backups=settings.supervisor.log_backups, stderr=True)
    sup = Supervisor(settings, headless=False)
    app = TrayApp(settings, sup)
    deadline = StopDeadline(app.kill_owned_backend)
    app.on_stop = deadline.arm
    try:
        sup.start()
    except LockHeld as exc:
        print(f"helix-tray: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    # finding a Python with gi takes a moment: neither the icon nor the backend waits for the advice
    threading.Thread(target=_explain_skips, args=(cands,), name="helix-tray-advice", daemon=True).start()
    # Windows: each backend the supervisor starts sits in its kill-on-close job (supervisor/winjob.py),
    # whose handle this process holds: the backend dies with the tray, even a killed one
    install_stop_signals(lambda name: app.request_quit(reason=name), lambda: sup.request_restart("SIGHUP"))
    pystray = backends.import_pystray()
    failure = run_icon(app, pystray, cands)
    code = 0
    if failure and not app.quitting:
        code = EXIT_ICON_FAILED
        print(f"helix-tray: {failure}.\n{INSTALL_HINT}\nStopping; `helix supervise` serves without an icon, "
              f"and the dashboard is {settings.base_url}/dashboard", file=sys.stderr, flush=True)
        deadline.arm("the tray icon failed", code)
        app.request_quit(reason="the tray icon failed")
    deadline.arm("the tray icon stopped", code)
    sup.shutdown()
    code = code or sup.exit_code
    if app.popup is not None and not app.popup.join(1.0):
        # a Tk thread still running at interpreter exit would abort the process (Tcl teardown)
        logging.shutdown()
        os._exit(code)
    deadline.disarm()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
