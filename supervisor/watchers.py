"""Watchers: GPU memory, resident Ollama models, backend health. Each on its own thread and interval.

A watcher never takes the supervisor down: every tick is wrapped, a failure is
a reading ("no GPU", "Ollama unreachable"), and a repeated error is logged once
until it changes. This module is the only place the supervisor talks to Ollama.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import threading
import time
from typing import Any
from collections.abc import Callable

import httpx

from supervisor.client import BackendClient, Probe
from supervisor.pressure import GpuReading, ResidentModel, parse_ps

log = logging.getLogger("helix.supervisor.watchers")

MIB = 1024 * 1024


class Periodic:
    """Call `tick()` every `interval_s` in a daemon thread until `stop()`."""

    name = "watcher"

    def __init__(self, interval_s: float) -> None:
        self.interval_s = max(0.01, float(interval_s))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_error = ""

    def tick(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def start(self) -> Periodic:
        self._thread = threading.Thread(target=self._loop, name=f"helix-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
                self._last_error = ""
            except Exception as exc:  # a watcher must survive anything
                text = f"{type(exc).__name__}: {exc}"
                if text != self._last_error:
                    log.warning("%s watcher failed: %s", self.name, text, exc_info=True)
                    self._last_error = text
            self._stop.wait(self.interval_s)

    def stop(self, timeout: float = 3.0) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()


# ── GPU ───────────────────────────────────────────────────────────────────────


class GpuProbe:
    """GPU memory through NVML, else `nvidia-smi`, else "no GPU" (a state, not an error)."""

    SMI_ARGS = ("--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits")

    def __init__(self) -> None:
        self._nvml: Any = None
        self._nvml_ready = False
        self._nvml_missing = False
        self._nvml_reason = ""
        self._smi: str | None | bool = False  # False: not looked up yet

    def _init_nvml(self) -> Any:
        if self._nvml_ready:
            return self._nvml
        if self._nvml_missing:
            return None
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            self._nvml_missing = True
            self._nvml_reason = "nvidia-ml-py is not installed"
            return None
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            # LibraryNotFound / DriverNotLoaded / NoPermission...: no usable driver; don't retry every tick
            self._nvml_missing = True
            self._nvml_reason = f"NVML: {exc}"
            return None
        self._nvml = pynvml
        self._nvml_ready = True
        return pynvml

    def _read_nvml(self, nv: Any) -> GpuReading:
        count = int(nv.nvmlDeviceGetCount())
        devices = []
        used = total = 0
        for i in range(count):
            handle = nv.nvmlDeviceGetHandleByIndex(i)
            mem = nv.nvmlDeviceGetMemoryInfo(handle)
            name = ""
            try:
                raw = nv.nvmlDeviceGetName(handle)
                name = raw.decode() if isinstance(raw, bytes) else str(raw)
            except Exception:  # a name is decoration
                pass
            used += int(mem.used)
            total += int(mem.total)
            devices.append({"index": i, "name": name, "used_bytes": int(mem.used), "total_bytes": int(mem.total)})
        if count == 0:
            return GpuReading(False, source="nvml", error="NVML reports no GPU")
        return GpuReading(True, used, total, "nvml", tuple(devices))

    def _smi_path(self) -> str | None:
        if self._smi is False:
            self._smi = shutil.which("nvidia-smi")
        return self._smi or None  # type: ignore[return-value]  # _smi is str | bool | None; False never reaches here

    def _read_smi(self, exe: str) -> GpuReading:
        kwargs: dict[str, Any] = {}
        if sys.platform == "win32":
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0x08000000)
        out = subprocess.run([exe, *self.SMI_ARGS], capture_output=True, text=True, timeout=5, check=False, **kwargs)
        if out.returncode != 0:
            return GpuReading(False, source="none",
                              error=f"nvidia-smi failed: {(out.stderr or out.stdout).strip()[:200]}")
        return parse_smi(out.stdout)

    def read(self) -> GpuReading:
        nv = self._init_nvml()
        if nv is not None:
            try:
                return self._read_nvml(nv)
            except Exception as exc:  # e.g. GPU lost: report it, try again next tick
                return GpuReading(False, source="nvml", error=f"NVML read failed: {exc}")
        exe = self._smi_path()
        if exe:
            try:
                return self._read_smi(exe)
            except (OSError, subprocess.SubprocessError) as exc:
                return GpuReading(False, source="none", error=f"nvidia-smi failed: {exc}")
        return GpuReading(False, source="none", error=self._nvml_reason or "no NVIDIA GPU found")

    def close(self) -> None:
        if self._nvml_ready:
            self._nvml_ready = False
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass


def parse_smi(text: str) -> GpuReading:
    """`nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader,nounits` (MiB per line)."""
    devices = []
    used = total = 0
    for i, line in enumerate(row for row in text.splitlines() if row.strip()):
        parts = [p.strip() for p in line.split(",")]
        try:
            u, t = int(float(parts[0])) * MIB, int(float(parts[1])) * MIB
        except (IndexError, ValueError):
            continue
        used += u
        total += t
        devices.append({"index": i, "name": "", "used_bytes": u, "total_bytes": t})
    if not devices:
        return GpuReading(False, source="nvidia-smi", error="nvidia-smi listed no GPU")
    return GpuReading(True, used, total, "nvidia-smi", tuple(devices))


class GpuWatcher(Periodic):
    name = "gpu"

    def __init__(self, interval_s: float, on_reading: Callable[[GpuReading], None],
                 probe: GpuProbe | None = None) -> None:
        super().__init__(interval_s)
        self.probe = probe or GpuProbe()
        self.on_reading = on_reading

    def tick(self) -> None:
        self.on_reading(self.probe.read())

    def stop(self, timeout: float = 3.0) -> None:
        super().stop(timeout)
        self.probe.close()


# ── Ollama ────────────────────────────────────────────────────────────────────


class OllamaWatcher(Periodic):
    """Polls GET {url}/api/ps; `unload(model)` is the one write (keep_alive: 0)."""

    name = "ollama"

    def __init__(self, url: str, interval_s: float,
                 on_models: Callable[[list[ResidentModel] | None, str], None], timeout_s: float = 2.0) -> None:
        super().__init__(interval_s)
        self.url = url.rstrip("/")
        self.on_models = on_models
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, trust_env=False)

    def resident(self) -> list[ResidentModel]:
        r = self._http.get("/api/ps")
        r.raise_for_status()
        return parse_ps(r.json())

    def tick(self) -> None:
        try:
            models = self.resident()
        except (httpx.HTTPError, ValueError) as exc:
            self.on_models(None, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            return
        self.on_models(models, "")

    def unload(self, model: str) -> bool:
        """Ask Ollama to drop `model` from memory now."""
        try:
            r = self._http.post("/api/generate", json={"model": model, "keep_alive": 0}, timeout=10.0)
        except httpx.HTTPError as exc:
            log.warning("could not unload %s from Ollama: %s", model, exc)
            return False
        if r.status_code >= 300:
            log.warning("Ollama refused to unload %s: HTTP %s %s", model, r.status_code, r.text[:200])
            return False
        log.info("asked Ollama to unload %s (keep_alive: 0)", model)
        return True

    def stop(self, timeout: float = 3.0) -> None:
        super().stop(timeout)
        self._http.close()


# ── backend health ────────────────────────────────────────────────────────────


class HealthWatcher(Periodic):
    """GET /health every interval while `should_probe()`; GET /stats every `stats_every_s`."""

    name = "health"

    def __init__(self, base_url: str, interval_s: float, timeout_s: float,
                 on_health: Callable[[float, Probe], None], on_stats: Callable[[Probe], None],
                 should_probe: Callable[[], bool], api_key: str = "", stats_every_s: float = 5.0) -> None:
        super().__init__(interval_s)
        self.client = BackendClient(base_url, api_key=api_key, timeout=timeout_s)
        self.on_health = on_health
        self.on_stats = on_stats
        self.should_probe = should_probe
        self.stats_every_s = stats_every_s
        self._next_stats = 0.0
        self._stats_missing_until = 0.0

    def tick(self) -> None:
        if not self.should_probe():
            return
        started = time.monotonic()
        probe = self.client.health()
        self.on_health(started, probe)
        now = time.monotonic()
        if probe.ok and now >= self._next_stats and now >= self._stats_missing_until:
            self._next_stats = now + self.stats_every_s
            stats = self.client.stats()
            if stats.status_code == 404:
                self._stats_missing_until = now + 60.0  # an older backend without /stats: ask rarely
            self.on_stats(stats)

    def stop(self, timeout: float = 3.0) -> None:
        super().stop(timeout)
        self.client.close()
