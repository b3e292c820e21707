"""Which tray icon this desktop can show, best first, and the fixes Helix needs in each.

pystray picks one backend when it is imported and never looks back. Helix imports
each backend module itself (appindicator, then gtk, then xorg on Linux), so one
that fails to *start* (not only to import) gives way to the next, and every skip
has a reason the log can show.

The icon classes are pystray's, with what Helix needs on top:
- every backend: pystray's setup thread is a daemon and waits at most 1 s on stop,
  so a backend that never became ready cannot keep the process alive;
- GTK / AppIndicator: Ctrl-C keeps our handler (pystray resets SIGINT to the
  default, which would kill the tray and orphan the backend); the GLib loop hands
  control back to Python every 100 ms so SIGTERM/SIGINT handlers run; no D-Bus
  session (no notification service) only turns notifications off;
- xorg (XEmbed): the icon window asks for button presses (pystray's does not, so
  clicks were lost); a left click runs the default action, a right click posts
  Helix's own Tk menu (launcher.popup) at the pointer; the icon docks in the
  loop's own thread, once per tray host (pystray asked again on every picture
  change, and trayer then left the icon 1 pixel wide), and the loop never sleeps
  on a queued event; a stop always ends the loop (see _XorgMixin.stop);
- win32: the message loop wakes every 100 ms, so Ctrl-C / Ctrl-Break handlers run.
"""

from __future__ import annotations

import importlib
import logging
import os
import select
import shutil
import sys
import threading
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Iterator, Mapping

log = logging.getLogger("helix.tray")

LINUX_ORDER = ("appindicator", "gtk", "xorg")
GLIB_SIGNAL_TICK_MS = 100  # also the Windows loop's wake-up period

GI_PACKAGES = "python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1"


@dataclass
class Candidate:
    """A backend worth trying (icon_class set) or one skipped (why set)."""

    name: str
    icon_class: type | None = None
    why: str = ""
    menu: str = "native"  # native: pystray shows the menu; popup: Helix's Tk menu; none: default action only


def import_pystray() -> Any:
    """pystray's Menu/MenuItem without letting its import pick (and maybe fail on) a backend."""
    if "pystray" in sys.modules:
        return sys.modules["pystray"]
    previous = os.environ.get("PYSTRAY_BACKEND")
    os.environ["PYSTRAY_BACKEND"] = "dummy"
    try:
        import pystray
    finally:
        if previous is None:
            os.environ.pop("PYSTRAY_BACKEND", None)
        else:
            os.environ["PYSTRAY_BACKEND"] = previous
    return pystray


# ── fixes shared by every backend ─────────────────────────────────────────────


class _HelixIconMixin:
    SETUP_THREAD_TIMEOUT = 1.0
    backend_name = ""
    helix_ready = False  # the backend's loop came up (a failure after this is not a start failure)

    def _mark_ready(self) -> None:
        self.helix_ready = True
        super()._mark_ready()  # type: ignore[misc]  # the mixin's base (pystray's backend Icon) is only known when the class is put together

    def _start_setup(self, setup: Callable[[Any], None] | None) -> None:
        ready = self._Icon__queue  # type: ignore[attr-defined]  # pystray's ready signal (name-mangled in _base.Icon)

        def handler() -> None:
            ready.get()
            if setup is not None:
                setup(self)
            else:
                self.visible = True

        self._setup_thread = threading.Thread(target=handler, name="helix-tray-setup", daemon=True)
        self._setup_thread.start()


class _GtkMixin(_HelixIconMixin):
    notifications_off_reason = ""

    def _initialize(self) -> None:
        from gi.repository import GLib
        from pystray._util import notify_dbus

        try:
            self._notifier = notify_dbus.Notifier()
        except Exception as exc:  # GLib.GError: no session bus / no notification service
            self._notifier = None
            self.notifications_off_reason = dbus_reason(os.environ) or f"no notification service ({exc})"
            log.info("tray notifications are off: %s", self.notifications_off_reason)
        self.HAS_NOTIFICATION = self._notifier is not None
        # a C main loop never returns to Python on its own: without this tick SIGTERM waits forever
        GLib.timeout_add(GLIB_SIGNAL_TICK_MS, lambda: True)
        self._mark_ready()

    def _finalize(self) -> None:
        self._remove_fs_icon()  # type: ignore[attr-defined]  # pystray's private backend attribute, untyped
        if self._notifier is not None:
            try:
                self._notifier.hide()
            except Exception:  # GLib.GError when the notification service is gone
                log.debug("notification hide failed", exc_info=True)

    def _notify(self, message: str, title: str | None = None) -> None:
        if self._notifier is not None:
            super()._notify(message, title)  # type: ignore[misc]  # the mixin's base (pystray's backend Icon) is only known when the class is put together

    def _remove_notification(self) -> None:
        if self._notifier is not None:
            super()._remove_notification()  # type: ignore[misc]  # the mixin's base (pystray's backend Icon) is only known when the class is put together


class _XorgMixin(_HelixIconMixin):
    HAS_MENU = True  # Helix's own pop-up (launcher.popup)
    popup: Any = None

    def _create_window(self) -> Any:
        import Xlib.X

        window = super()._create_window()  # type: ignore[misc]  # the mixin's base (pystray's backend Icon) is only known when the class is put together
        # pystray's window listens for expose/structure events only, so no click ever arrived
        window.change_attributes(event_mask=Xlib.X.ExposureMask | Xlib.X.StructureNotifyMask
                                 | Xlib.X.ButtonPressMask)
        return window

    def _assert_docked(self) -> None:
        # pystray asks the tray host to dock the icon again on every icon change and every show.
        # trayer then embeds it anew, and the icon was seen left 1 pixel wide for good: a user's
        # click missed it. One request per tray host; a new host (the old one's DestroyNotify
        # clears the manager) gets its own.
        if self._systray_manager is None:  # type: ignore[attr-defined]  # pystray's private backend attribute, untyped
            super()._assert_docked()  # type: ignore[misc]  # the mixin's base (pystray's backend Icon) is only known when the class is put together

    def _on_button_press(self, event: Any) -> None:
        on_click(self, event.detail, event.root_x, event.root_y)

    def _run(self) -> None:
        # pystray marks the loop ready before it records the loop's thread, and its setup thread then
        # docks the icon by a message through the X server and a reply queue that every caller shares.
        # On a loaded machine that first hand-over was seen to wait until the stop: an icon that never
        # docked. Docking here, in the loop's own thread before the loop starts, needs no hand-over;
        # the setup thread's `visible = True` then finds the icon shown already.
        self._thread = threading.current_thread()
        self._update_icon()  # type: ignore[attr-defined]  # pystray's backend method: draws and docks
        self._show()  # type: ignore[attr-defined]  # pystray's backend method (runs directly in this thread)
        self._visible = True
        self._mark_ready()
        self._mainloop()  # type: ignore[attr-defined]  # pystray's backend loop

    def _events(self) -> Iterator[Any]:
        """X events, waiting at most 0.5 s at a time: an event that another thread's flush read into
        Xlib's queue while this thread sat in select() is handled within 0.5 s, never left there."""
        display = self._display  # type: ignore[attr-defined]  # pystray's private backend attribute, untyped
        while True:
            try:
                while display.pending_events():
                    yield display.next_event()
                select.select([display], [], [], 0.5)
            except Exception:  # Xlib's ConnectionClosedError, OSError: the connection closed, the icon is gone
                log.debug("the X connection closed", exc_info=True)
                return

    def _update_menu(self) -> None:
        pass  # the pop-up collects its entries when it opens

    def stop(self) -> None:
        # pystray hands every call to its loop through one shared reply queue, so a stop racing an
        # icon update can return before the loop saw it, and the loop then waits for X events forever.
        # A window destroyed from a second connection always reaches the loop (DestroyNotify) and ends it.
        timer = threading.Timer(0.3, self._destroy_window)
        timer.daemon = True
        timer.start()
        super().stop()  # type: ignore[misc]  # the mixin's base (pystray's backend Icon) is only known when the class is put together

    def _destroy_window(self) -> None:
        try:
            import Xlib.display

            display = Xlib.display.Display()
            try:
                display.set_error_handler(lambda *_: None)  # already gone: the polite stop worked
                display.create_resource_object("window", self._window.id).destroy()  # type: ignore[attr-defined]  # pystray's private backend attribute, untyped
                display.sync()
            finally:
                display.close()
        except Exception:  # the X server itself is gone: the loop has ended anyway
            log.debug("could not destroy the icon window", exc_info=True)


class _Win32Mixin(_HelixIconMixin):
    def _mark_ready(self) -> None:
        set_wakeup_timer(self._hwnd)  # type: ignore[attr-defined]  # pystray's private backend attribute, untyped
        super()._mark_ready()


WAKEUP_TIMER_ID = 0x4858


def set_wakeup_timer(hwnd: int, user32: Any = None) -> bool:
    """Windows: pystray's loop waits in GetMessage (C), so a Ctrl-C / Ctrl-Break handler would wait
    for the next window message; a timer message every 100 ms hands control back to Python.
    `user32` is a seam for tests on Linux."""
    if user32 is None:
        import ctypes

        user32 = ctypes.windll.user32  # type: ignore[attr-defined]  # Windows only: the Linux stubs have no ctypes.windll
    return bool(user32.SetTimer(hwnd, WAKEUP_TIMER_ID, GLIB_SIGNAL_TICK_MS, None))


def on_click(icon: Any, button: int, x: int, y: int) -> None:
    """XEmbed icon: left click runs the default action when it can, else (and on any other
    button) the menu opens at the pointer; without a menu window every click is the default."""
    default = next((i for i in (icon.menu.items if icon.menu else ()) if getattr(i, "default", False)), None)
    default_ok = default is not None and default.enabled
    if icon.popup is not None and (button != 1 or not default_ok):
        icon.popup.show(x, y)
    elif default_ok:
        icon()


# ── probing ───────────────────────────────────────────────────────────────────


def dbus_reason(env: Mapping[str, str], which: Callable[[str], str | None] = shutil.which) -> str:
    """'' when a D-Bus session bus can be reached (or started), else what that means, in plain words."""
    if env.get("DBUS_SESSION_BUS_ADDRESS") or which("dbus-launch"):
        return ""
    return ("there is no D-Bus session (the desktop's message bus), so desktop notifications are off and "
            "desktops that show tray icons only through it (KDE, GNOME's AppIndicator extension) cannot show "
            "this icon. Start Helix from your desktop session, or install dbus-x11 (sudo apt install dbus-x11). "
            "The icon is shown in the classic X11 tray instead: right-click it for the menu")


def _gtk_base(name: str) -> type:
    from gi.repository import GLib

    GLib.set_prgname("helix-tray")  # the name GTK gives the icon's and the menu's windows
    module = importlib.import_module(f"pystray._{name}")  # imports gi, Gtk (init_check needs a display)
    return module.Icon


def _make_class(base: type, mixin: type, name: str) -> type:
    return type(f"Helix{name.capitalize()}Icon", (mixin, base), {"backend_name": name})


def probe(name: str) -> Candidate:
    """Import one backend; a Candidate with its icon class, or the reason it cannot be used."""
    import_pystray()
    try:
        if name in ("appindicator", "gtk"):
            return Candidate(name, _make_class(_gtk_base(name), _GtkMixin, name))
        if name == "xorg":
            base = importlib.import_module("pystray._xorg").Icon  # opens (and closes) the X display
            return Candidate(name, _make_class(base, _XorgMixin, name), menu="popup")
        if name == "win32":
            base = importlib.import_module("pystray._win32").Icon
            return Candidate(name, _make_class(base, _Win32Mixin, name))
        if name in ("darwin", "dummy"):
            base = importlib.import_module(f"pystray._{name}").Icon
            return Candidate(name, _make_class(base, _HelixIconMixin, name))
        return Candidate(name, why=f"unknown tray backend {name!r}")
    except Exception as exc:  # ImportError, ValueError (gi versions), Xlib display errors
        return Candidate(name, why=_import_reason(name, exc))


def _import_reason(name: str, exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ModuleNotFoundError) and exc.name == "gi":
        return f"this Python ({sys.executable}) cannot load gi (python3-gi)"
    if isinstance(exc, ModuleNotFoundError) and exc.name == "Xlib":
        return "python-xlib is not installed in this Python (pip install python-xlib)"
    if name == "appindicator" and isinstance(exc, ValueError):
        return "the AppIndicator library is not installed (sudo apt install gir1.2-ayatanaappindicator3-0.1)"
    return text


def order(env: Mapping[str, str], platform: str = sys.platform) -> list[str]:
    """Backends to try, best first. A user's PYSTRAY_BACKEND / HELIX_TRAY_BACKEND goes first."""
    chosen = env.get("HELIX_TRAY_BACKEND") or env.get("PYSTRAY_BACKEND") or ""
    if platform == "win32":
        names = ["win32"]
    elif platform == "darwin":
        names = ["darwin"]
    else:
        names = list(LINUX_ORDER)
    if chosen:
        names = [chosen, *(n for n in names if n != chosen)]
    return names


def no_display_reason(env: Mapping[str, str], platform: str = sys.platform) -> str:
    if platform in ("win32", "darwin"):
        return ""
    if not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY"):
        return "no graphical session (DISPLAY / WAYLAND_DISPLAY are not set)"
    return ""


def candidates(env: Mapping[str, str] = os.environ, platform: str = sys.platform,
               probe_one: Callable[[str], Candidate] = probe) -> list[Candidate]:
    """Every backend in order, probed: those with an icon_class can be started."""
    return [probe_one(name) for name in order(env, platform)]
