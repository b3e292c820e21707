"""What the watchers report: backend health, gene counts, GPU memory, resident models, and the pressure action.

Why apart: the watcher threads only call back into these methods, which update the shared state
under its lock and publish; the one decision taken here is the pressure action (pause the
ribosome, or unload its model), so that the loop never waits on Ollama.
"""

from __future__ import annotations

import logging
import time

from helix_context import signals

from supervisor import pressure as pressure_rules
from supervisor.client import BackendClient, Probe
from supervisor.pressure import GpuReading, ResidentModel
from supervisor.watchers import GpuWatcher, HealthWatcher, OllamaWatcher
from supervisor.state import SupervisorState

log = logging.getLogger("helix.supervisor")


class SupervisorWatching(SupervisorState):
    """The watcher callbacks and the ribosome switch they (and the tray) use."""

    def _start_watchers(self) -> None:
        w = self.settings.watchers
        health = HealthWatcher(self.settings.base_url, self.cfg.health_interval_s, self.cfg.health_timeout_s,
                               self._on_health, self._on_stats, self._should_probe, api_key=self.settings.api_key)
        gpu = GpuWatcher(w.gpu_interval_s, self._on_gpu, probe=self._gpu_probe)
        self.ollama = OllamaWatcher(w.ollama_url, w.ollama_interval_s, self._on_models,
                                    timeout_s=min(2.0, max(0.2, w.ollama_interval_s)))
        self._watchers = [health, gpu, self.ollama]
        for watcher in self._watchers:
            watcher.start()
    def set_ribosome_paused(self, paused: bool, actor: str = "tray") -> bool:
        """Through the backend when it answers (it owns the flag); the shared flag file otherwise."""
        path = "/admin/ribosome/pause" if paused else "/admin/ribosome/resume"
        probe = BackendClient(self.settings.base_url, api_key=self.settings.api_key,
                              timeout=self.cfg.health_timeout_s)
        try:
            result = probe.post(path)
        finally:
            probe.close()
        if not result.ok:
            log.info("backend did not take the ribosome %s (%s); setting the flag file",
                     "pause" if paused else "resume", result.error)
            signals.set_ribosome_paused(paused, actor=actor, home=self.home)
        with self._lock:
            self.ribosome_paused = signals.ribosome_paused(self.home)
            if not paused:
                self._paused_by_pressure = False
        self.publish()
        return self.ribosome_paused
    def _should_probe(self) -> bool:
        with self._lock:
            return self.status == "running"

    def _on_health(self, started: float, probe: Probe) -> None:
        with self._lock:
            if self.status != "running" or started < self._running_since:
                return  # a probe of an earlier backend
            if probe.ok:
                self._health_failures = 0
                self._health_pid = probe.pid or self._health_pid
                genes = (probe.body.get("genome") or {}).get("genes")
                if isinstance(genes, int) and not self._stats_ok:
                    self.genes = genes  # /health counts genes too; /stats wins when it answers
            else:
                self._health_failures += 1
                if self._health_failures >= self.cfg.hung_after_failures:
                    self._hung = True
                    self._wake.set()
            link = (probe.body.get("genome") or {}).get("connection") if probe.ok else None
            reembed = probe.body.get("reembed") if probe.ok else None
            self._health = {"ok": probe.ok, "status": probe.body.get("status") if probe.ok else None,
                            "consecutive_failures": self._health_failures, "checked_at": time.time(),
                            "error": probe.error,
                            # a team genome's server: ok, or reconnecting (the tray says so)
                            "genome_link": link if isinstance(link, dict) else None,
                            # the background re-embed after a model change, while it runs (the tray shows it)
                            "reembed": reembed if isinstance(reembed, dict) and reembed.get("state") == "running"
                            else None}
        self.publish()

    def _on_stats(self, probe: Probe) -> None:
        genes = probe.body.get("total_genes") if probe.ok else None
        with self._lock:
            self._stats_ok = isinstance(genes, int)
            if isinstance(genes, int):
                self.genes = genes
        self.publish()

    def _on_gpu(self, reading: GpuReading) -> None:
        with self._lock:
            self.gpu = reading
        self.publish()

    def _on_models(self, models: list[ResidentModel] | None, error: str) -> None:
        w = self.settings.watchers
        with self._lock:
            self._ollama = {"url": w.ollama_url, "reachable": models is not None, "error": error,
                            "checked_at": time.time()}
            self.models = list(models or [])
            gpu = self.gpu
            previous = self.pressure
        verdict = pressure_rules.evaluate(self.models, gpu, vram_pressure_pct=w.vram_pressure_pct,
                                          chat_model=w.chat_model, allowed_models=w.allowed_models)
        with self._lock:
            self.pressure = verdict
            if verdict.active and not previous.active:
                self._pressure_since = time.time()
            elif not verdict.active:
                self._pressure_since = None
        if verdict.active and verdict.reasons != previous.reasons:
            log.warning("GPU pressure: %s", "; ".join(verdict.reasons))
            self._act_on_pressure(models or [])
        elif not verdict.active and previous.active:
            log.info("GPU pressure cleared")
            with self._lock:
                resume = self._paused_by_pressure
            if resume:
                self.set_ribosome_paused(False, actor="supervisor (pressure cleared)")
        self.publish()

    def _act_on_pressure(self, models: list[ResidentModel]) -> None:
        action = self.settings.watchers.pressure_action
        done = "notified"
        if action == "pause_ribosome":
            if signals.ribosome_paused(self.home):
                done = "ribosome already paused"
            else:
                self.set_ribosome_paused(True, actor="supervisor (GPU pressure)")
                with self._lock:
                    self._paused_by_pressure = True
                done = "paused the ribosome"
        elif action == "unload_ribosome":
            model = self.settings.ribosome.model
            if not model:
                done = "no ribosome model configured to unload"
            elif not pressure_rules.model_is_resident(model, models):
                done = f"ribosome model {model} is not resident"
            elif self.ollama is not None and self.ollama.unload(model):
                done = f"unloaded {model}"
            else:
                done = f"could not unload {model}"
        with self._lock:
            self._last_action = done
            self._last_action_at = time.time()
        log.info("pressure action (%s): %s", action, done)

    def _refresh_flags(self) -> None:
        paused = signals.ribosome_paused(self.home)
        with self._lock:
            self.ribosome_paused = paused
