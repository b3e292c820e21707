"""The dual-load rule: is the GPU being fought over? Pure: plain data in, plain data out.

Two situations count as pressure:

1. more than one model is resident (in Ollama's /api/ps) while the GPU's memory
   use is over `vram_pressure_pct` — two models are squeezing each other;
2. the chat model is resident and another model that is neither the chat model
   nor in `allowed_models` is resident beside it — something uninvited is
   taking memory from the model the user is talking to.

What to do about it (`pressure_action`) is decided here too, but carried out by
the Ollama watcher: notify only, pause the ribosome, or unload the ribosome's
model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence
from typing import Any

ACTIONS = ("notify", "pause_ribosome", "unload_ribosome")


@dataclass(frozen=True)
class ResidentModel:
    name: str
    model: str = ""
    size: int = 0
    size_vram: int = 0
    expires_at: str = ""
    context_length: int | None = None

    def as_dict(self) -> dict:
        return {"name": self.name, "model": self.model, "size": self.size, "size_vram": self.size_vram,
                "expires_at": self.expires_at, "context_length": self.context_length}


@dataclass(frozen=True)
class GpuReading:
    available: bool
    used_bytes: int | None = None
    total_bytes: int | None = None
    source: str = "none"  # nvml | nvidia-smi | none
    devices: tuple[dict, ...] = ()
    error: str = ""

    @property
    def used_pct(self) -> float | None:
        if not self.available or not self.total_bytes or self.used_bytes is None:
            return None
        return 100.0 * self.used_bytes / self.total_bytes

    def as_dict(self) -> dict:
        pct = self.used_pct
        return {"available": self.available, "used_bytes": self.used_bytes, "total_bytes": self.total_bytes,
                "used_pct": None if pct is None else round(pct, 1), "source": self.source,
                "devices": list(self.devices), "error": self.error}


@dataclass(frozen=True)
class Pressure:
    active: bool
    reasons: tuple[str, ...] = ()
    offenders: tuple[str, ...] = field(default=())  # models that are not supposed to be there


NO_PRESSURE = Pressure(False)


def normalize_model_name(name: str) -> str:
    """Ollama reports `llama3:latest` for a model configured as `llama3`."""
    name = name.strip().lower()
    if name and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name


def _names(model: ResidentModel) -> set[str]:
    return {normalize_model_name(n) for n in (model.name, model.model) if n}


def evaluate(models: Sequence[ResidentModel], gpu: GpuReading | None, *, vram_pressure_pct: float,
             chat_model: str = "", allowed_models: Iterable[str] = ()) -> Pressure:
    reasons: list[str] = []
    offenders: list[str] = []

    pct = gpu.used_pct if gpu is not None else None
    if len(models) > 1 and pct is not None and pct > vram_pressure_pct:
        names = ", ".join(m.name for m in models)
        reasons.append(f"{len(models)} models resident ({names}) with GPU memory at {pct:.0f}% "
                       f"(over {vram_pressure_pct:g}%)")

    chat = normalize_model_name(chat_model) if chat_model else ""
    if chat:
        chat_resident = any(chat in _names(m) for m in models)
        if chat_resident:
            allowed = {normalize_model_name(a) for a in allowed_models if a} | {chat}
            for m in models:
                if not (_names(m) & allowed):
                    offenders.append(m.name)
            if offenders:
                reasons.append(f"{', '.join(offenders)} resident beside the chat model {chat_model} "
                               f"(not in allowed_models)")

    return Pressure(bool(reasons), tuple(reasons), tuple(offenders))


def model_is_resident(model: str, models: Sequence[ResidentModel]) -> bool:
    target = normalize_model_name(model)
    return any(target in _names(m) for m in models)


def parse_ps(payload: object) -> list[ResidentModel]:
    """Ollama GET /api/ps → resident models. Unknown or missing fields are tolerated."""
    out: list[ResidentModel] = []
    models = payload.get("models") if isinstance(payload, dict) else None
    if not isinstance(models, list):  # `{"models": 5}` from something that is not Ollama: no models
        return out
    for raw in models:
        if not isinstance(raw, dict):
            continue
        name = str(raw.get("name") or raw.get("model") or "")
        if not name:
            continue

        def _int(v: Any) -> int:  # whatever the JSON held: a number, a numeric string, or junk
            try:
                return int(v)
            except (TypeError, ValueError):
                return 0

        ctx = raw.get("context_length")
        out.append(ResidentModel(
            name=name,
            model=str(raw.get("model") or name),
            size=_int(raw.get("size")),
            size_vram=_int(raw.get("size_vram")),
            expires_at=str(raw.get("expires_at") or ""),
            context_length=_int(ctx) if ctx is not None else None,
        ))
    return out
