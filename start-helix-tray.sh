#!/usr/bin/env bash
# Start Helix Context: the supervisor + tray icon (helix-tray).
#
#   ./start-helix-tray.sh              tray icon + supervised backend
#   ./start-helix-tray.sh --headless   supervisor only (same as `helix supervise`)
#
# The first run creates .venv next to this script and installs the project into it;
# later runs skip the install unless pyproject.toml (or the Python) changed.
# The Python: launcher/pick_python.py picks one that is 3.11 or newer and, on Linux,
# prefers one that can load python3-gi (the desktop tray with a real menu); the venv
# then gets --system-site-packages so it sees gi. A venv that cannot load gi is made
# anew once such a Python exists (after `sudo apt install python3-gi ...`).
# Environment: PYTHON=/path/to/python3.x to choose the interpreter,
#              HELIX_VENV_SYSTEM_SITE=1/0 to force/forbid --system-site-packages.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
STAMP="$VENV/.helix-install-stamp"

say() { printf '[start-helix-tray] %s\n' "$*" >&2; }

# step 1: any Python to run the picker with
BOOT=""
for cand in "${PYTHON:-}" python3 python3.11 python; do
  if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1; then BOOT="$cand"; break; fi
done
if [ -z "$BOOT" ]; then
  say "Helix needs Python 3.11 or newer (python3 on PATH)."
  say "Debian/Ubuntu: sudo apt install python3.11 python3.11-venv   (or set PYTHON=/path/to/python3.x)"
  exit 1
fi

# step 2: the Python for the venv, --system-site-packages or not, and whether the venv must be made anew
HELIX_PY="" HELIX_SYSTEM_SITE=0 HELIX_RECREATE=0
while IFS='=' read -r key value; do
  case "$key" in
    HELIX_PY) HELIX_PY="$value" ;;
    HELIX_SYSTEM_SITE) HELIX_SYSTEM_SITE="$value" ;;
    HELIX_RECREATE) HELIX_RECREATE="$value" ;;
  esac
done < <("$BOOT" "$HERE/launcher/pick_python.py" --venv "$VENV" || true)
if [ -z "$HELIX_PY" ]; then say "no usable Python (see above); set PYTHON=/path/to/python3.11 to choose one"; exit 1; fi

# step 3: the venv
if [ "$HELIX_RECREATE" = 1 ]; then rm -rf "$VENV"; fi
if [ ! -x "$VENV/bin/python" ]; then
  args=()
  if [ "$HELIX_SYSTEM_SITE" = 1 ]; then args+=(--system-site-packages); fi
  say "creating $VENV with $HELIX_PY${args[*]+ (${args[*]})}"
  "$HELIX_PY" -m venv ${args[@]+"${args[@]}"} "$VENV" || {
    say "could not create the virtual environment; on Debian/Ubuntu: sudo apt install python3-venv"
    exit 1
  }
fi

# step 4: install, when pyproject.toml or the venv's Python changed (the stamp holds both)
VPY="$VENV/bin/python"
want="$("$VPY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(), sys.version.split()[0])' "$HERE/pyproject.toml")"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  say "installing Helix Context into $VENV (first run, or pyproject.toml changed)"
  # --no-compile: Python compiles the modules it imports when it first imports them; compiling every
  # installed file up front took ~70 MB of the venv for modules that never run
  "$VPY" -m pip install --disable-pip-version-check -q --no-compile -e "$HERE"
  # the compressors, without litellm/openai/botocore (~250 MB nothing imports); their real needs are in pyproject
  "$VPY" -m pip install --disable-pip-version-check -q --no-compile --no-deps "headroom-ai==0.42.0"
  printf '%s\n' "$want" > "$STAMP"
fi

# step 5: the tray
exec "$VENV/bin/helix-tray" "$@"
