"""Helix's own small menu window, for tray backends that cannot show one (pystray's
XEmbed/xorg icon): a Tk pop-up menu posted at the pointer.

Tk is not thread-safe, so one thread owns the Tk interpreter for the process's
life and everything else talks to it through a queue. A click on the icon asks
for the menu (`show(x, y)`); the entries are collected at that moment, so the
menu is never stale. Actions run on a worker thread: a slow action (a restart,
a browser start) never freezes the menu.
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
from typing import Any
from collections.abc import Callable, Sequence

from launcher.menu import Entry

log = logging.getLogger("helix.tray")

MENU_WINDOW_NAME = "helix_tray_menu"  # the menu window's X name (tests find it with xdotool)
TK_CLASS = "HelixTray"


class TkPopupMenu:
    """A Tk thread that posts the tray menu at a screen position on request."""

    def __init__(self, entries: Callable[[], Sequence[Entry | None]]) -> None:
        self._entries = entries
        self._requests: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="helix-tray-menu", daemon=True)

    def start(self, timeout: float = 5.0) -> None:
        """Start the Tk thread; raises when Tk cannot open the display (the caller says what is missing)."""
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"the Tk menu window did not start within {timeout:.0f} s")
        if self._error is not None:
            raise self._error

    def show(self, x: int, y: int) -> None:
        self._requests.put(("show", (int(x), int(y))))

    def close(self) -> None:
        self._requests.put(("close", None))

    def join(self, timeout: float) -> bool:
        """True once the Tk thread has ended."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    # ── the Tk thread ──
    def _run(self) -> None:
        try:
            import tkinter as tk

            root = tk.Tk(className=TK_CLASS)
            root.withdraw()
        except Exception as exc:  # ImportError (no tkinter), TclError (no display)
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        menu: list[Any] = [None]

        def post(x: int, y: int) -> None:
            if menu[0] is not None:
                try:
                    menu[0].unpost()
                    menu[0].destroy()
                except tk.TclError:
                    pass
            m = tk.Menu(root, name=MENU_WINDOW_NAME, tearoff=0)  # noqa: F821 - runs inside mainloop(), before the `del` below
            for entry in self._entries():
                if entry is None:
                    m.add_separator()
                    continue
                font_opts: dict[str, Any] = {"font": "TkMenuFont 9 bold"} if entry.default and entry.enabled else {}
                m.add_command(label=entry.text, state="normal" if entry.enabled else "disabled",
                              command=self._runner(entry), **font_opts)
            menu[0] = m
            m.tk_popup(x, y)  # on X11 this posts the menu with a grab: a click elsewhere closes it

        def poll() -> None:
            try:
                while True:
                    kind, arg = self._requests.get_nowait()
                    if kind == "close":
                        root.quit()  # noqa: F821 - runs inside mainloop(), before the `del` below
                        return
                    try:
                        post(*arg)  # noqa: F821 - runs inside mainloop(), before the `del` below
                    except Exception:  # a menu that fails once must not end the thread
                        log.warning("could not show the tray menu", exc_info=True)
            except queue.Empty:
                pass
            root.after(40, poll)  # noqa: F821 - runs inside mainloop(), before the `del` below

        root.after(0, poll)
        try:
            root.mainloop()
        finally:
            try:
                root.destroy()
            except Exception:
                pass
            # Tcl must be torn down by the thread that made it: a Tk object left to the main
            # thread's garbage collector at exit aborts the process ("Tcl_AsyncDelete")
            menu.clear()
            del root, post, poll
            gc.collect()

    @staticmethod
    def _runner(entry: Entry) -> Callable[[], None]:
        def run() -> None:
            if entry.action is None:
                return
            threading.Thread(target=_call, args=(entry,), name="helix-tray-action", daemon=True).start()
        return run


def _call(entry: Entry) -> None:
    try:
        assert entry.action is not None
        entry.action()
    except Exception:  # an action's failure is logged, the tray goes on
        log.warning("menu action %r failed", entry.text, exc_info=True)
