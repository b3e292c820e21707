"""The dashboard's Sources panel in headless Chromium, driven over the DevTools protocol: the page lists the
folders, adds one from its form, shows a refusal, pauses, removes — with same-origin fetch() requests.
A screenshot is kept as test-artifacts/dashboard-sources.png."""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.sources.conftest import fast_settings, make_tree, wait_until

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class Page:
    """One Chromium tab over the DevTools protocol (websocket, JSON messages)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        ident = next(self.ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == ident:
                if "error" in message:
                    raise AssertionError(f"{method}: {message['error']}")
                return message.get("result", {})

    def js(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def panel(self, key: str) -> Any:
        return self.js(f"(document.getElementById('sources') || {{dataset: {{}}}}).dataset[{json.dumps(key)}] || null")

    def rows(self) -> list[dict[str, str]]:
        return self.js("Array.from(document.querySelectorAll('#sources-table tbody tr[data-path]'))"
                       ".map(tr => ({...tr.dataset}))")


@pytest.fixture
def browser(tmp_path: Path):
    binary = _chromium()
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; tests/run.sh installs it)")
    from websockets.sync.client import connect

    profile = tempfile.mkdtemp(prefix="helix-chromium-")
    proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             "--disable-background-networking", "--disable-component-update", "--disable-sync",
                             "--disable-dev-shm-usage", "--hide-scrollbars", f"--user-data-dir={profile}",
                             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                             "--window-size=1400,1000", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "HOME": profile})
    pages: list[Any] = []
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        wait_until(lambda: port_file.is_file() and port_file.read_text().strip(), timeout=30, what="Chromium")
        port = int(port_file.read_text().splitlines()[0])

        def open_page(url: str) -> Page:
            targets = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=10).json()
            target = next(t for t in targets if t["type"] == "page")
            ws = connect(target["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024, open_timeout=30)
            pages.append(ws)
            page = Page(ws)
            page.send("Page.enable")
            page.send("Page.navigate", url=url)
            return page

        yield open_page
    finally:
        for ws in pages:
            ws.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def test_the_sources_panel_adds_pauses_and_removes_folders(browser, server_factory, settings,
                                                           tmp_path: Path) -> None:
    server = server_factory(fast_settings(settings))
    seen: list[tuple[str, str, str | None, str | None]] = []
    inner = server.app.middleware_stack

    async def record(scope, receive, send):  # what the guard of the security issue will look at
        if scope["type"] == "http" and scope["path"].startswith("/sources") and scope["method"] != "GET":
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            seen.append((scope["method"], scope["path"], headers.get("origin"), headers.get("sec-fetch-site")))
        await inner(scope, receive, send)

    server.app.middleware_stack = record
    service = server.app.state.sources
    first, second = make_tree(tmp_path / "alpha", 3), make_tree(tmp_path / "beta", 8)
    (second / "blob.dat").write_bytes(b"\x00\x01binary" * 10)  # a skipped file, with its reason
    service.add(str(first))
    assert service.wait_idle(30)

    page = browser(server.url + "/dashboard#sources")
    wait_until(lambda: page.panel("ready") == "1" and page.panel("rows") == "1", what="the panel to render")
    assert page.panel("summary") == "Index up to date, 1 folder (project alpha)"
    (row,) = page.rows()
    assert row["path"] == str(first.resolve()) and row["state"] == "watching" and row["files"] == "4"
    assert row["project"] == "alpha"  # every source has a project: the folder's name when none was given

    page.js(f"document.getElementById('sources-path').value = {json.dumps(str(second))};"
            "document.getElementById('sources-project').value = 'beta-project';"
            "document.querySelector('#sources-add button[type=submit]').click()")
    wait_until(lambda: page.panel("added") == str(second.resolve()), what="the add to be accepted")
    assert service.wait_idle(30)
    wait_until(lambda: {r["path"]: r["state"] for r in page.rows()}.get(str(second.resolve())) == "watching",
               what="the new folder to show as watching")
    rows = {r["path"]: r for r in page.rows()}
    assert rows[str(second.resolve())]["files"] == "9" and int(rows[str(second.resolve())]["genes"]) >= 9
    skipped = page.js("document.querySelector('#sources-table tr[data-path*=beta] td.skipped').title")
    assert "blob.dat: binary file" in skipped

    page.js("document.getElementById('sources-path').value = '/no/such/folder/anywhere';"
            "document.querySelector('#sources-add button[type=submit]').click()")
    wait_until(lambda: page.js("document.getElementById('sources-message').className") == "muted err",
               what="the refusal")
    assert "does not exist" in page.js("document.getElementById('sources-message').textContent")

    ARTIFACTS.mkdir(exist_ok=True)
    page.js("window.scrollTo(0, 0)")
    shot = page.send("Page.captureScreenshot", format="png")
    target = ARTIFACTS / "dashboard-sources.png"
    target.write_bytes(base64.b64decode(shot["data"]))
    assert target.stat().st_size > 20_000

    page.js("document.getElementById('sources-pause').click()")
    wait_until(lambda: page.panel("paused") == "1", what="pause")
    assert service.status()["paused"] and page.panel("summary") == "Indexing paused, 2 folders"
    page.js("document.getElementById('sources-pause').click()")
    wait_until(lambda: page.panel("paused") == "0", what="resume")

    page.js("document.querySelector('#sources-table tr[data-path*=alpha] button[data-action=remove]').click()")
    wait_until(lambda: [r["path"] for r in page.rows()] == [str(second.resolve())], what="the removal")
    assert [s["path"] for s in service.status()["sources"]] == [str(second.resolve())]

    origin = server.url
    assert seen and all(o == origin and site == "same-origin" for _m, _p, o, site in seen), seen
    assert {(m, p) for m, p, _o, _s in seen} >= {("POST", "/sources"), ("POST", "/sources/pause"),
                                                  ("POST", "/sources/resume"), ("DELETE", "/sources")}


def test_another_sites_page_cannot_frame_the_dashboard_and_the_key_leaves_the_address(browser, server_factory,
                                                                                       settings, tmp_path: Path) -> None:
    """A page of any site framed the dashboard invisibly: a click there on "Remove + forget" was a same-origin
    request, which the cross-site rule cannot tell apart. And the key a browser brings once in the URL stayed in
    the address bar, its history and bookmarks."""
    import http.server
    import threading

    from tests.conftest import free_port

    server = server_factory(fast_settings(settings).replace(api_key="frame-test-key"))
    evil_port = free_port()
    page_html = (f'<html><body><iframe id="f" src="{server.url}/dashboard?api_key=frame-test-key#sources">'
                 "</iframe></body></html>").encode()

    class Evil(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page_html)))
            self.end_headers()
            self.wfile.write(page_html)

        def log_message(self, *args: Any) -> None:
            pass

    evil = http.server.ThreadingHTTPServer(("127.0.0.1", evil_port), Evil)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        page = browser(f"http://localhost:{evil_port}/")
        wait_until(lambda: page.js("document.readyState") == "complete", what="the other site's page")

        # what the frame shows: the dashboard's own page would have a title and its Sources panel
        import time

        time.sleep(2.0)
        # a frame of another site runs as a target of its own (site isolation): ask each what it shows
        targets = page.send("Target.getTargets")["targetInfos"]
        assert any(t["type"] == "page" and t["url"].startswith(f"http://localhost:{evil_port}") for t in targets)
        shown = []
        for target in (t for t in targets if t["type"] == "iframe"):
            session = page.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)["sessionId"]
            page.ws.send(json.dumps({"id": 999, "sessionId": session, "method": "Runtime.evaluate",
                                     "params": {"expression": "location.href + ' ' + !!document.getElementById"
                                                              "('sources')", "returnByValue": True}}))
            while (message := json.loads(page.ws.recv(timeout=30))).get("id") != 999:
                pass
            shown.append(message["result"]["result"].get("value"))
        assert not [s for s in shown if s and s.endswith(" true")], shown  # no frame shows the dashboard

        page.send("Page.navigate", url=f"{server.url}/dashboard?api_key=frame-test-key&theme=dark")
        wait_until(lambda: page.js("document.readyState") == "complete" and page.js("location.search") == "?theme=dark",
                   what="the key to leave the address bar")
    finally:
        evil.shutdown()
