"""The attacks of issue 14 from a real browser: headless Chromium opens a page on `evil.example`
(resolved to 127.0.0.1 by the browser, as a rebinding attacker's DNS would) that fires cross-site
POSTs at the backend; then the browser itself is pointed at `evil.example:<backend port>`.

A recorder on the attacker's side receives the same requests the page sends to the backend, so the
test also sees that the browser really sent them, with its Origin and a text/plain body.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from helix_context import signals

PAGE = """<!doctype html><html><body data-done="0"><script>
(async () => {
  const backend = "http://127.0.0.1:%(backend)d";
  const results = {};
  for (const [path, body] of [["/admin/ribosome/pause", ""], ["/admin/shutdown", ""],
                              ["/ingest", '{"content": "planted by evil.example"}'],
                              ["/consolidate", ""], ["/admin/vacuum", ""]]) {
    for (const target of [backend, location.origin + "/recorder"]) {
      try {
        await fetch(target + path, {method: "POST", mode: "no-cors", body,
                                    headers: {"Content-Type": "text/plain"}});
        results[target + path] = "sent";
      } catch (e) { results[target + path] = String(e); }
    }
  }
  try {  // reading the answer needs CORS headers, which the backend never sends
    const r = await fetch(backend + "/stats");
    results.read = await r.text();
  } catch (e) { results.read = "blocked: " + e; }
  document.body.dataset.results = JSON.stringify(results);
  document.body.dataset.done = "1";
})();
</script></body></html>"""


class Attacker:
    """evil.example's web server: serves the page, records what reaches /recorder."""

    def __init__(self, backend_port: int) -> None:
        self.seen: list[dict[str, Any]] = []
        attacker = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = (PAGE % {"backend": backend_port}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                attacker.seen.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                      "body": self.rfile.read(length).decode("utf-8", "replace")})
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _chromium(url: str) -> str:
    binary = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                  None)
    if binary is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; tests/run.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="helix-chromium-") as profile:
        proc = subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--host-resolver-rules=MAP evil.example 127.0.0.1",
             "--virtual-time-budget=8000", "--dump-dom", url],
            capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": profile})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_a_page_on_another_site_can_neither_change_nor_read_the_backend(server) -> None:
    home = server.app.state.settings.home
    signals.set_ribosome_paused(False, home=home)
    genes_before = httpx.get(server.url + "/stats").json()["total_genes"]
    attacker = Attacker(server.port)
    try:
        dom = _chromium(f"http://evil.example:{attacker.port}/")
    finally:
        attacker.stop()
    assert 'data-done="1"' in dom, dom[-2000:]
    # the browser really sent the attack: cross-site, text/plain, no preflight
    recorded = [r for r in attacker.seen if r["path"].startswith("/recorder")]
    assert len(recorded) == 5, attacker.seen
    assert all(r["headers"].get("origin") == f"http://evil.example:{attacker.port}" for r in recorded)
    assert all(r["headers"].get("content-type", "").startswith("text/plain") for r in recorded)
    # ... and nothing happened on the backend
    assert httpx.get(server.url + "/health").status_code == 200
    assert signals.ribosome_paused(home) is False
    assert httpx.get(server.url + "/stats").json()["total_genes"] == genes_before
    results = json.loads(dom.split('data-results="', 1)[1].split('"', 1)[0].replace("&quot;", '"')
                         .replace("&amp;", "&"))
    assert results["read"].startswith("blocked"), results["read"]


def test_a_rebound_name_gets_no_page_and_no_data(server) -> None:
    """The browser thinks it talks to evil.example; the backend sees that name in Host and answers 400."""
    for path in ("/dashboard", "/dashboard/data", "/stats"):
        dom = _chromium(f"http://evil.example:{server.port}{path}")
        assert "host_not_allowed" in dom and "allowed_hosts" in dom, dom[-1500:]
        assert "total_genes" not in dom and "genes_by_tier" not in dom
