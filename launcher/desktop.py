"""Opening things on the desktop: a folder in the file manager, a URL in the browser.

A browser is started as a child of the tray and watched by a thread of its own: the
thread reaps it when it exits (no zombie `[chromium]` under the tray), and when it
exits with an error within QUICK_FAIL_S (Chromium run as root without --no-sandbox
does so at once) the caller's `on_failure` is told why, with the URL to open by hand.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
import webbrowser
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

QUICK_FAIL_S = 10.0  # a browser that exits with an error sooner than this did not open the page
# what Python's webbrowser module would try on Linux when neither $BROWSER nor xdg-open is there
_LINUX_BROWSERS = ("x-www-browser", "firefox", "chromium", "chromium-browser", "google-chrome", "epiphany")

log = logging.getLogger("helix.tray")


def open_path(path: str | Path, platform: str = sys.platform, startfile: Any = None) -> bool:
    """Show a folder/file with the platform's opener (Explorer, Finder, xdg-open). Never raises.
    `platform` and `startfile` are seams: the Windows branch runs in tests on Linux."""
    path = Path(path)
    if not path.exists() and not path.suffix:
        try:
            path.mkdir(parents=True, exist_ok=True)  # the logs folder before the first log line
        except OSError:
            pass
    try:
        if platform == "win32":
            (startfile or os.startfile)(str(path))  # type: ignore[attr-defined]  # os.startfile exists on Windows only
            return True
        opener = "open" if platform == "darwin" else "xdg-open"
        if shutil.which(opener) is None:
            log.warning("cannot open %s: %s is not installed (the folder is %s)", path, opener, path)
            return False
        subprocess.Popen([opener, str(path)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
        return True
    except OSError as exc:
        log.warning("cannot open %s: %s", path, exc)
        return False


def _report(text: str, on_failure: Callable[[str], Any] | None) -> None:
    """To the caller (who logs and shows it), else to the log."""
    if on_failure is not None:
        on_failure(text)
    else:
        log.warning("%s", text)


def browser_command(url: str, env: Mapping[str, str] = os.environ,
                    which: Callable[[str], str | None] = shutil.which) -> list[str] | None:
    """The command that opens `url` on Linux: $BROWSER (its entries in order, `%s` = the URL, as
    Python's webbrowser reads it), else xdg-open, else a browser found on PATH; None when none is."""
    for entry in (env.get("BROWSER") or "").split(os.pathsep):
        parts = shlex.split(entry) if entry.strip() else []
        if parts and which(parts[0]):
            args = [part.replace("%s", url) for part in parts]
            return args if any("%s" in part for part in parts) else [*args, url]
    for name in ("xdg-open", *_LINUX_BROWSERS):
        if which(name):
            return [name, url]
    return None


def _failure_text(url: str, command: str, code: int, stderr_tail: list[str]) -> str:
    lines = [line.strip() for line in stderr_tail if line.strip()]
    # the last line that says "error" (Chromium: "[pid:tid:time:ERROR:file:line] Running as root without
    # --no-sandbox is not supported."), without its bracketed prefix; else the last line
    why = next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "")
    why = re.sub(r"^\[[^\]]*\]\s*", "", why)[:200]
    how = f"exited with code {code}" if code >= 0 else f"was killed by signal {-code}"
    why = why.rstrip(". ")
    return (f"The browser ({command}) {how} at once{': ' + why if why else ''}. "
            f"Open {url} in a browser yourself.")


def _drain(stream: IO[bytes] | None, tail: collections.deque[str]) -> None:
    if stream is None:
        return
    with stream:
        for raw in stream:
            tail.append(raw.decode("utf-8", "replace").rstrip())


def _watch(proc: subprocess.Popen[bytes], url: str, command: str, started: float,
           on_failure: Callable[[str], Any] | None) -> None:
    """Reap the browser when it exits (no zombie under the tray) and report a quick failure. Its
    stderr is drained by a thread of its own: a full pipe would stall it, and a browser that an
    opener (xdg-open) left running may hold the pipe long after the opener is reaped."""
    tail: collections.deque[str] = collections.deque(maxlen=20)
    reader = threading.Thread(target=_drain, args=(proc.stderr, tail), name="helix-tray-browser-err", daemon=True)
    reader.start()
    code = proc.wait()
    reader.join(timeout=1.0)
    if code != 0 and time.monotonic() - started < QUICK_FAIL_S:
        text = _failure_text(url, command, code, list(tail))
        _report(text, on_failure)


def open_url(url: str, on_failure: Callable[[str], Any] | None = None, *, platform: str = sys.platform,
             env: Mapping[str, str] = os.environ) -> bool:
    """Open `url` in the user's browser. False (and `on_failure` told why) when none can start; a
    browser that starts and fails at once is reported through `on_failure` from its watcher thread."""
    if platform in ("win32", "darwin"):  # the OS opener hands the URL over and returns: nothing to reap
        try:
            if webbrowser.open(url):
                return True
            reason = "no browser is registered"
        except Exception as exc:  # no browser is not a crash
            reason = str(exc)
        text = f"Cannot open a browser ({reason}). Open {url} in a browser yourself."
        _report(text, on_failure)
        return False
    command = browser_command(url, env)
    if command is None:
        text = (f"No browser found (set $BROWSER, or install xdg-utils: sudo apt install xdg-utils). "
                f"Open {url} in a browser yourself.")
        _report(text, on_failure)
        return False
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        text = f"The browser ({command[0]}) did not start: {exc}. Open {url} in a browser yourself."
        _report(text, on_failure)
        return False
    threading.Thread(target=_watch, args=(proc, url, Path(command[0]).name, time.monotonic(), on_failure),
                     name="helix-tray-browser", daemon=True).start()
    return True
