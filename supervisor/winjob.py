"""Windows: the backend lives in a job object that the kernel kills when the supervisor dies.

Why: Windows has no parent-death signal, and a killed supervisor (Task Manager, a crash) runs no
clean-up. A job object created with JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE is closed by the kernel
when its last handle goes, that is when the supervisor process ends however it ends, and every
process in the job (the backend and its parse workers, which inherit the job) is killed then.
The backend's own lifeline thread (helix_context/server/lifeline.py) is the second layer.

`kernel32` is a parameter so the code path runs on Linux in tests with a stand-in that records
the calls; `create_job(platform=...)` is the seam that picks it.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Any

log = logging.getLogger("helix.supervisor")

JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
JOBOBJECT_EXTENDED_LIMIT_INFORMATION_CLASS = 9  # JobObjectExtendedLimitInformation


class IO_COUNTERS(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class JOBOBJECT_BASIC_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    ]


class JOBOBJECT_EXTENDED_LIMIT_INFORMATION(ctypes.Structure):
    _fields_ = [
        ("BasicLimitInformation", JOBOBJECT_BASIC_LIMIT_INFORMATION),
        ("IoInfo", IO_COUNTERS),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    ]


class KillOnCloseJob:
    """One job object per supervisor; its handle is never closed by us while the backend is ours."""

    def __init__(self, kernel32: Any) -> None:
        self.kernel32 = kernel32
        self.handle = kernel32.CreateJobObjectW(None, None)
        if not self.handle:
            raise OSError("CreateJobObjectW failed")
        self._set_flags(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE)

    def _set_flags(self, flags: int) -> None:
        info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION()
        info.BasicLimitInformation.LimitFlags = flags
        ok = self.kernel32.SetInformationJobObject(self.handle, JOBOBJECT_EXTENDED_LIMIT_INFORMATION_CLASS,
                                                   ctypes.byref(info), ctypes.sizeof(info))
        if not ok:
            raise OSError("SetInformationJobObject failed")

    def assign(self, process_handle: int) -> None:
        if not self.kernel32.AssignProcessToJobObject(self.handle, process_handle):
            raise OSError("AssignProcessToJobObject failed")

    def release(self) -> None:
        """The supervisor quits but keeps the backend on purpose: closing the job must not kill it."""
        self._set_flags(0)


def create_job(platform: str = sys.platform, kernel32: Any = None) -> KillOnCloseJob | None:
    """A kill-on-close job on Windows; None elsewhere (POSIX backends watch their parent instead)."""
    if platform != "win32":
        return None
    try:
        if kernel32 is None:
            kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]  # Windows only: the Linux stubs have no ctypes.WinDLL
        return KillOnCloseJob(kernel32)
    except OSError as exc:  # the lifeline thread still stops the backend with us
        log.warning("no kill-on-close job object for the backend: %s", exc)
        return None


def attach(job: KillOnCloseJob | None, popen: Any) -> bool:
    """Put a freshly started backend in the job; False when there is no job or it failed."""
    if job is None:
        return False
    try:
        job.assign(int(popen._handle))  # subprocess.Popen keeps the Windows process handle here
        return True
    except (OSError, AttributeError) as exc:
        log.warning("could not put backend pid %s in the job object: %s", popen.pid, exc)
        return False
