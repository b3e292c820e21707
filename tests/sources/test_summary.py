"""The status line never says "up to date" while it is not (sources/summary.py, plain data in and out)."""

from __future__ import annotations

from helix_context.sources.summary import IndexState, summary_line


def _row(state: str = "watching", **extra: object) -> dict[str, object]:
    return {"state": state, **extra}


def _state(sources: list[dict[str, object]], **changes: object) -> IndexState:
    base = {"paused": False, "busy": False, "progress_done": 0, "progress_total": 0, "queued": 0, "lost": 0,
            "disk_full": False, "sources": sources}
    return IndexState(**{**base, **changes})  # type: ignore[arg-type]


def test_up_to_date_only_when_nothing_was_missed() -> None:
    assert summary_line(_state([_row(), _row()])) == "Index up to date, 2 folders"
    # native file events failed for one folder: polled from now on, and the line says so
    line = summary_line(_state([_row(watch_failed=True, watching=False, polling=True), _row()]))
    assert line == "Index rescanned, 2 folders; 1 polled because native file events failed"
    # events were lost and the rescan has not finished
    assert summary_line(_state([_row()], lost=1)) == "Catching up: file events were lost for 1 folder; rescanning"
    # a pass failed: never "up to date"
    assert summary_line(_state([_row("error"), _row()])) == "Indexing failed for 1 folder of 2: see its error"


def test_a_full_disk_says_indexing_stopped() -> None:
    line = summary_line(_state([_row("error")], disk_full=True, busy=True, progress_total=9))
    assert line.startswith("Indexing stopped: the disk is full (1 folder not up to date)")
    assert "free disk space" in line and "still served" in line


def test_a_checkout_on_another_branch_than_the_team_follows_is_never_up_to_date() -> None:
    line = summary_line(_state([_row("other_branch"), _row()]))
    assert line == ("1 folder of 2 not indexed from this checkout: it is on another branch than the team genome "
                    "follows; switch back to index it")
    busy = summary_line(_state([_row("other_branch"), _row("indexing")], busy=True, progress_done=1, progress_total=4))
    assert busy == "Indexing 1 / 4 files (1 on another branch than the team genome follows: not indexed from here)"
