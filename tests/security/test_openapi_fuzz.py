"""Issue 25's check: schemathesis fuzzes every operation in /openapi.json (the proxy's included, against
a real upstream stub) with `not_a_server_error`, and the count of 500s is 0. Bounded: 10 examples per
operation, about a minute; benchmarks/fuzz_openapi.py runs the same with more (`--max-examples`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_openapi.py"


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("helix_fuzz_openapi", _SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_openapi_fuzz_answers_no_500(tmp_path: Path) -> None:
    fuzz = _fuzz_module()
    if fuzz._schemathesis() is None:
        pytest.skip("schemathesis not installed (pip install -e .[test])")
    result = fuzz.run_fuzz(10, tmp_path, timeout_s=240)
    assert result["requests"] >= 500, result["schemathesis_tail"]  # it really went through the API
    assert result["server_errors_500"] == 0, (result["first_500s"], result["schemathesis_tail"])
    assert result["other_5xx"] == 0, result["by_status"]
