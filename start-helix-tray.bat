@echo off
rem Start Helix Context: the supervisor + tray icon (helix-tray).
rem
rem   start-helix-tray.bat              tray icon + supervised backend
rem   start-helix-tray.bat --headless   supervisor only (same as `helix supervise`)
rem
rem The first run creates .venv next to this script and installs the project into it;
rem later runs skip the install unless pyproject.toml (or the Python) changed.
rem The Python: launcher\pick_python.py picks one that is 3.11 or newer (the same
rem steps as start-helix-tray.sh; python3-gi does not matter on Windows).
rem Environment: PYTHON=C:\path\to\python.exe to choose the interpreter,
rem              HELIX_VENV_SYSTEM_SITE=1/0 to force/forbid --system-site-packages.
setlocal EnableExtensions EnableDelayedExpansion

set "HERE=%~dp0"
if "%HERE:~-1%"=="\" set "HERE=%HERE:~0,-1%"
set "VENV=%HERE%\.venv"
set "STAMP=%VENV%\.helix-install-stamp"

rem step 1: any Python to run the picker with
set "BOOT="
if defined PYTHON (
  set BOOT="%PYTHON%"
) else (
  py -3 -c "pass" >nul 2>&1 && set "BOOT=py -3"
  if not defined BOOT python -c "pass" >nul 2>&1 && set "BOOT=python"
)
if not defined BOOT (
  echo [start-helix-tray] Helix needs Python 3.11 or newer: install it from https://www.python.org/downloads/ 1>&2
  echo [start-helix-tray] ^(tick "Add python.exe to PATH"^), or set PYTHON=C:\path\to\python.exe 1>&2
  exit /b 1
)

rem step 2: the Python for the venv, --system-site-packages or not, and whether the venv must be made anew
set "HELIX_PY="
set "HELIX_SYSTEM_SITE=0"
set "HELIX_RECREATE=0"
for /f "usebackq tokens=1,* delims==" %%A in (`"%BOOT% "%HERE%\launcher\pick_python.py" --venv "%VENV%""`) do (
  if "%%A"=="HELIX_PY" set "HELIX_PY=%%B"
  if "%%A"=="HELIX_SYSTEM_SITE" set "HELIX_SYSTEM_SITE=%%B"
  if "%%A"=="HELIX_RECREATE" set "HELIX_RECREATE=%%B"
)
if not defined HELIX_PY (
  echo [start-helix-tray] no usable Python ^(see above^); set PYTHON=C:\path\to\python.exe to choose one 1>&2
  exit /b 1
)

rem step 3: the venv
if "%HELIX_RECREATE%"=="1" rmdir /s /q "%VENV%"
set "VPY=%VENV%\Scripts\python.exe"
if exist "%VPY%" goto :install
set "SITE_ARG="
if "%HELIX_SYSTEM_SITE%"=="1" set "SITE_ARG=--system-site-packages"
echo [start-helix-tray] creating %VENV% with %HELIX_PY% %SITE_ARG% 1>&2
"%HELIX_PY%" -m venv %SITE_ARG% "%VENV%"
if errorlevel 1 (
  echo [start-helix-tray] could not create the virtual environment 1>&2
  exit /b 1
)

:install
rem step 4: install, when pyproject.toml or the venv's Python changed (the stamp holds both)
set "WANT="
for /f "usebackq delims=" %%H in (`""%VPY%" -c "import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], 'rb').read()).hexdigest(), sys.version.split()[0])" "%HERE%\pyproject.toml""`) do set "WANT=%%H"
set "HAVE="
if exist "%STAMP%" set /p HAVE=<"%STAMP%"
if "!WANT!"=="!HAVE!" goto :run

echo [start-helix-tray] installing Helix Context into %VENV% (first run, or pyproject.toml changed) 1>&2
rem --no-compile: Python compiles the modules it imports when it first imports them; compiling every
rem installed file up front took ~70 MB of the venv for modules that never run
"%VPY%" -m pip install --disable-pip-version-check -q --no-compile -e "%HERE%"
if errorlevel 1 exit /b 1
rem the compressors, without litellm/openai/botocore (~250 MB nothing imports); their real needs are in pyproject
"%VPY%" -m pip install --disable-pip-version-check -q --no-compile --no-deps "headroom-ai==0.42.0"
if errorlevel 1 exit /b 1
> "%STAMP%" echo !WANT!

:run
rem step 5: the tray
"%VENV%\Scripts\helix-tray.exe" %*
exit /b %ERRORLEVEL%
