"""Which Python should run Helix's tray: 3.11 or newer, and on Linux one that can load
python3-gi (the AppIndicator / GTK tray with a real menu) when the system has it.

A Python from pyenv, conda or a venv cannot see Debian's `gi`, while the system
Python can; a venv made from the system Python with --system-site-packages sees
it too. The start scripts (start-helix-tray.sh / .bat) run this file with any
Python they find and read its answer from stdout:

    HELIX_PY=/usr/bin/python3.11     the interpreter to make the venv from
    HELIX_SYSTEM_SITE=1              make the venv with --system-site-packages
    HELIX_RECREATE=1                 the existing venv cannot load gi but HELIX_PY can: make it anew

What it decided and why goes to stderr in plain words. The tray uses `gi_hint()`
for the same advice when it finds itself running on a Python without gi.

Standard library only, and no syntax newer than Python 3.8: it runs before any
venv exists, on whatever Python is on PATH.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

MIN_VERSION = (3, 11)
PROBE = ("import json, sys\n"
         "try:\n    import gi\n    gi.require_version('Gtk', '3.0')\n    ok = True\n"
         "except Exception:\n    ok = False\n"
         "try:\n    import tkinter\n    tk = True\n"
         "except Exception:\n    tk = False\n"
         "print(json.dumps({'executable': sys.executable, 'version': list(sys.version_info[:3]), 'gi': ok,"
         " 'tk': tk, 'base': getattr(sys, 'base_prefix', sys.prefix) != sys.prefix}))")

TK_HINT = ("%s has no tkinter: the folder dialog of \"Add folder…\" and the classic tray icon's menu need it "
           "(without it both fall back to the dashboard). Debian/Ubuntu: sudo apt install python3-tk; "
           "Fedora: sudo dnf install python3-tkinter; Arch: sudo pacman -S tk")


def venv_python(venv, os_name=os.name):
    """The interpreter inside a venv: Scripts\\python.exe on Windows, bin/python elsewhere."""
    venv = Path(venv)
    return venv / "Scripts" / "python.exe" if os_name == "nt" else venv / "bin" / "python"


def candidate_commands(env, os_name=os.name):
    """Interpreters to consider, the user's PYTHON first (it is then the only one)."""
    if env.get("PYTHON"):
        return [[env["PYTHON"]]]
    if os_name == "nt":
        return [["py", "-3.13"], ["py", "-3.12"], ["py", "-3.11"], ["py", "-3"], ["python"]]
    return [["python3.11"], ["python3"], ["python3.12"], ["python3.13"],
            ["/usr/bin/python3"], ["/usr/bin/python3.11"], ["/usr/bin/python3.12"], ["/usr/bin/python3.13"]]


def probe(command, timeout=20.0):
    """What `command` is: {'executable', 'version', 'gi'}, or None when it does not run."""
    try:
        out = subprocess.run([*command, "-c", PROBE], capture_output=True, text=True, timeout=timeout,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    try:
        info = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    info["version"] = tuple(info["version"])
    return info


def _fmt(info):
    return "%s (%s)" % (info["executable"], ".".join(str(v) for v in info["version"]))


def choose(found, os_name=os.name, user_chose=False):
    """(info of the Python to use or None, system_site, message) from probed interpreters, in order."""
    unique = {}
    for f in found:
        if f and f["executable"] not in unique:
            unique[f["executable"]] = f
    found = list(unique.values())
    usable = [f for f in found if f["version"] >= MIN_VERSION]
    if not usable:
        older = found
        msg = "Helix needs Python 3.11 or newer"
        if older:
            msg += "; found only " + ", ".join(_fmt(f) for f in older)
        return None, False, msg
    if os_name == "nt" or user_chose:
        pick = usable[0]
        return pick, bool(pick["gi"] and os_name != "nt"), "using " + _fmt(pick)
    with_gi = [f for f in usable if f["gi"]]
    if with_gi:
        pick = with_gi[0]
        skipped = [f for f in usable[:usable.index(pick)]]
        why = ""
        if skipped:
            why = "; %s cannot load python3-gi" % ", ".join(_fmt(f) for f in skipped)
        return pick, True, "using %s: it can load python3-gi, so the tray gets its desktop menu%s" % (_fmt(pick), why)
    pick = usable[0]
    return pick, False, ("using %s; no Python 3.11+ here can load python3-gi, so the tray falls back to the "
                         "classic X11 icon. For the desktop tray menu: sudo apt install python3-gi gir1.2-gtk-3.0 "
                         "gir1.2-ayatanaappindicator3-0.1, then run this script again" % _fmt(pick))


def venv_needs_remaking(venv, system_site, env, probe_fn=probe, os_name=os.name):
    """True when the venv exists and cannot load gi while the chosen Python (system_site) can."""
    vpy = venv_python(venv, os_name)
    if not system_site or not vpy.exists() or env.get("HELIX_VENV_SYSTEM_SITE") == "0":
        return False
    info = probe_fn([str(vpy)])
    return info is None or not info["gi"]


def gi_hint(executable=sys.executable, probe_fn=probe, os_name=os.name):
    """Plain advice for a tray running on a Python that cannot load gi."""
    found = [probe_fn(c) for c in candidate_commands({}, os_name)]
    best = next((f for f in found if f and f["gi"] and f["version"] >= MIN_VERSION), None)
    if best is not None:
        return ("this Python (%s) cannot load python3-gi, but %s can. Make the venv from it: "
                "`%s -m venv --system-site-packages .venv` and install Helix into it again; start-helix-tray.sh "
                "does this by itself on its next run. Until then the tray uses the classic X11 icon"
                % (executable, _fmt(best), best["executable"]))
    return ("this Python (%s) cannot load python3-gi, and no system Python 3.11+ can either. For the desktop "
            "tray menu: sudo apt install python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1, then run "
            "start-helix-tray.sh again. Until then the tray uses the classic X11 icon" % executable)


def main(argv=None, env=None, probe_fn=probe, os_name=os.name, out=sys.stdout, err=sys.stderr):
    argv = list(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    venv = Path(argv[argv.index("--venv") + 1]) if "--venv" in argv else Path(".venv")
    found = [probe_fn(c) for c in candidate_commands(env, os_name)]
    pick, system_site, message = choose(found, os_name, user_chose=bool(env.get("PYTHON")))
    print("[start-helix-tray] " + message, file=err)
    if pick is None:
        if os_name == "nt":
            print("[start-helix-tray] install it from https://www.python.org/downloads/ (tick \"Add python.exe to "
                  "PATH\"), or set PYTHON=C:\\path\\to\\python.exe", file=err)
        else:
            print("[start-helix-tray] Debian/Ubuntu: sudo apt install python3.11 python3.11-venv "
                  "(or set PYTHON=/path/to/python3.x)", file=err)
        return 1
    if os_name != "nt" and pick.get("tk") is False:  # named like gi is; a Windows/python.org build has Tk
        print("[start-helix-tray] " + TK_HINT % pick["executable"], file=err)
    forced = env.get("HELIX_VENV_SYSTEM_SITE", "")
    if forced in ("0", "1"):
        system_site = forced == "1"
    recreate = venv_needs_remaking(venv, system_site, env, probe_fn, os_name)
    if recreate:
        print("[start-helix-tray] %s cannot load python3-gi: making it anew from %s with --system-site-packages "
              "(set HELIX_VENV_SYSTEM_SITE=0 to keep it)" % (venv, pick["executable"]), file=err)
    print("HELIX_PY=%s" % pick["executable"], file=out)
    print("HELIX_SYSTEM_SITE=%d" % int(system_site), file=out)
    print("HELIX_RECREATE=%d" % int(recreate), file=out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
