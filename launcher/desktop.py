"""Opening things on the desktop: a folder in the file manager, a URL in the browser."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import webbrowser
from pathlib import Path
from typing import Any

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


def open_url(url: str) -> bool:
    try:
        return bool(webbrowser.open(url))
    except Exception as exc:  # no browser is not a crash
        log.warning("cannot open %s in a browser: %s", url, exc)
        return False
