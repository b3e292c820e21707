"""The backend never outlives its supervisor unmanaged.

The real thing: `helix supervise` in its own process starts a real backend; the test kills the
supervisor with SIGKILL (no clean-up runs) and the backend must stop by itself, freeing the port.
The Windows job object is exercised on Linux through its platform seam with a recording kernel32.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import psutil
import pytest

from helix_context import signals
from helix_context.server import lifeline
from security.procs import env_for, free_port, gone, kill_tree, start, wait_health
from supervisor import winjob
from supervisor.process import backend_env

POSIX_ONLY = pytest.mark.skipif(os.name == "nt", reason="kill -9 of a process is a POSIX signal")


@POSIX_ONLY
def test_kill_9_of_the_supervisor_stops_its_backend(tmp_path, helix_home) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    sup = start(["-m", "helix_context.cli", "supervise"], env_for(port), tmp_path / "supervise.log")
    backend_pid = None
    try:
        backend_pid = wait_health(url, timeout=90)["pid"]
        backend = psutil.Process(backend_pid)
        assert backend.ppid() == sup.pid  # really the supervisor's child
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait(timeout=10)
        assert gone(backend_pid, timeout=20), "the backend outlived its supervisor"
        with pytest.raises(httpx.HTTPError):
            httpx.get(url + "/health", timeout=1)
        state, _, _ = signals.read_server_state(helix_home)
        assert state is not None and state.state == "stopped" and state.pid == backend_pid  # a clean stop
    finally:
        if sup.poll() is None:
            kill_tree(sup.pid)
        if backend_pid is not None:
            kill_tree(backend_pid)


@POSIX_ONLY
def test_a_backend_started_without_a_supervisor_keeps_serving(tmp_path, helix_home) -> None:
    """`helix serve` from a shell whose parent goes away is the user's to stop: no lifeline."""
    port = free_port()
    shell = start(["-c", "import subprocess, sys; p = subprocess.Popen([sys.executable, '-m', 'helix_context.cli', "
                         "'serve']); print(p.pid, flush=True)"], env_for(port), tmp_path / "shell.log")
    shell.wait(timeout=30)
    pid = int((tmp_path / "shell.log").read_text().split()[0])
    try:
        assert wait_health(f"http://127.0.0.1:{port}")["pid"] == pid
        time.sleep(1.5)  # three lifeline polls, were there one
        assert not gone(pid, timeout=0.1)
    finally:
        kill_tree(pid)


def test_the_backend_env_names_its_supervisor(settings) -> None:
    assert backend_env(settings, {})[signals.SUPERVISOR_PID_ENV] == str(os.getpid())


def test_lifeline_stops_the_backend_when_the_parent_is_gone_unless_released(helix_home) -> None:
    parent = {"alive": True}
    stopped = threading.Event()
    env = {signals.SUPERVISOR_PID_ENV: "4242"}
    thread = lifeline.watch_supervisor(env, home=helix_home, poll_s=0.01, alive=lambda: parent["alive"],
                                       on_gone=stopped.set)
    assert thread is not None and not stopped.wait(0.1)
    parent["alive"] = False
    assert stopped.wait(2)

    # a supervisor that quits on purpose and keeps its backend says so first
    signals.release_backend(os.getpid(), home=helix_home)
    kept = threading.Event()
    thread = lifeline.watch_supervisor(env, home=helix_home, poll_s=0.01, alive=lambda: False, on_gone=kept.set)
    thread.join(2)
    assert not thread.is_alive() and not kept.is_set()
    assert lifeline.watch_supervisor({}, home=helix_home) is None  # `helix serve`: nothing to watch


@POSIX_ONLY
def test_posix_parent_check_follows_the_real_parent_or_a_wrapped_supervisor() -> None:
    assert lifeline.parent_alive_check(os.getppid(), platform="linux")()
    # started through a wrapper: the supervisor's pid is watched as well
    assert lifeline.parent_alive_check(os.getpid(), platform="linux")()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not lifeline.parent_alive_check(dead.pid, platform="linux")()


class RecordingKernel32:
    """Stands in for kernel32 on Linux: records the calls the supervisor makes on Windows."""

    def __init__(self, fail: str = "") -> None:
        self.calls: list[tuple] = []
        self.fail = fail
        self.flags: list[int] = []

    def CreateJobObjectW(self, attrs, name):  # the Win32 name
        self.calls.append(("CreateJobObjectW", attrs, name))
        return 0 if self.fail == "create" else 77

    def SetInformationJobObject(self, handle, klass, info_ref, size):
        info = ctypes.cast(info_ref, ctypes.POINTER(winjob.JOBOBJECT_EXTENDED_LIMIT_INFORMATION)).contents
        self.flags.append(info.BasicLimitInformation.LimitFlags)
        self.calls.append(("SetInformationJobObject", handle, klass, size))
        return 1

    def AssignProcessToJobObject(self, job, process):
        self.calls.append(("AssignProcessToJobObject", job, process))
        return 0 if self.fail == "assign" else 1


class FakePopen:
    pid = 1234
    _handle = 5150


def test_windows_backend_goes_in_a_kill_on_close_job() -> None:
    kernel32 = RecordingKernel32()
    job = winjob.create_job(platform="win32", kernel32=kernel32)
    assert job is not None and winjob.attach(job, FakePopen())
    assert kernel32.flags == [winjob.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE]
    assert ("AssignProcessToJobObject", 77, 5150) in kernel32.calls
    set_call = next(c for c in kernel32.calls if c[0] == "SetInformationJobObject")
    assert set_call[2] == 9 and set_call[3] == ctypes.sizeof(winjob.JOBOBJECT_EXTENDED_LIMIT_INFORMATION)
    job.release()  # kept on purpose: closing the job must no longer kill it
    assert kernel32.flags[-1] == 0


def test_job_object_failures_degrade_to_the_lifeline_only() -> None:
    assert winjob.create_job(platform="linux") is None
    assert winjob.create_job(platform="win32", kernel32=RecordingKernel32(fail="create")) is None
    job = winjob.create_job(platform="win32", kernel32=RecordingKernel32(fail="assign"))
    assert job is not None and not winjob.attach(job, FakePopen())
    assert not winjob.attach(None, FakePopen())


@pytest.mark.skipif(sys.platform != "win32", reason="a real job object needs Windows")
def test_real_job_object_on_windows() -> None:  # pragma: no cover - runs on Windows CI only
    job = winjob.create_job()
    assert job is not None
