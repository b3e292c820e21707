"""A private desktop for the tray: Xvfb + a D-Bus session bus + trayer (the XEmbed tray host),
and a venv that sees the system's python3-gi. Shared by the Xvfb tray tests and
benchmarks/bench_tray_stop.py."""

from __future__ import annotations

import contextlib
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

REPO = Path(__file__).absolute().parents[2]
TOOLS = {"Xvfb": "xvfb", "xdpyinfo": "x11-utils", "xwininfo": "x11-utils", "trayer": "trayer",
         "xdotool": "xdotool", "import": "imagemagick", "dbus-daemon": "dbus"}
GI_PROBE = ("import gi; gi.require_version('Gtk', '3.0'); gi.require_version('AyatanaAppIndicator3', '0.1'); "
            "from gi.repository import Gtk, AyatanaAppIndicator3")


def session_skip() -> str:
    """Why the private desktop cannot run here ('' when it can)."""
    if not sys.platform.startswith("linux"):
        return "the Xvfb tray tests run on Linux"
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        return f"needs {', '.join(missing)} (apt-get install -y {' '.join(missing)})"
    return ""


def x(env: dict, *cmd: str) -> str:
    return subprocess.run(list(cmd), env=env, capture_output=True, text=True, timeout=20).stdout


def _until(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"{what} within {timeout:.0f} s")
        time.sleep(0.05)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def desktop() -> Iterator[dict[str, str]]:
    """Xvfb + D-Bus + trayer; yields an environment that reaches them (no tray backend forced)."""
    procs: list[subprocess.Popen] = []
    try:
        # Xvfb picks a free display number itself and tells us: no race with other X servers starting now
        xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "640x360x24", "-nolisten", "tcp"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(xvfb)
        assert xvfb.stdout is not None
        display = f":{xvfb.stdout.readline().strip()}"
        _until(lambda: subprocess.run(["xdpyinfo", "-display", display], capture_output=True).returncode == 0,
               20, "Xvfb did not answer")
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(bus)
        assert bus.stdout is not None
        address = bus.stdout.readline().strip()
        assert address, "dbus-daemon printed no address"
        env = {**os.environ, "DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": address, "NO_AT_BRIDGE": "1"}
        env.pop("PYSTRAY_BACKEND", None)
        env.pop("HELIX_TRAY_BACKEND", None)
        procs.append(_trayer(env))
        yield env
    finally:
        for proc in reversed(procs):
            stop(proc)


def _trayer(env: dict[str, str], tries: int = 3) -> subprocess.Popen:
    """trayer, once its panel is shown. Started again when it showed none within 15 s: a CI run once
    saw a trayer that never did, on an Xvfb that answered, which failed every test of the module."""
    said = ""
    for _ in range(tries):
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--widthtype", "request",
                                     "--height", "40", "--SetDockType", "true"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=err)
            try:
                _until(lambda p=proc: '"panel"' in x(env, "xwininfo", "-root", "-tree") or p.poll() is not None,
                       15, "trayer showed no panel")
                if proc.poll() is None:
                    return proc
            except AssertionError:
                pass
            stop(proc)
            err.seek(0)
            said = err.read().decode(errors="replace")[-2000:]
    raise AssertionError(f"trayer showed no panel in {tries} tries; its last words: {said or '(none)'}")


def system_gi_python() -> tuple[str, str]:
    """(path, '') of a system Python that loads gi and AppIndicator, with this Python's major.minor
    (so it can load this environment's packages), or ('', why not)."""
    seen = []
    for cand in ("/usr/bin/python3", "/usr/bin/python3.11", "/usr/bin/python3.12", "/usr/bin/python3.13",
                 shutil.which("python3") or ""):
        if not cand or not Path(cand).exists() or cand in seen:
            continue
        seen.append(cand)
        ver = subprocess.run([cand, "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
                             capture_output=True, text=True).stdout.strip()
        if ver == ".".join(map(str, sys.version_info[:2])) and subprocess.run([cand, "-c", GI_PROBE],
                                                                    capture_output=True).returncode == 0:
            return cand, ""
    major, minor = sys.version_info[:2]
    return "", (f"no system Python {major}.{minor} that loads gi and AyatanaAppIndicator3 (apt-get install -y "
                f"python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1); looked at {', '.join(seen) or 'nothing'}")


def make_gi_venv(system: str, venv: Path) -> str:
    """A venv from the system Python with --system-site-packages (it sees python3-gi), which also
    sees this environment's packages through a .pth file: about a second, no downloads."""
    subprocess.run([system, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    target = subprocess.run([str(py), "-c", "import site; print(site.getsitepackages()[0])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    Path(target, "helix-test-env.pth").write_text("\n".join([str(REPO), *site.getsitepackages()]) + "\n")
    return str(py)
