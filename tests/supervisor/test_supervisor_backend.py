"""The supervisor against the REAL backend (`helix_context.server:app` under uvicorn, its own process)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx
import psutil
import pytest

from helix_context import signals
from supervisor import LockHeld
from supervisor.lock import SupervisorLock
from supkit import IS_WINDOWS, fast_settings, health, read_log, serving, wait_until
from tests.conftest import REPO

pytestmark = pytest.mark.timeout(120)


def test_starts_the_backend_and_publishes_the_snapshot(supervisors):
    settings = fast_settings(supervisor={"budget_zone": True},
                             telemetry={"enabled": False, "endpoint": "http://127.0.0.1:14318"})
    sup = supervisors.make(settings)
    snap = serving(sup)
    b = snap["backend"]
    assert b["owned"] and not b["adopted"] and b["restarts"] == 0
    assert health(settings.base_url)["pid"] == b["pid"]

    on_disk = wait_until(lambda: (signals.read_supervisor_status(settings.home) or {}).get("backend", {})
                         .get("status") == "running" and signals.read_supervisor_status(settings.home))
    for key in ("supervisor", "backend", "gpu", "ollama", "resident_models", "pressure", "ribosome_paused",
                "genes", "written_at"):
        assert key in on_disk
    assert on_disk["supervisor"]["pid"] == os.getpid()
    assert on_disk["gpu"]["source"] in ("nvml", "nvidia-smi", "none")
    assert (settings.logs_dir / "backend.log").exists()
    assert isinstance(wait_until(lambda: sup.snapshot()["genes"] is not None and sup.snapshot()), dict)
    assert sup.snapshot()["genes"] == 0  # an empty genome, counted by the backend

    state, stale, _ = signals.read_server_state(settings.home)
    assert state.state == "running" and state.pid == b["pid"] and not stale

    if sys.platform.startswith("linux"):
        env = psutil.Process(b["pid"]).environ()
        assert env["HELIX_BUDGET_ZONE"] == "1"
        assert env["HELIX_OTEL_ENABLED"] == "0"
        assert env["HELIX_OTEL_ENDPOINT"] == "http://127.0.0.1:14318"
        assert env["HELIX_SERVER_PORT"] == str(settings.server.port)


def test_kill_9_is_restarted_and_counted(supervisors):
    sup = supervisors.make(fast_settings())
    first = serving(sup)["backend"]["pid"]
    os.kill(first, signal.SIGKILL if not IS_WINDOWS else signal.SIGTERM)
    snap = serving(sup, not_pid=first)
    b = snap["backend"]
    assert b["restarts"] == 1 and b["crashes"] == 1 and b["planned_restarts"] == 0
    assert "exited unexpectedly" in b["last_error"]
    assert "exited with code" in read_log(sup.settings)


@pytest.mark.skipif(IS_WINDOWS, reason="SIGSTOP does not exist on Windows")
def test_a_hung_backend_is_killed_and_restarted(supervisors):
    sup = supervisors.make(fast_settings())
    first = serving(sup)["backend"]["pid"]
    os.kill(first, signal.SIGSTOP)
    try:
        snap = serving(sup, not_pid=first)
    finally:
        try:
            os.kill(first, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert "hung" in snap["backend"]["last_error"]
    assert snap["backend"]["crashes"] == 1
    wait_until(lambda: not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE)


def test_an_announced_restart_is_not_a_crash(supervisors):
    settings = fast_settings()
    sup = supervisors.make(settings)
    first = serving(sup)["backend"]["pid"]
    r = httpx.post(f"{settings.base_url}/admin/announce_restart",
                   json={"reason": "upgrade", "actor": "test", "expected_downtime_s": 5}, trust_env=False)
    assert r.status_code == 200
    os.kill(first, signal.SIGKILL if not IS_WINDOWS else signal.SIGTERM)  # exits without its clean-stop stamp
    snap = serving(sup, not_pid=first)
    assert snap["backend"]["crashes"] == 0 and snap["backend"]["planned_restarts"] == 1

    if IS_WINDOWS:
        return
    # a clean shutdown overwrites the announcement with "stopped": the supervisor saw it coming
    second = snap["backend"]["pid"]
    httpx.post(f"{settings.base_url}/admin/announce_restart",
               json={"reason": "config change", "actor": "test", "expected_downtime_s": 5}, trust_env=False)
    wait_until(lambda: sup.snapshot()["backend"]["announced_restart"])
    os.kill(second, signal.SIGTERM)
    snap = serving(sup, not_pid=second)
    assert snap["backend"]["crashes"] == 0 and snap["backend"]["planned_restarts"] == 2


def test_restart_request_is_planned_and_serves_again(supervisors):
    sup = supervisors.make(fast_settings())
    first = serving(sup)["backend"]["pid"]
    sup.request_restart("test")
    snap = serving(sup, not_pid=first)
    assert snap["backend"]["planned_restarts"] == 1 and snap["backend"]["crashes"] == 0
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE


def test_a_backend_that_always_crashes_goes_fatal_and_stays_down(supervisors):
    settings = fast_settings()
    crash = [sys.executable, "-c", "import sys; print('boom: the genome is on fire', flush=True); sys.exit(3)"]
    sup = supervisors.make(settings, command=crash)
    snap = sup.wait_for(lambda s: s["backend"]["status"] == "fatal", timeout=30)
    assert snap is not None, sup.snapshot()
    b = snap["backend"]
    limit = settings.supervisor.flap_max_restarts
    assert b["crashes"] == limit + 1
    assert any("boom: the genome is on fire" in line for line in b["last_log_lines"])
    assert "exit code 3" in b["last_error"] and "fix the cause" in b["last_error"]
    on_disk = wait_until(lambda: (signals.read_supervisor_status(settings.home) or {}).get("backend", {})
                         .get("status") == "fatal" and signals.read_supervisor_status(settings.home))
    assert any("boom" in line for line in on_disk["backend"]["last_log_lines"])

    starts = read_log(settings).count("helix-supervisor: starting:")
    assert starts == limit + 1
    time.sleep(1.0)  # no endless loop: nothing more is started while FATAL
    assert read_log(settings).count("helix-supervisor: starting:") == starts
    assert sup.snapshot()["backend"]["status"] == "fatal"

    # the user asks: with a command that works, it serves again
    from supervisor.process import default_command

    sup.command = default_command(settings)
    sup.request_restart("user")
    snap = serving(sup)
    assert snap["backend"]["last_log_lines"] == []


def test_a_second_supervisor_for_the_same_home_is_refused(supervisors):
    settings = fast_settings()
    sup = supervisors.make(settings)
    pid = serving(sup)["backend"]["pid"]
    second = supervisors.make(settings, start=False)
    with pytest.raises(LockHeld) as err:
        second.start()
    assert str(os.getpid()) in str(err.value)
    assert health(settings.base_url)["pid"] == pid
    # a supervisor in another process is refused too
    code = ("import sys; from supervisor.lock import SupervisorLock, LockHeld\n"
            "try:\n    SupervisorLock(sys.argv[1]).acquire()\nexcept LockHeld as e:\n    print(e.pid); sys.exit(7)\n")
    out = subprocess.run([sys.executable, "-c", code, str(settings.home)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 7 and out.stdout.strip() == str(os.getpid())


def test_a_backend_serving_another_homes_genome_is_not_adopted(supervisors, tmp_path):
    """A backend of this HELIX_HOME already serving is adopted (test_an_adopted_backend_that_dies_is_replaced).
    One that serves another HELIX_HOME's genome on the same port was adopted too: its index shown as this one's,
    and a restart from the tray killed that other workspace's backend. Now it is refused, by name, and left alone."""
    settings = fast_settings()
    owner = supervisors.make(settings)
    pid = serving(owner)["backend"]["pid"]
    other_home = fast_settings(port=settings.server.port).replace(home=tmp_path / "other-home")
    refused = supervisors.make(other_home)
    snap = refused.wait_for(lambda s: s["backend"]["status"] == "fatal", timeout=30)
    assert snap is not None, refused.snapshot()
    error = snap["backend"]["last_error"]
    assert str(settings.genome_path) in error and "HELIX_SERVER_PORT" in error, error
    assert read_log(other_home) == ""  # it started nothing
    refused.shutdown()
    assert health(settings.base_url)["pid"] == pid  # the other home's backend serves on, untouched
    owner.shutdown()
    wait_until(lambda: health(settings.base_url) is None)


def test_an_adopted_backend_that_dies_is_replaced(supervisors):
    settings = fast_settings()
    env = {**os.environ, "HELIX_HOME": str(settings.home), "HELIX_SERVER_PORT": str(settings.server.port)}
    outside = subprocess.Popen([sys.executable, "-m", "uvicorn", "helix_context.server:app", "--host", "127.0.0.1",
                                "--port", str(settings.server.port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: health(settings.base_url), timeout=30)
        sup = supervisors.make(settings)
        snap = serving(sup)
        assert snap["backend"]["adopted"] and snap["backend"]["pid"] == outside.pid
        outside.kill()
        outside.wait()
        snap = serving(sup, not_pid=outside.pid)
        assert snap["backend"]["owned"] and not snap["backend"]["adopted"]
    finally:
        if outside.poll() is None:
            outside.kill()


def test_stop_kills_the_whole_process_tree(supervisors, tmp_path):
    settings = fast_settings(supervisor={"stop_timeout_s": 2.0})
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, uvicorn\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
        f"uvicorn.run('helix_context.server:app', host='127.0.0.1', port={settings.server.port})\n"
    )
    sup = supervisors.make(settings, command=[sys.executable, "-c", script])
    root = serving(sup)["backend"]["pid"]
    grandchild = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip()))
    assert psutil.pid_exists(grandchild)
    sup.shutdown()
    assert sup.snapshot()["backend"]["status"] == "stopped"

    def gone(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_until(lambda: gone(root) and gone(grandchild), timeout=10)
    assert health(settings.base_url) is None
    state, _, _ = signals.read_server_state(settings.home)
    assert state.state == "stopped"
    assert not SupervisorLock(settings.home).path.exists()  # released


def test_lock_replaces_a_stale_holder_and_refuses_a_live_one(tmp_path):
    lock = SupervisorLock(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.path.write_text(f'{{"pid": {dead.pid}, "create_time": 1.0}}')
    lock.acquire()  # the holder is gone: stale
    assert lock.held and lock.holder() == os.getpid()
    lock.release()
    assert not lock.path.exists()

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        created = psutil.Process(live.pid).create_time()
        lock.path.write_text(f'{{"pid": {live.pid}, "create_time": {created}}}')
        with pytest.raises(LockHeld):
            SupervisorLock(tmp_path).acquire()
        # the same pid with another start time is a reused pid: stale
        lock.path.write_text(f'{{"pid": {live.pid}, "create_time": {created - 1000}}}')
        other = SupervisorLock(tmp_path)
        other.acquire()
        other.release()
    finally:
        live.kill()
        live.wait()


def test_a_port_another_program_holds_is_one_clear_fatal_not_a_crash_loop(supervisors):
    """Six starts died on "address already in use" and the FATAL line said only "exit code 3"."""
    import socket

    settings = fast_settings()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", settings.server.port))
        holder.listen(1)
        sup = supervisors.make(settings)
        snap = sup.wait_for(lambda s: s["backend"]["status"] == "fatal", timeout=30)
        assert snap is not None, sup.snapshot()
        assert f"port {settings.server.port}" in snap["backend"]["last_error"]
        assert "in use by another program" in snap["backend"]["last_error"]
        assert read_log(settings).count("helix-supervisor: starting:") == 0  # no start was tried


def test_starts_that_keep_failing_slowly_end_in_fatal(supervisors):
    """Each failed start took start_timeout_s, so at most two fell in the flap window and a backend that could
    never serve was restarted forever."""
    settings = fast_settings(supervisor={"start_timeout_s": 1.0, "flap_window_s": 1.5})
    never = [sys.executable, "-c", "import time; time.sleep(600)"]  # alive, never answers /health
    sup = supervisors.make(settings, command=never)
    snap = sup.wait_for(lambda s: s["backend"]["status"] == "fatal", timeout=60)
    assert snap is not None, sup.snapshot()
    assert "starts in a row never served" in snap["backend"]["last_error"], snap["backend"]["last_error"]


CONTENDER = """
import sys, time
from pathlib import Path
from supervisor.lock import LockHeld, SupervisorLock
lock = SupervisorLock(Path(sys.argv[1]))
start = float(sys.argv[2])
while time.time() < start:
    pass
try:
    lock.acquire()
except LockHeld:
    print("held", flush=True)
else:
    print("ACQUIRED", time.time(), flush=True)
    time.sleep(1.5)
    print("RELEASED", time.time(), flush=True)
    lock.release()
"""


def test_contenders_for_a_stale_lock_never_hold_it_together(tmp_path):
    """A tray autostart and a systemd unit starting after a crash: the stale file was unlinked by name, which
    could delete the fresh lock another contender had just written, so two supervisors held one HELIX_HOME
    (5 of 20 trials with four contenders)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for trial in range(6):
        home = tmp_path / f"home{trial}"
        home.mkdir()
        (home / "supervisor.lock").write_text('{"pid": 999999, "create_time": 1.0, "at": 1.0}')  # a crashed owner's
        start = time.time() + 2.0
        procs = [subprocess.Popen([sys.executable, "-c", CONTENDER, str(home), str(start)], env=env, cwd=REPO,
                                  stdout=subprocess.PIPE, text=True) for _ in range(4)]
        spans = []
        for proc in procs:
            out, _ = proc.communicate(timeout=60)
            lines = out.split()
            if "ACQUIRED" in lines:
                spans.append((float(lines[lines.index("ACQUIRED") + 1]), float(lines[lines.index("RELEASED") + 1])))
        assert len(spans) >= 1, trial
        spans.sort()
        assert all(b[0] >= a[1] for a, b in zip(spans, spans[1:])), (trial, spans)  # one holder at a time
