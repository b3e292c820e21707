"""The tray's entries for the living index: a status line, "Add folder…", "Pause indexing" / "Resume indexing".

The numbers come from the backend's GET /sources (the backend owns the
sources; the tray never opens the genome), polled every few seconds while the
menu exists. "Add folder…" opens a native folder dialog (tkinter's
filedialog, in a child process of its own, so Tk never shares a thread with
the tray's GTK or Win32 loop and the menu stays responsive while it is open);
where no dialog can open — no tkinter, no display — it opens the dashboard's
Sources panel instead, where the folder can be added from the page.

`python -m launcher.sources_menu --pick-folder` is that child process: it
prints the chosen folder, exits 1 when cancelled, 3 when no dialog can open.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import httpx

from helix_context.config import Settings

PICK_CANCELLED = 1
PICK_NO_DIALOG = 3
NO_BACKEND_LINE = "Indexing: backend not reachable"


class NoDialog(RuntimeError):
    """No folder dialog can open here (no tkinter, or no display).

    Not a HelixError on purpose: it stays inside the tray, which answers it by telling the user to add
    the folder with `helix sources add`; no HTTP route ever raises or sees it."""


def choose_folder(timeout_s: float = 3600.0) -> str | None:
    """The folder the user picked in a native dialog, None when cancelled; NoDialog where none can open."""
    try:
        done = subprocess.run([sys.executable, "-m", "launcher.sources_menu", "--pick-folder"],
                              capture_output=True, text=True, timeout=timeout_s,
                              creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0))  # no console flash on Windows
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NoDialog(str(exc)) from None
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    if done.returncode == PICK_CANCELLED:
        return None
    raise NoDialog(done.stderr.strip()[-300:] or f"the folder dialog exited with {done.returncode}")


class SourcesMenu:
    """State and actions behind the three tray entries; nothing here needs a display."""

    def __init__(self, settings: Settings, *, open_url: Callable[[str], Any],
                 ask_folder: Callable[[], str | None] = choose_folder,
                 on_change: Callable[[], None] | None = None, poll_s: float = 3.0) -> None:
        self.settings = settings
        self._open_url = open_url
        self._ask_folder = ask_folder
        self._on_change = on_change
        self._poll_s = poll_s
        headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        self._http = httpx.Client(base_url=settings.base_url, headers=headers, timeout=5.0)
        self.status: dict[str, Any] | None = None
        self.last_error = ""  # why the backend could not be asked, if it could not
        self.add_error = ""  # why the last "Add folder…" was refused
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self.last_action: threading.Thread | None = None  # the running "Add folder…" (tests join it)

    @property
    def sources_page(self) -> str:
        return f"{self.settings.base_url}/dashboard#sources"

    # ── backend ──

    def refresh(self) -> dict[str, Any] | None:
        before = self.status_line()
        try:
            response = self._http.get("/sources")
            response.raise_for_status()
            self.status, self.last_error = response.json(), ""
        except (httpx.HTTPError, ValueError) as exc:
            self.status, self.last_error = None, str(exc)
        if self._on_change is not None and self.status_line() != before:
            self._on_change()
        return self.status

    def start_polling(self) -> None:
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll, name="helix-tray-sources", daemon=True)
            self._poller.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self._poll_s)

    def close(self) -> None:
        self._stop.set()
        self._http.close()

    # ── what the menu shows ──

    def status_line(self) -> str:
        if self.status is None:
            return NO_BACKEND_LINE
        return str(self.status.get("summary") or "")

    @property
    def paused(self) -> bool:
        return bool(self.status and self.status.get("paused"))

    def pause_label(self) -> str:
        return "Resume indexing" if self.paused else "Pause indexing"

    # ── actions ──

    def add_folder(self) -> threading.Thread:
        """Ask for a folder (off the menu's thread: the dialog may stay open a while), then add it."""
        thread = threading.Thread(target=self._add_folder, name="helix-tray-add-folder", daemon=True)
        self.last_action = thread
        thread.start()
        return thread

    def _add_folder(self) -> None:
        try:
            folder = self._ask_folder()
        except NoDialog:
            self._open_url(self.sources_page)  # the page has an add form
            return
        if not folder:
            return
        self.add_error = ""
        try:
            response = self._http.post("/sources", json={"path": folder})
            if response.status_code >= 400:
                self.add_error = (response.json().get("error") or {}).get("message", response.text)
                self._open_url(self.sources_page)  # the page shows why, and lets the user try another
        except httpx.HTTPError as exc:
            self.add_error = f"the backend could not be reached: {exc}"
            self._open_url(self.sources_page)
        self.refresh()

    def toggle_pause(self) -> None:
        try:
            self._http.post("/sources/resume" if self.paused else "/sources/pause").raise_for_status()
        except httpx.HTTPError as exc:
            self.last_error = str(exc)
        self.refresh()

    def items(self, Menu: Any, MenuItem: Any) -> list[Any]:
        """The entries, as pystray MenuItems whose texts are read at render time."""
        return [
            MenuItem(lambda _item: self.status_line(), None, enabled=False),
            MenuItem("Add folder…", lambda _icon, _item: self.add_folder()),
            MenuItem(lambda _item: self.pause_label(), lambda _icon, _item: self.toggle_pause()),
        ]


def for_app(app: Any) -> SourcesMenu:
    """The tray app's SourcesMenu, made on first use with the app's URL opener and menu refresh."""
    menu = getattr(app, "sources_menu", None)
    if menu is None:
        from launcher import desktop

        refresh = getattr(app, "_refresh_menu", None)
        menu = SourcesMenu(app.settings, open_url=getattr(app, "_open_url", desktop.open_url),
                           on_change=refresh)
        app.sources_menu = menu
    return menu


def _pick_folder() -> int:
    try:
        import tkinter
        from tkinter import filedialog

        root = tkinter.Tk()
    except Exception as exc:  # ImportError, TclError (no display)
        print(f"no folder dialog: {exc}", file=sys.stderr)
        return PICK_NO_DIALOG
    root.withdraw()
    root.attributes("-topmost", True)
    folder = filedialog.askdirectory(parent=root, title="Helix Context: add a folder to index", mustexist=True)
    root.destroy()
    if not folder:
        return PICK_CANCELLED
    print(folder)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--pick-folder"]:
        raise SystemExit(_pick_folder())
    print("usage: python -m launcher.sources_menu --pick-folder", file=sys.stderr)
    raise SystemExit(2)
