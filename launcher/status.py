"""`helix-status [--json]`: the supervisor's snapshot plus a live /health check.

Exit code 0 when the backend answers /health right now, 1 when it does not
(whatever the snapshot says), 2 on a configuration error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import httpx
import psutil

from helix_context import signals
from helix_context.config import load_config
from helix_context.errors import ConfigError

from launcher.menu import status_lines


def live_health(base_url: str, api_key: str = "", timeout: float = 1.5) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    started = time.perf_counter()
    try:
        r = httpx.get(f"{base_url}/health", timeout=timeout, headers=headers, trust_env=False)
        body = r.json() if r.headers.get("content-type", "").startswith("application/json") else {}
    except (httpx.HTTPError, ValueError) as exc:
        return {"serving": False, "error": f"{type(exc).__name__}: {exc}", "url": base_url}
    ms = round((time.perf_counter() - started) * 1000, 1)
    serving = r.status_code == 200 and isinstance(body, dict) and body.get("status") in ("ok", "degraded")
    return {"serving": serving, "status_code": r.status_code, "health": body if isinstance(body, dict) else {},
            "latency_ms": ms, "url": base_url, "error": "" if serving else f"HTTP {r.status_code}"}


def _pid_alive(pid: Any) -> bool:
    try:
        return isinstance(pid, int) and psutil.pid_exists(pid)
    except Exception:
        return False


def _ago(ts: Any) -> str:
    if not isinstance(ts, (int, float)):
        return "never"
    d = max(0.0, time.time() - ts)
    if d < 120:
        return f"{d:.1f} s ago"
    if d < 7200:
        return f"{d / 60:.0f} min ago"
    return f"{d / 3600:.1f} h ago"


def render(snapshot: dict[str, Any] | None, live: dict[str, Any]) -> list[str]:
    out = [f"Helix Context — {live['url']}"]
    if live["serving"]:
        h = live.get("health") or {}
        out.append(f"  serving:    yes (/health {h.get('status')}, pid {h.get('pid')}, {live.get('latency_ms')} ms)")
    else:
        out.append(f"  serving:    NO ({live.get('error')})")
    if not snapshot:
        out.append("  supervisor: no status snapshot (is `helix-tray` or `helix supervise` running?)")
        return out
    sup = snapshot.get("supervisor") or {}
    alive = sup.get("alive", True) and _pid_alive(sup.get("pid"))
    out.append(f"  supervisor: pid {sup.get('pid')} ({'running' if alive else 'not running'}), "
               f"snapshot written {_ago(snapshot.get('written_at'))}")
    lines = status_lines(snapshot)
    b = snapshot.get("backend") or {}
    if alive:
        out.append("  " + lines["backend"].replace("Backend:", "backend:   "))
    else:  # a dead supervisor's last snapshot (it could not write another: stopped, or a full disk)
        out.append(f"  backend:    unknown: the supervisor that wrote this snapshot is not running (it last said "
                   f"{b.get('status')}, pid {b.get('pid')})")
    if b.get("crashes") or b.get("planned_restarts"):
        out.append(f"              {b.get('crashes', 0)} crash(es), {b.get('planned_restarts', 0)} planned restart(s)")
    if b.get("last_error"):
        out.append(f"  last error: {b['last_error']}")
    out.append("  " + lines["genes"].replace("Indexed chunks:", "indexed:   "))
    if lines["reembed"]:
        out.append("  " + lines["reembed"].replace("Re-embedding for the new model:", "re-embed:  "))
    gpu = snapshot.get("gpu") or {}
    out.append("  " + lines["gpu"].replace("GPU:", "GPU:       ")
               + (f" via {gpu.get('source')}" if gpu.get("available") else ""))
    out.append("  " + lines["models"].replace("Models:", "models:    "))
    p = snapshot.get("pressure") or {}
    if p.get("active"):
        out.append(f"  pressure:   ACTIVE — {'; '.join(p.get('reasons') or [])} (action: {p.get('action')}"
                   + (f", {p.get('last_action')}" if p.get("last_action") else "") + ")")
    else:
        out.append("  pressure:   none")
    out.append(f"  ribosome:   {'paused' if snapshot.get('ribosome_paused') else 'not paused'}")
    if b.get("status") == "fatal" and b.get("last_log_lines"):
        out.append("  last backend log lines:")
        out.extend(f"    | {log_line}" for log_line in b["last_log_lines"][-20:])
    if b.get("log_file"):
        out.append(f"  log:        {b['log_file']}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="helix-status", description="Helix Context supervisor status")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON (with a 'live' key)")
    parser.add_argument("--timeout", type=float, default=1.5, help="seconds to wait for /health (default 1.5)")
    args = parser.parse_args(argv)
    try:
        settings = load_config()
    except ConfigError as exc:
        print(f"helix-status: {exc}", file=sys.stderr)
        return 2
    snapshot = signals.read_supervisor_status(settings.home)
    live = live_health(settings.base_url, settings.api_key, timeout=args.timeout)
    if args.json:
        doc = dict(snapshot or {})
        doc["snapshot_found"] = snapshot is not None
        doc["live"] = live
        print(json.dumps(doc, indent=2, sort_keys=True, default=str))
    else:
        print("\n".join(render(snapshot, live)))
    return 0 if live["serving"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
