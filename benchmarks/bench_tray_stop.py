"""How fast the tray stops on SIGTERM, per tray backend, against a baseline measured in the same run.

Under a private Xvfb + D-Bus session + trayer (the XEmbed tray host), for each backend that can run
here, the real `python -m launcher.tray` is started, waited on until its backend serves and its icon
is docked, then sent SIGTERM; the time until the tray process has exited and its backend no longer
answers is the number. Target: <= 5 s on every backend.

  baseline      `helix-tray --headless` (the supervisor alone, no icon): the same backend stop
  xorg          pystray's XEmbed icon with Helix's Tk menu (this Python)
  gtk           GTK status icon        (a venv from the system Python with --system-site-packages)
  appindicator  AppIndicator           (same venv)

    python benchmarks/bench_tray_stop.py [--runs 3]

Needs xvfb, x11-utils, xdotool, trayer, dbus; gtk/appindicator need python3-gi,
gir1.2-gtk-3.0 and gir1.2-ayatanaappindicator3-0.1 for a system Python of this Python's version.
"""

from __future__ import annotations

import argparse
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).absolute().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "launcher"))

import xkit  # noqa: E402  (the private desktop the tray tests use)

TARGET_S = 5.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serving(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=0.5, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def wait(pred, timeout: float, every: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(every)
    return False


def one_stop(python: str, env: dict[str, str], backend: str, home: Path) -> float | None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    run_env = {**env, "PYTHONPATH": str(ROOT), "HELIX_HOME": str(home), "HELIX_SERVER_PORT": str(port),
               "HELIX_WATCHERS_OLLAMA_URL": f"http://127.0.0.1:{free_port()}"}
    args = [python, "-m", "launcher.tray"]
    if backend == "baseline":
        args.append("--headless")
    else:
        run_env["HELIX_TRAY_BACKEND"] = backend
    proc = subprocess.Popen(args, cwd=ROOT, env=run_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not wait(lambda: serving(url), 60):
            return None
        if backend != "baseline":
            docked = lambda: "Helix Context - running" in subprocess.run(  # noqa: E731 - a one-line helper beside its only use
                ["xwininfo", "-root", "-tree"], env=env, capture_output=True, text=True).stdout
            if not wait(docked, 30):
                return None
        time.sleep(0.5)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        wait(lambda: not serving(url), 10, every=0.01)
        return time.monotonic() - started
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    why = xkit.session_skip()
    if why:
        print(f"cannot run: {why}")
        return 1
    with tempfile.TemporaryDirectory(prefix="helix-bench-tray-") as tmp_s, xkit.desktop() as env:
        tmp = Path(tmp_s)
        system, why = xkit.system_gi_python()
        gi = xkit.make_gi_venv(system, tmp / "gi-venv") if system else ""
        rows = [("baseline", sys.executable), ("xorg", sys.executable)]
        if gi:
            rows += [("gtk", gi), ("appindicator", gi)]
        else:
            print(f"gtk / appindicator: skipped ({why})")
        print(f"SIGTERM -> tray and backend gone, median of {args.runs} (target <= {TARGET_S:.0f} s); "
              f"2-core machine shared with other work: timings are noisy")
        for name, python in rows:
            times = [one_stop(python, env, name, tmp / f"{name}-{i}") for i in range(args.runs)]
            ok = [t for t in times if t is not None]
            if not ok:
                print(f"  {name:13s} did not start")
                continue
            med = statistics.median(ok)
            verdict = "" if name == "baseline" else (" ok" if max(ok) <= TARGET_S else " OVER TARGET")
            print(f"  {name:13s} {med:5.2f} s  (max {max(ok):.2f} s){verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
