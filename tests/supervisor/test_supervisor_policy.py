"""Restart policy and dual-load pressure rules: pure functions, no processes."""

from __future__ import annotations

from helix_context.config import SupervisorSettings
from supervisor.policy import RestartPolicy
from supervisor.pressure import GpuReading, ResidentModel, evaluate, model_is_resident, normalize_model_name, parse_ps
from supkit import ps_model

GIB = 1024 ** 3


def test_first_failure_restarts_at_once_then_backs_off_exponentially():
    p = RestartPolicy(SupervisorSettings(backoff_initial_s=0.25, backoff_max_s=2.0, flap_window_s=60, flap_max_restarts=10))
    delays = [p.record_failure(float(i)).delay_s for i in range(7)]
    assert delays == [0.0, 0.25, 0.5, 1.0, 2.0, 2.0, 2.0]


def test_more_failures_than_allowed_in_the_window_is_fatal():
    p = RestartPolicy(SupervisorSettings(backoff_initial_s=0.1, backoff_max_s=1, flap_window_s=60, flap_max_restarts=3))
    decisions = [p.record_failure(t) for t in (0.0, 1.0, 2.0, 3.0)]
    assert [d.fatal for d in decisions] == [False, False, False, True]
    assert "4 failures" in decisions[-1].reason


def test_failures_outside_the_window_are_forgotten():
    p = RestartPolicy(SupervisorSettings(backoff_initial_s=0.1, backoff_max_s=1, flap_window_s=10, flap_max_restarts=2))
    assert not p.record_failure(0.0).fatal
    assert not p.record_failure(1.0).fatal
    d = p.record_failure(30.0)  # the first two have expired
    assert not d.fatal and d.failures_in_window == 1 and d.delay_s == 0.0


def test_reset_clears_the_flap_count():
    p = RestartPolicy(SupervisorSettings(flap_window_s=60, flap_max_restarts=1))
    p.record_failure(0.0)
    assert p.record_failure(1.0).fatal
    p.reset()
    assert not p.record_failure(2.0).fatal


def test_parse_ps_reads_the_real_wire_format():
    models = parse_ps({"models": [ps_model("llama3:8b", 5 * GIB, 6 * GIB), {"bogus": 1}, "x"]})
    assert len(models) == 1
    m = models[0]
    assert (m.name, m.size, m.size_vram, m.context_length) == ("llama3:8b", 6 * GIB, 5 * GIB, 4096)
    assert parse_ps({"models": None}) == [] and parse_ps([]) == []
    assert parse_ps({"models": 5}) == [] and parse_ps({"models": "x"}) == []  # not Ollama: no traceback


def test_model_names_match_with_and_without_tag():
    assert normalize_model_name("Llama3") == "llama3:latest"
    assert normalize_model_name("llama3:8b") == "llama3:8b"
    assert normalize_model_name("registry.local/ns/qwen2") == "registry.local/ns/qwen2:latest"
    assert model_is_resident("llama3", [ResidentModel("llama3:latest")])


def _models(*names: str) -> list[ResidentModel]:
    return [ResidentModel(n, n, 4 * GIB, 4 * GIB) for n in names]


def test_two_models_over_the_vram_threshold_is_pressure():
    hot = GpuReading(True, int(22.8 * GIB), 24 * GIB, "nvml")
    cool = GpuReading(True, 10 * GIB, 24 * GIB, "nvml")
    assert evaluate(_models("a:1", "b:1"), hot, vram_pressure_pct=90).active
    assert not evaluate(_models("a:1", "b:1"), cool, vram_pressure_pct=90).active
    assert not evaluate(_models("a:1"), hot, vram_pressure_pct=90).active  # one model: its own business
    assert not evaluate(_models("a:1", "b:1"), GpuReading(False), vram_pressure_pct=90).active  # no GPU


def test_an_uninvited_model_beside_the_chat_model_is_pressure():
    v = evaluate(_models("llama3:latest", "phi3:mini"), None, vram_pressure_pct=90, chat_model="llama3")
    assert v.active and v.offenders == ("phi3:mini",) and "phi3:mini" in v.reasons[0]
    allowed = evaluate(_models("llama3:latest", "phi3:mini"), None, vram_pressure_pct=90, chat_model="llama3",
                       allowed_models=["phi3:mini"])
    assert not allowed.active
    # the chat model is not resident: nothing to protect
    assert not evaluate(_models("phi3:mini", "qwen2:0.5b"), None, vram_pressure_pct=90, chat_model="llama3").active
