"""Which branch a source's checkout is on, and whether this backend may index it into a team genome.

Why: a team genome holds one text per file, whatever the backend that indexed it last read from its
checkout. A backend whose checkout is on another branch would index that branch: its full pass retires
the files the branch lacks, and teammates on the main branch lose them. So a team genome follows one
branch, `[sources] follow_branch`, by default the remote's default branch as the checkout records it
(`refs/remotes/origin/HEAD`); a backend whose checkout is elsewhere (another branch, a detached HEAD
during a rebase or bisect) writes nothing of that source until it is back, then takes it up with one
full pass. Its developer's answers still overlay their own files from disk (the live check).

The contract:
- `read_branch` reads files only (`.git`, `HEAD`, `commondir`, origin's `HEAD`): no git process, no
  dependency. A symbolic ref is never packed, so `packed-refs` is not read.
- Not checked (indexed as before): a folder in no git checkout, a checkout that records no remote
  default branch while `follow_branch` is unset, an unreadable file (the reason is shown, and logged
  once by `BranchGate`). Never raises.
- A personal (SQLite) genome is never checked: it follows whatever its user has checked out.
- While git rewrites the checkout (`index.lock` in its git dir: a checkout, a merge, a rebase step),
  HEAD still names the branch being left, so nothing is decided: `BranchGate` waits for the lock to
  go (at most `SETTLE_S`) and then reads HEAD; a pass or a batch already running looks again every
  `LOOK_EVERY_S` and stops between two files when the checkout has moved.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger("helix.sources")

_HEADS = "ref: refs/heads/"
_ORIGIN = "ref: refs/remotes/origin/"
_SERVED = "your own edits are still served to you from disk"
_UNREADABLE = "branch not checked: could not read the checkout's git files"
SETTLE_S = 10.0  # the longest wait for git to finish rewriting a checkout (a stale lock: decided without it)
LOOK_EVERY_S = 0.5  # during a pass or a batch, how often the checkout is looked at again


@dataclass(frozen=True)
class BranchCheck:
    branch: str | None  # the branch checked out; None: a detached HEAD, or not checked
    followed: str | None  # the branch the team genome follows; None: not checked (indexed as before)
    why: str  # in words, for the sources status: where the checkout is and what to do
    busy: bool = False  # git is rewriting the checkout now (index.lock): HEAD may still name the old branch

    @property
    def held_back(self) -> bool:
        """On another branch than the followed one (a detached HEAD included): index nothing of it."""
        return self.followed is not None and self.branch != self.followed


def _first_line(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as handle:
        return handle.readline(4096).strip()


def _git_dir(folder: Path) -> tuple[Path, Path] | None:
    """The checkout's git dir and common dir (where a worktree's shared refs live); None: no checkout.
    Raises OSError for a `.git` file or `commondir` that cannot be read, ValueError for a damaged one."""
    start = folder.absolute()
    while not start.exists() and start.parent != start:  # a source folder this branch lacks: its checkout
        start = start.parent
    for here in (start, *start.parents):
        dot = here / ".git"
        if dot.is_dir():
            git = dot
        elif dot.is_file():  # a worktree or a submodule: `gitdir: PATH`, PATH maybe relative to here
            line = _first_line(dot)
            if not line.startswith("gitdir:"):
                raise ValueError(f"{dot} does not say `gitdir: PATH`")
            git = here / line[len("gitdir:"):].strip()
        else:
            continue
        common = git / "commondir"
        return git, (git / _first_line(common) if common.is_file() else git)
    return None


def read_branch(folder: Path, *, follow: str = "") -> BranchCheck:
    """Where the checkout holding `folder` is, against the branch followed: `follow`, else origin's HEAD."""
    try:
        found = _git_dir(folder)
        if found is None:
            return BranchCheck(None, None, "branch not checked: the folder is not in a git checkout")
        git, common = found
        busy = (git / "index.lock").exists()
        head = _first_line(git / "HEAD")
        branch = head[len(_HEADS):] if head.startswith(_HEADS) else None
        followed = follow.strip() or None
        if followed is None:
            try:
                origin = _first_line(common / "refs" / "remotes" / "origin" / "HEAD")
            except FileNotFoundError:
                origin = ""
            followed = origin[len(_ORIGIN):] if origin.startswith(_ORIGIN) else None
    except (OSError, ValueError) as exc:
        return BranchCheck(None, None, f"{_UNREADABLE} ({exc})")
    if followed is None:
        return BranchCheck(branch, None, "branch not checked: the checkout records no remote default branch "
                                         "(refs/remotes/origin/HEAD) and [sources] follow_branch is not set: "
                                         "every branch is indexed", busy)
    if branch == followed:
        return BranchCheck(branch, followed, f"on {followed}, the branch the team genome follows", busy)
    where = f"is on {branch}" if branch else "has a detached HEAD (a rebase, a bisect or a checked-out commit)"
    return BranchCheck(branch, followed, f"this checkout {where}; the team genome follows {followed}: switch "
                                         f"back to {followed} to index it again ({_SERVED})", busy)


def settled_branch(folder: Path, *, follow: str = "", settle_s: float = SETTLE_S) -> BranchCheck:
    """`read_branch` once git has finished rewriting the checkout (or after `settle_s`: a lock left by a
    crashed git is decided on as it stands). Sleeps in steps of 0.1 s: an editor's `git status` holds
    the lock for milliseconds, a checkout of many files for seconds."""
    deadline = time.monotonic() + settle_s
    check = read_branch(folder, follow=follow)
    waited = False
    while check.busy and time.monotonic() < deadline:
        waited = True
        time.sleep(0.1)
        check = read_branch(folder, follow=follow)
    if waited and not check.busy:  # git drops the lock once the files and index are written, then moves HEAD
        time.sleep(0.2)
        check = read_branch(folder, follow=follow)
    return check


def held_back(paths: Iterable[str | Path], *, team: bool, follow: str) -> dict[str, str]:
    """path → why, for the paths whose checkout is on another branch than the team genome follows.

    For the writes a person asks for (`helix ingest`, POST /ingest, /admin/refresh), which would
    otherwise replace or retire the team's text; the sources service asks its BranchGate instead.
    One check per folder. Empty on a personal genome."""
    if not team:
        return {}
    checks: dict[Path, BranchCheck] = {}
    found: dict[str, str] = {}
    for raw in paths:
        path = Path(raw)
        folder = path if path.is_dir() else path.parent
        check = checks.get(folder)
        if check is None:
            check = checks[folder] = read_branch(folder, follow=follow)
        if check.held_back:
            found[str(raw)] = check.why
    return found


Admission = Literal["index", "resume", "hold"]


class BranchGate:
    """The sources this backend holds back from a team genome, and when to look at them again.

    `admit` is asked before each pass and each watched batch (file reads, microseconds; it waits while
    git rewrites the checkout), `moved` between two files of one; `returned`
    by the sources worker's timer, every `every_s`, while a source is held back, so a checkout that
    comes back without a file event (two branches with the same files) is noticed too. Thread-safe:
    the worker asks, request threads read `last` for the status."""

    def __init__(self, *, team: bool, follow: str, every_s: float, settle_s: float = SETTLE_S) -> None:
        self._team = team
        self._follow = follow
        self._every_s = every_s
        self._settle_s = settle_s
        self._lock = threading.Lock()
        self._last: dict[str, BranchCheck] = {}  # source → its last check (the status shows it)
        self._looked: dict[str, float] = {}  # source → when `moved` last read its checkout
        self._held: dict[str, Path] = {}  # source → its folder here, while held back
        self._due: float | None = None  # monotonic time of the next look at the held sources
        self._logged: set[tuple[str, str]] = set()

    def admit(self, *, key: str, folder: Path) -> Admission:
        """index: as always; resume: back on the followed branch after a hold (one full pass
        reconciles it); hold: write nothing of it. A personal genome always indexes."""
        if not self._team:
            return "index"
        check = self._check(key, folder)
        with self._lock:
            was_held = key in self._held
            if check.held_back:
                self._held[key] = folder
                self._due = self._due or time.monotonic() + self._every_s
                return "hold"
            self._release([key])
        if was_held:
            log.info("%s: %s; indexing it again", key, check.why)
        return "resume" if was_held else "index"

    def due(self) -> float | None:
        with self._lock:
            return self._due

    def returned(self, *, now: float) -> list[str]:
        """The held sources whose checkout is back on the followed branch (no longer held), once due."""
        with self._lock:
            if self._due is None or self._due > now:
                return []
            self._due = now + self._every_s
            held = list(self._held.items())
        # no wait for git here (the sources worker asks under its lock): a checkout git is still rewriting
        # stays held, and the next look (or the next batch's `admit`, which waits) takes it up
        back = [key for key, folder in held
                if not (check := self._check(key, folder, settle_s=0.0)).held_back and not check.busy]
        with self._lock:
            self._release(back)
        for key in back:
            log.info("%s: its checkout is back on the followed branch; indexing it again", key)
        return back

    def moved(self, *, key: str, folder: Path) -> bool:
        """Asked between two files of a pass or a batch (reads the checkout every LOOK_EVERY_S at most):
        has git started rewriting it, or has it left the followed branch? Then the caller stops there,
        its work is queued again, and `admit` decides once git is done. False on a personal genome."""
        if not self._team:
            return False
        now = time.monotonic()
        with self._lock:
            if now - self._looked.get(key, float("-inf")) < LOOK_EVERY_S:
                return False
            self._looked[key] = now
        check = read_branch(folder, follow=self._follow)
        if check.busy or check.held_back:
            log.info("%s: the checkout moved during indexing (%s); stopping between two files",
                     key, "git is rewriting it" if check.busy else check.why)
            return True
        return False

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._held

    def last(self, key: str) -> BranchCheck | None:
        with self._lock:
            return self._last.get(key)

    def forget(self, key: str) -> None:
        """No longer a source here (removed, unmapped): nothing to hold or show."""
        with self._lock:
            self._release([key])
            self._last.pop(key, None)
            self._looked.pop(key, None)

    def _release(self, keys: list[str]) -> None:
        """Under the lock: no longer held (the timer stops with the last one)."""
        for key in keys:
            self._held.pop(key, None)
        if not self._held:
            self._due = None

    def _check(self, key: str, folder: Path, *, settle_s: float | None = None) -> BranchCheck:
        check = settled_branch(folder, follow=self._follow, settle_s=self._settle_s if settle_s is None else settle_s)
        unreadable = check.why.startswith(_UNREADABLE)
        with self._lock:
            before = self._last.get(key)
            self._last[key] = check
            first = unreadable and (key, check.why) not in self._logged
            if first:
                self._logged.add((key, check.why))
        if check.held_back and (before is None or not before.held_back):
            log.info("%s is not indexed from this checkout: %s", key, check.why)
        elif first:
            log.warning("%s: %s", key, check.why)  # once per reason; indexed as before meanwhile
        return check
