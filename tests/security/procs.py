"""Real processes for the attack tests: a backend or a supervisor started the way users start them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
import psutil

REPO = Path(__file__).resolve().parents[2]
# the optional parts stay off: these tests are about processes and logs, not retrieval quality
LEAN_ENV = {"HELIX_EMBEDDING_ENABLED": "0", "HELIX_NER_ENABLED": "0", "HELIX_ASSEMBLY_HEADROOM": "0",
            "HELIX_INGEST_WORKERS": "1", "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(port: int, **extra: str) -> dict[str, str]:
    return {**os.environ, **LEAN_ENV, "HELIX_SERVER_PORT": str(port), **extra}


def start(args: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, *args], env=dict(env), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=REPO)


def wait_health(url: str, timeout: float = 60.0, headers: Mapping[str, str] | None = None) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            r = httpx.get(url + "/health", timeout=1, headers=dict(headers or {}), trust_env=False)
            if r.status_code == 200:
                return r.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} never answered /health")


def gone(pid: int, timeout: float) -> bool:
    """True once `pid` has exited (or is a zombie nobody reaped) within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def kill_tree(pid: int) -> None:
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=5)


def stop(proc: subprocess.Popen) -> None:
    """Ask a started process to stop (SIGTERM) and wait; whatever of its tree is left then is killed."""
    proc.terminate()
    try:
        proc.wait(30)
    finally:
        kill_tree(proc.pid)

