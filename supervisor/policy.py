"""Restart policy: exponential backoff and flapping detection. Pure: no clock, no I/O.

The first failure in a quiet period restarts at once (a crash should cost the
user one start-up, not a sleep); each further failure inside the flap window
waits twice as long as the one before, from `backoff_initial_s` up to
`backoff_max_s`. More than `max_restarts` failures inside `window_s` is
flapping: the decision is FATAL and nothing restarts until `reset()` (the user
asked, from the tray or the CLI).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from helix_context.config import SupervisorSettings


@dataclass(frozen=True)
class Decision:
    fatal: bool
    delay_s: float  # how long to wait before the next start (0 when fatal)
    failures_in_window: int
    reason: str = ""


@dataclass
class RestartPolicy:
    """The numbers come from [supervisor] in helix.toml (config.SupervisorSettings, whose defaults are
    the only copy): backoff_initial_s, backoff_max_s, flap_window_s, flap_max_restarts."""

    settings: SupervisorSettings = field(default_factory=SupervisorSettings)
    _failures: collections.deque[float] = field(default_factory=collections.deque, repr=False)
    _failed_starts: int = field(default=0, repr=False)  # starts in a row that never served, however slow

    @classmethod
    def from_settings(cls, s: SupervisorSettings) -> RestartPolicy:
        return cls(s)

    @property
    def backoff_initial_s(self) -> float:
        return self.settings.backoff_initial_s

    @property
    def backoff_max_s(self) -> float:
        return self.settings.backoff_max_s

    @property
    def window_s(self) -> float:
        return self.settings.flap_window_s

    @property
    def max_restarts(self) -> int:
        return self.settings.flap_max_restarts

    def _expire(self, now: float) -> None:
        while self._failures and now - self._failures[0] > self.window_s:
            self._failures.popleft()

    def failures_in_window(self, now: float) -> int:
        self._expire(now)
        return len(self._failures)

    def backoff_for(self, failures: int) -> float:
        """Delay before the restart that follows the n-th failure in the window (n >= 1)."""
        if failures <= 1:
            return 0.0
        return min(self.backoff_max_s, self.backoff_initial_s * (2 ** (failures - 2)))

    def record_failure(self, now: float, *, during_start: bool = False) -> Decision:
        """Count one unexpected exit / hang / failed start at time `now` and decide.

        A failed start counts twice over: in the window, and among the starts in a row that never served.
        Why: a start that fails after start_timeout_s (30 s) leaves at most two failures in a 60 s window,
        so a backend that can never come up (a port it cannot serve on) was restarted forever."""
        self._expire(now)
        self._failures.append(now)
        self._failed_starts = self._failed_starts + 1 if during_start else 0
        n = len(self._failures)
        if n > self.max_restarts:
            return Decision(True, 0.0, n, f"{n} failures within {self.window_s:g}s (limit {self.max_restarts})")
        if self._failed_starts > self.max_restarts:
            return Decision(True, 0.0, n, f"{self._failed_starts} starts in a row never served "
                                          f"(limit {self.max_restarts})")
        return Decision(False, self.backoff_for(max(n, self._failed_starts)), n)

    def started(self) -> None:
        """The backend serves: failed starts are counted from zero again."""
        self._failed_starts = 0

    def reset(self) -> None:
        self._failures.clear()
        self._failed_starts = 0
