"""The tray's living-index entries, clicked through pystray's own menu objects (`icon.menu.items[i](icon)`)
against the real backend over HTTP: status line, "Add folder…", "Pause indexing" / "Resume indexing"."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest

from launcher.notices import Notices
from launcher.sources_menu import NO_BACKEND_LINE, NoDialog, SourcesMenu, choose_folder
from launcher.tray import TrayApp
from supkit import wait_until

pytestmark = pytest.mark.timeout(120)


def _tree(root: Path, n: int) -> Path:
    for i in range(n):
        path = root / f"pkg{i % 7}" / f"module_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def handler_{i}(event):\n    \"\"\"Handle event {i}.\"\"\"\n    return event + {i}\n")
    return root


def _index(menu, text: str) -> int:
    for i, item in enumerate(menu.items):
        if item.text.startswith(text):
            return i
    raise KeyError(text)


def test_tray_entries_add_a_folder_show_progress_and_pause(pystray_dummy, supervisors, server_factory, settings,
                                                           tmp_path: Path) -> None:
    from tests.sources.conftest import fast_settings

    server = server_factory(fast_settings(settings))
    tray_settings = settings.replace(server={"port": server.port})
    folder = _tree(tmp_path / "project", 1200)
    urls: list[str] = []
    app = TrayApp(tray_settings, supervisors.make(tray_settings, start=False), open_url=urls.append,
                  open_path=lambda p: None)
    lines: list[str] = []  # every status line the tray's poller saw (progress can be brief)
    app.sources_menu = SourcesMenu(tray_settings, open_url=urls.append, ask_folder=lambda: str(folder),
                                   poll_s=0.05, on_change=lambda: lines.append(app.sources_menu.status_line()))
    icon = app.make_icon(pystray_dummy)
    menu = icon.menu
    add, pause = _index(menu, "Add folder"), _index(menu, "Pause indexing")
    line = next(i for i, item in enumerate(menu.items) if item.text.startswith(("No folders", "Indexing", "Index ")))
    assert line < add and pause == add + 1 and menu.items[-1].text == "Quit"
    assert all(not item.enabled for item in menu.items[:line + 1] if item.text), "status lines come first"
    assert not menu.items[line].enabled
    wait_until(lambda: menu.items[line].text == "No folders indexed yet", timeout=10)

    menu.items[add](icon)  # the click: the dialog (here: the folder given above), then POST /sources
    app.sources_menu.last_action.join(10)
    progress = re.compile(r"^Indexing [\d,]+ / [\d,]+ files$")
    seen = wait_until(lambda: any(progress.match(t) for t in [*lines, menu.items[line].text]), timeout=30)
    assert seen, f"the status line never showed the indexing progress: {lines}"
    wait_until(lambda: menu.items[line].text == "Index up to date, 1 folder (project project)", timeout=60)
    assert urls == []
    # the status line and the per-folder counts come from one poll, but the count may land a poll later
    wait_until(lambda: [r.get("files") for r in app.sources_menu.status["sources"]] == [1200], timeout=30)
    (row,) = app.sources_menu.status["sources"]
    assert row["path"] == str(folder.resolve()) and row["files"] == 1200

    menu.items[pause](icon)
    assert menu.items[pause].text == "Resume indexing"
    assert menu.items[line].text == "Indexing paused, 1 folder"
    assert server.app.state.sources.status()["paused"] is True
    menu.items[pause](icon)
    assert menu.items[pause].text == "Pause indexing" and not server.app.state.sources.status()["paused"]

    # a folder the backend refuses: the dashboard's Sources panel opens, with the reason kept
    app.sources_menu._ask_folder = lambda: str(folder / "pkg0" / "module_0.py")
    menu.items[add](icon)
    app.sources_menu.last_action.join(10)
    assert urls == [f"{tray_settings.base_url}/dashboard#sources"]
    assert "not a folder" in app.sources_menu.add_error
    # cancelled dialog: nothing happens
    app.sources_menu._ask_folder = lambda: None
    menu.items[add](icon)
    app.sources_menu.last_action.join(10)
    assert len(urls) == 1 and len(server.app.state.sources.status()["sources"]) == 1
    app.sources_menu.close()


def test_without_a_backend_the_line_says_so(pystray_dummy, supervisors) -> None:
    from supkit import fast_settings

    settings = fast_settings()
    menu = SourcesMenu(settings, open_url=lambda url: None)
    menu.refresh()
    assert menu.status_line() == NO_BACKEND_LINE and menu.pause_label() == "Pause indexing"
    menu.close()


@pytest.mark.skipif(sys.platform == "win32", reason="Windows always has a folder dialog")
def test_add_folder_opens_the_dashboard_where_no_dialog_can_open(monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from supkit import fast_settings

    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(NoDialog):
        choose_folder(timeout_s=60)  # the real child process: tkinter finds no display
    settings = fast_settings()
    urls: list[str] = []
    notices = Notices()
    menu = SourcesMenu(settings, open_url=urls.append, notify=notices.post)
    with caplog.at_level(logging.WARNING, logger="helix.tray"):
        menu.add_folder().join(60)
    assert urls == [f"{settings.base_url}/dashboard#sources"]
    # it says why, in the menu's status lines and in the log: not a silent switch to the browser
    said = " ".join(notices.lines())
    assert "No folder dialog can open here" in said and "display" in said.lower(), said
    assert f"{settings.base_url}/dashboard#sources" in said
    assert any("No folder dialog can open here" in r.getMessage() for r in caplog.records)
    menu.close()
