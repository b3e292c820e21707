"""Windows: a job object that ends the backend's whole process tree when the tray ends,
however it ends (Quit, a crash, Task Manager's "End task").

POSIX has no such thing and needs none here: the supervisor kills the tree it
started, and the stop deadline (launcher.stopping) covers a stop that hangs. On
Windows a killed tray runs no Python at all, so the kernel does it: every backend
this tray starts is put in a job with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, whose
only handle the tray holds. The backend's children (parse workers) inherit the
job. The tray itself stays outside it, so a browser it opens lives on.

`kernel32` is a seam: tests on Linux pass an object with the same five calls.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Any

log = logging.getLogger("helix.tray")

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9
PROCESS_SET_QUOTA = 0x0100
PROCESS_TERMINATE = 0x0001


class IO_COUNTERS(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64), ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32), ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t), ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t), ("PriorityClass", ctypes.c_uint32),
                ("SchedulingClass", ctypes.c_uint32)]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION), ("IoInfo", IO_COUNTERS),
                ("ProcessMemoryLimit", ctypes.c_size_t), ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t), ("PeakJobMemoryUsed", ctypes.c_size_t)]


def _kernel32() -> Any:
    return ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]


class KillOnCloseJob:
    """One job object; `assign(pid)` puts a process (and its future children) in it."""

    def __init__(self, kernel32: Any = None) -> None:
        self._k = kernel32 if kernel32 is not None else _kernel32()
        self.handle = self._k.CreateJobObjectW(None, None)
        if not self.handle:
            raise OSError("CreateJobObjectW failed")
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        if not self._k.SetInformationJobObject(self.handle, JOB_OBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                                               ctypes.byref(info), ctypes.sizeof(info)):
            raise OSError("SetInformationJobObject failed")
        self.assigned: list[int] = []

    def assign(self, pid: int) -> bool:
        process = self._k.OpenProcess(PROCESS_SET_QUOTA | PROCESS_TERMINATE, False, pid)
        if not process:
            log.warning("cannot open backend pid %s to tie it to the tray", pid)
            return False
        try:
            ok = bool(self._k.AssignProcessToJobObject(self.handle, process))
        finally:
            self._k.CloseHandle(process)
        if ok:
            self.assigned.append(pid)
        else:
            log.warning("cannot tie backend pid %s to the tray (AssignProcessToJobObject failed)", pid)
        return ok


def contain_backends(supervisor: Any, platform: str = sys.platform, kernel32: Any = None) -> KillOnCloseJob | None:
    """On Windows, put every backend this tray starts into a kill-on-close job; elsewhere nothing."""
    if platform != "win32":
        return None
    try:
        job = KillOnCloseJob(kernel32)
    except (OSError, AttributeError) as exc:
        log.warning("no job object (%s): a killed tray may leave its backend running", exc)
        return None

    def on_snapshot(snap: dict[str, Any]) -> None:
        backend = supervisor.backend
        if backend is None or not backend.owned or backend.pid is None or backend.pid in job.assigned:
            return
        job.assign(backend.pid)

    supervisor.add_listener(on_snapshot)
    on_snapshot(supervisor.snapshot())
    return job
