"""What a model name tells us (parameter count, mixture-of-experts, family), and the context it needs.

Assembly (small-model layout), the proxy and the ribosome (think suppression, num_ctx) all
decide per request from the model name and token counts alone; no call to the upstream.
``num_ctx_for`` lives here, beside the profiles, so that the proxy and the ribosome both take it
from below instead of from each other.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

# the smallest num_ctx asked of Ollama (its own default is about this)
MIN_NUM_CTX = 2048
# families whose chat templates understand a "/no_think" soft switch
NO_THINK_FAMILIES = ("qwen3", "qwen3.5", "smollm3")
_SIZE_RE = re.compile(r"(?<![a-z0-9])(?:(\d+(?:\.\d+)?)x)?(\d+(?:\.\d+)?)\s*([bm])(?![a-z])", re.I)
_ACTIVE_RE = re.compile(r"-a(\d+(?:\.\d+)?)b\b", re.I)  # qwen3:30b-a3b: 3 B active
_GEMMA_E_RE = re.compile(r"(?<![a-z0-9])e(\d+)b\b", re.I)  # gemma3n:e2b / e4b (effective params, MoE-like)
_KNOWN_CONTEXT = (("llama3.1", 131072), ("llama3.2", 131072), ("qwen2.5", 32768), ("qwen3", 40960),
                  ("gemma3", 131072), ("gemma2", 8192), ("mistral", 32768), ("phi3", 4096), ("smollm2", 8192))


@dataclass(frozen=True)
class ModelProfile:
    name: str
    family: str
    params_b: float | None  # total parameters, billions
    active_params_b: float | None  # for MoE: parameters active per token
    moe: bool
    small: bool  # gets the small-model layout and think suppression
    no_think: bool  # understands "/no_think"
    context_window: int | None  # a known default, if any


@functools.lru_cache(maxsize=512)
def profile(model: str | None, small_max_params_b: float = 3.0) -> ModelProfile:
    """What the name says about a model. Cached: the proxy asks on every chat, for a handful of names
    (the profile is frozen, and the cache is bounded because names come from callers)."""
    name = (model or "").strip()
    low = name.lower()
    base = low.split("/")[-1]
    family = re.split(r"[:@\-]", base, maxsplit=1)[0] if base else ""
    params: float | None = None
    experts = None
    for match in _SIZE_RE.finditer(base):
        experts = float(match.group(1)) if match.group(1) else None
        value = float(match.group(2)) / (1000.0 if match.group(3).lower() == "m" else 1.0)
        params = value * (experts or 1.0)
        break
    active = None
    if m := _ACTIVE_RE.search(base):
        active = float(m.group(1))
    gemma_e = _GEMMA_E_RE.search(base)
    if gemma_e:
        active = float(gemma_e.group(1))
        params = params or active
    moe = bool(active is not None or experts or "moe" in base or "mixtral" in base or gemma_e)
    effective = active if active is not None else params
    small = moe or (effective is not None and effective <= small_max_params_b)
    context = next((ctx for fam, ctx in _KNOWN_CONTEXT if base.startswith(fam)), None)
    return ModelProfile(
        name=name,
        family=family,
        params_b=params,
        active_params_b=active,
        moe=moe,
        small=small,
        no_think=any(base.startswith(f) for f in NO_THINK_FAMILIES),
        context_window=context,
    )


def num_ctx_for(prompt_tokens: int, answer_tokens: int, requested: int | None = None) -> int:
    """Context for Ollama: prompt (+20 % for tokenizer differences) + answer, rounded up to a power of two.

    Powers of two keep the number of distinct values small: Ollama reloads a model
    whenever num_ctx changes, so rounding to fine steps would reload it constantly.
    """
    need = math.ceil(max(0, prompt_tokens) * 1.2) + max(0, answer_tokens) + 64
    size = MIN_NUM_CTX
    while size < need:
        size *= 2
    if requested:
        size = max(size, int(requested))
    return size
