"""Watchers: GPU memory (NVML stand-in, nvidia-smi fallback, no GPU) and Ollama /api/ps driving
the dual-load pressure rules and each pressure action, through a real HTTP stand-in server."""

from __future__ import annotations

import os
import stat
import sys

import httpx
import pynvml
import pytest

from helix_context import signals
from supervisor.watchers import GpuProbe, OllamaWatcher, parse_smi
from supkit import fast_settings, ps_model, serving, wait_until, fake_nvml

pytestmark = pytest.mark.timeout(120)
GIB = 1024 ** 3


def _no_nvml(monkeypatch):
    def init():
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", init)


def test_gpu_probe_reads_nvml(monkeypatch):
    calls = fake_nvml(monkeypatch, [(6 * GIB, 24 * GIB), (2 * GIB, 8 * GIB)])
    probe = GpuProbe()
    reading = probe.read()
    assert reading.available and reading.source == "nvml"
    assert reading.used_bytes == 8 * GIB and reading.total_bytes == 32 * GIB
    assert [d["name"] for d in reading.devices] == ["Fake GPU 0", "Fake GPU 1"]
    probe.read()
    assert calls["init"] == 1  # initialised once, not per reading
    probe.close()
    assert calls["shutdown"] == 1


def test_no_driver_and_no_nvidia_smi_is_a_state_not_an_error(monkeypatch):
    _no_nvml(monkeypatch)
    monkeypatch.setattr("supervisor.watchers.shutil.which", lambda name: None)
    reading = GpuProbe().read()
    assert not reading.available and reading.source == "none"
    assert "NVML" in reading.error
    assert reading.as_dict()["used_pct"] is None


@pytest.mark.skipif(sys.platform == "win32", reason="fake nvidia-smi is a shell script")
def test_nvidia_smi_is_the_fallback_without_the_library(monkeypatch, tmp_path):
    _no_nvml(monkeypatch)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$1\" = --query-gpu=memory.used,memory.total ] || exit 9\n"
                   "echo '1024, 8192'\necho '3072, 8192'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    reading = GpuProbe().read()
    assert reading.available and reading.source == "nvidia-smi"
    assert reading.used_bytes == 4096 * 1024 * 1024 and reading.total_bytes == 16384 * 1024 * 1024
    assert parse_smi("garbage\n").available is False


def test_ollama_watcher_reads_api_ps_and_unloads(ollama_stub):
    ollama_stub.models = [ps_model("llama3:8b", 5 * GIB), ps_model("qwen2:0.5b", GIB)]
    seen = []
    w = OllamaWatcher(ollama_stub.url, 10, lambda models, err: seen.append((models, err)))
    w.tick()
    models, err = seen[-1]
    assert err == "" and [m.name for m in models] == ["llama3:8b", "qwen2:0.5b"]
    assert w.unload("qwen2:0.5b")
    assert ollama_stub.generate_requests == [{"model": "qwen2:0.5b", "keep_alive": 0}]
    w.stop()
    down = OllamaWatcher("http://127.0.0.1:9", 10, lambda models, err: seen.append((models, err)), timeout_s=0.5)
    down.tick()
    assert seen[-1][0] is None and seen[-1][1]
    down.stop()


def test_notify_reports_an_uninvited_model_beside_the_chat_model(supervisors, ollama_stub, monkeypatch):
    fake_nvml(monkeypatch, [(10 * GIB, 24 * GIB)])
    ollama_stub.models = [ps_model("llama3:latest", 5 * GIB), ps_model("phi3:mini", 2 * GIB)]
    settings = fast_settings(watchers={"ollama_url": ollama_stub.url, "chat_model": "llama3",
                                       "pressure_action": "notify"})
    sup = supervisors.make(settings)
    snap = sup.wait_for(lambda s: s["pressure"]["active"], timeout=20)
    assert snap is not None
    assert snap["pressure"]["offenders"] == ["phi3:mini"]
    assert "phi3:mini" in snap["pressure"]["reasons"][0]
    assert [m["name"] for m in snap["resident_models"]] == ["llama3:latest", "phi3:mini"]
    assert snap["gpu"]["available"] and snap["gpu"]["used_bytes"] == 10 * GIB
    wait_until(lambda: sup.snapshot()["pressure"]["last_action"] == "notified")
    assert ollama_stub.generate_requests == []  # notify touches nothing
    on_disk = wait_until(lambda: (signals.read_supervisor_status(settings.home) or {}).get("pressure", {})
                         .get("active") and signals.read_supervisor_status(settings.home))
    assert on_disk["pressure"]["reasons"]
    # phi3 leaves: pressure clears
    ollama_stub.models = ollama_stub.models[:1]
    assert sup.wait_for(lambda s: not s["pressure"]["active"], timeout=20) is not None


def test_vram_over_threshold_with_two_models_pauses_the_ribosome_on_the_real_backend(
        supervisors, ollama_stub, monkeypatch):
    fake_nvml(monkeypatch, [(int(23.5 * GIB), 24 * GIB)])  # 98 %
    ollama_stub.models = [ps_model("llama3:latest", 5 * GIB), ps_model("nomic-embed-text:latest", GIB)]
    settings = fast_settings(watchers={"ollama_url": ollama_stub.url, "chat_model": "llama3",
                                       "allowed_models": ("nomic-embed-text",), "vram_pressure_pct": 90.0,
                                       "pressure_action": "pause_ribosome"})
    sup = supervisors.make(settings)
    serving(sup)
    snap = sup.wait_for(lambda s: s["pressure"]["active"] and s["ribosome_paused"], timeout=20)
    assert snap is not None, sup.snapshot()["pressure"]
    assert "98%" in snap["pressure"]["reasons"][0] and snap["pressure"]["offenders"] == []
    assert snap["pressure"]["last_action"] == "paused the ribosome"
    r = httpx.get(f"{settings.base_url}/admin/ribosome", trust_env=False)
    assert r.json()["paused"] is True
    # the embedder goes away: pressure clears and the pause the supervisor made is lifted
    ollama_stub.models = ollama_stub.models[:1]
    assert sup.wait_for(lambda s: not s["pressure"]["active"] and not s["ribosome_paused"], timeout=20)
    assert httpx.get(f"{settings.base_url}/admin/ribosome", trust_env=False).json()["paused"] is False


def test_unload_ribosome_asks_ollama_to_drop_the_ribosome_model(supervisors, ollama_stub, monkeypatch):
    fake_nvml(monkeypatch, [(4 * GIB, 24 * GIB)])
    ollama_stub.models = [ps_model("llama3:latest", 5 * GIB), ps_model("qwen2:0.5b", GIB)]
    settings = fast_settings(watchers={"ollama_url": ollama_stub.url, "chat_model": "llama3",
                                       "pressure_action": "unload_ribosome"},
                             ribosome={"model": "qwen2:0.5b"})
    sup = supervisors.make(settings)
    wait_until(lambda: ollama_stub.unloads == ["qwen2:0.5b"])
    assert ollama_stub.generate_requests[0] == {"model": "qwen2:0.5b", "keep_alive": 0}
    snap = sup.wait_for(lambda s: s["pressure"]["last_action"] == "unloaded qwen2:0.5b", timeout=20)
    assert snap is not None
    # the stub dropped it from /api/ps: pressure clears, no second unload
    assert sup.wait_for(lambda s: not s["pressure"]["active"], timeout=20) is not None
    assert ollama_stub.unloads == ["qwen2:0.5b"]
