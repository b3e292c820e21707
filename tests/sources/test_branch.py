"""Which branch a source's checkout is on (sources/branch.py), read from real repositories made by `git`.

A team genome follows one branch: `[sources] follow_branch`, else the remote default branch the checkout
records. These read the files git writes (HEAD, a worktree's `.git` file and `commondir`, origin's HEAD)
for a plain checkout, a worktree, a detached HEAD, a folder in no checkout and damaged git files. A
personal (SQLite) genome is never held back: its user's checkout is what it indexes.
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from helix_context.sources import branch
from helix_context.sources.branch import BranchGate, read_branch
from tests.sources.conftest import git, git_repo, write

FILES = {"src/a.py": "def settle_invoice():\n    return 'settled'\n", "README.md": "# Ledger\n"}


def test_a_checkout_on_its_remote_default_branch_is_followed(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", FILES, origin=True)
    for folder in (repo, repo / "src", repo / "docs-this-branch-lacks"):  # a source may be a folder inside
        check = read_branch(folder)
        assert (check.branch, check.followed, check.held_back) == ("main", "main", False), check
    assert "the branch the team genome follows" in read_branch(repo).why


def test_another_branch_or_a_detached_head_is_held_back_with_what_to_do(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", FILES, origin=True)
    git(repo, "checkout", "-q", "-b", "feature/ledger")  # a branch name with a slash
    check = read_branch(repo)
    assert (check.branch, check.followed, check.held_back) == ("feature/ledger", "main", True), check
    assert check.why == ("this checkout is on feature/ledger; the team genome follows main: switch back to main to "
                         "index it again (your own edits are still served to you from disk)")

    git(repo, "checkout", "-q", "--detach", "main")  # as during a rebase or a bisect
    detached = read_branch(repo)
    assert (detached.branch, detached.held_back) == (None, True), detached
    assert "detached HEAD" in detached.why and "switch back to main" in detached.why


def test_a_worktree_reads_its_own_head_and_the_remote_default_branch_of_its_repository(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", FILES, origin=True)
    git(repo, "worktree", "add", "-q", "-b", "feature", str(tmp_path / "wt"))
    assert (tmp_path / "wt" / ".git").is_file()  # `gitdir: …/.git/worktrees/wt`; origin's HEAD is in the common dir
    check = read_branch(tmp_path / "wt" / "src")
    assert (check.branch, check.followed, check.held_back) == ("feature", "main", True), check
    assert read_branch(repo).held_back is False  # the main checkout is still on main
    git(tmp_path / "wt", "checkout", "-q", "--detach")
    assert read_branch(tmp_path / "wt").branch is None


def test_without_a_recorded_default_branch_nothing_is_checked_unless_follow_branch_names_one(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", FILES)  # no remote: no refs/remotes/origin/HEAD
    git(repo, "checkout", "-q", "-b", "feature")
    check = read_branch(repo)
    assert (check.branch, check.followed, check.held_back) == ("feature", None, False), check
    assert check.why.startswith("branch not checked") and "follow_branch" in check.why
    assert read_branch(repo, follow="main").held_back is True  # the setting names the branch
    git_repo(tmp_path / "cloned", FILES, origin=True)
    assert read_branch(tmp_path / "cloned", follow="release").held_back is True  # and wins over origin's HEAD
    assert read_branch(tmp_path / "cloned", follow=" main ").held_back is False


def test_a_folder_in_no_checkout_is_not_checked(tmp_path: Path) -> None:
    folder = write(tmp_path / "notes" / "todo.md", "# To do\n").parent
    check = read_branch(folder, follow="main")
    assert (check.branch, check.followed, check.held_back) == (None, None, False), check
    assert "not in a git checkout" in check.why


def test_a_relative_gitdir_file_is_followed_and_damaged_git_files_are_not_checked(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "sub", FILES, origin=True)
    shutil.move(repo / ".git", tmp_path / "modules-sub")  # as a submodule keeps it: `gitdir: ../modules-sub`
    (repo / ".git").write_text("gitdir: ../modules-sub\n")
    assert (read_branch(repo).branch, read_branch(repo).held_back) == ("main", False)

    (repo / ".git").write_text("not a gitdir line\n")
    damaged = read_branch(repo)
    assert (damaged.followed, damaged.held_back) == (None, False) and "could not read" in damaged.why
    (repo / ".git").write_text("gitdir: ../modules-sub\n")
    (tmp_path / "modules-sub" / "HEAD").unlink()
    (tmp_path / "modules-sub" / "HEAD").mkdir()  # unreadable as a file: never raises, never holds back
    unreadable = read_branch(repo)
    assert (unreadable.followed, unreadable.held_back) == (None, False) and "could not read" in unreadable.why


def test_the_gate_holds_a_source_back_until_its_checkout_is_back(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", FILES, origin=True)
    gate = BranchGate(team=True, follow="", every_s=1.0)
    assert gate.admit(key="@repo", folder=repo) == "index" and gate.due() is None
    git(repo, "checkout", "-q", "-b", "feature")
    assert gate.admit(key="@repo", folder=repo) == "hold" and gate.holds("@repo")
    due = gate.due()
    assert due is not None and gate.returned(now=due - 0.5) == []  # not yet due: nothing read
    assert gate.returned(now=due) == []  # still on feature
    git(repo, "checkout", "-q", "main")
    assert gate.returned(now=due + 5) == ["@repo"] and not gate.holds("@repo") and gate.due() is None
    git(repo, "checkout", "-q", "feature")
    assert gate.admit(key="@repo", folder=repo) == "hold"
    git(repo, "checkout", "-q", "main")
    assert gate.admit(key="@repo", folder=repo) == "resume"  # a batch saw it first: one full pass follows

    personal = BranchGate(team=False, follow="main", every_s=1.0)
    git(repo, "checkout", "-q", "feature")
    assert personal.admit(key=str(repo), folder=repo) == "index" and personal.last(str(repo)) is None


def test_a_personal_genome_indexes_whatever_branch_is_checked_out(service_factory, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", {**FILES, "src/b.py": "def archive_ledger():\n    return 'archived'\n"},
                    origin=True)
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "rm", "-q", "src/b.py")
    service = service_factory()
    service.add(str(repo))
    assert service.wait_idle(30)
    (row,) = service.status()["sources"]
    assert (row["state"], row["files"]) == ("watching", 2) and "branch" not in row, row  # feature's two files
    assert "another branch" not in service.status()["summary"]


def test_while_git_rewrites_the_checkout_the_gate_waits_for_it_before_deciding(tmp_path: Path) -> None:
    """During `git checkout feature` git rewrites the files first and HEAD last, holding index.lock: a batch
    judged by HEAD alone would index feature's files as main's. The gate waits for the lock to go."""
    repo = git_repo(tmp_path / "repo", FILES, origin=True)
    git(repo, "branch", "feature")
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    assert read_branch(repo).busy and read_branch(repo).branch == "main"

    def finish_checkout() -> None:
        time.sleep(0.4)
        (repo / ".git" / "HEAD").write_text("ref: refs/heads/feature\n")
        lock.unlink()

    gate = BranchGate(team=True, follow="", every_s=1.0, settle_s=10.0)
    switcher = threading.Thread(target=finish_checkout)
    started = time.monotonic()
    switcher.start()
    try:
        assert gate.admit(key="@repo", folder=repo) == "hold"  # feature's files are not indexed as main's
    finally:
        switcher.join()
    assert time.monotonic() - started >= 0.4 and not read_branch(repo).busy

    git(repo, "checkout", "-q", "main")
    lock.write_text("")  # a lock a crashed git left behind: decided without it after settle_s
    stale = BranchGate(team=True, follow="", every_s=1.0, settle_s=0.3)
    started = time.monotonic()
    assert stale.admit(key="@repo", folder=repo) == "index" and time.monotonic() - started < 5


def test_a_pass_stops_between_two_files_when_its_checkout_moves(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    repo = git_repo(tmp_path / "repo", FILES, origin=True)
    gate = BranchGate(team=True, follow="", every_s=1.0)
    assert not gate.moved(key="@repo", folder=repo)
    (repo / ".git" / "index.lock").write_text("")
    assert not gate.moved(key="@repo", folder=repo)  # looked at most every LOOK_EVERY_S: not yet
    monkeypatch.setattr(branch, "LOOK_EVERY_S", 0.0)
    assert gate.moved(key="@repo", folder=repo)  # git is rewriting it
    (repo / ".git" / "index.lock").unlink()
    assert not gate.moved(key="@repo", folder=repo)
    git(repo, "checkout", "-q", "-b", "feature")
    assert gate.moved(key="@repo", folder=repo)  # left the followed branch
    assert not BranchGate(team=False, follow="main", every_s=1.0).moved(key=str(repo), folder=repo)
