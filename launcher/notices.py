"""What the tray tells the user when an action could not do what was asked.

A menu action that fails must not fail silently: the browser that exits at once, the
folder dialog that cannot open. Each such failure is posted here once: it goes to the
log, to a desktop notification where the tray backend has them, and to status lines at
the top of the menu (every backend has those), where it stays for NOTICE_TTL_S.
"""

from __future__ import annotations

import logging
import textwrap
import threading
import time
from collections.abc import Callable

log = logging.getLogger("helix.tray")

NOTICE_TTL_S = 300.0
LINE_CHARS = 72  # a menu line; longer text is wrapped onto further lines
MAX_LINES = 4


class Notices:
    """The latest notice; `show` (a desktop notification, a menu refresh) is called for each new one."""

    def __init__(self, show: Callable[[str], None] | None = None, ttl_s: float = NOTICE_TTL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._show = show
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._text = ""
        self._at = 0.0

    def post(self, text: str) -> None:
        log.warning("tray: %s", text)
        with self._lock:
            self._text, self._at = text, self._clock()
        if self._show is not None:
            try:
                self._show(text)
            except Exception:  # a notification that cannot show must not hide the notice
                log.debug("showing the notice failed", exc_info=True)

    @property
    def current(self) -> str:
        with self._lock:
            fresh = self._text and self._clock() - self._at < self._ttl_s
            return self._text if fresh else ""

    def lines(self) -> list[str]:
        """The current notice as menu lines ([] when there is none)."""
        text = self.current
        if not text:
            return []
        lines = textwrap.wrap(text, LINE_CHARS, break_long_words=False, break_on_hyphens=False)
        if len(lines) > MAX_LINES:
            lines = [*lines[:MAX_LINES - 1], " ".join(lines[MAX_LINES - 1:])]
        return lines
