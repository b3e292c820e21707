"""Token counting and truncation (helix_context.tokens)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helix_context import tokens
from helix_context.tokens import count_tokens, truncate_to_tokens

SAMPLE = "\n".join(
    [
        "def load_config(path: str) -> dict:",
        '    """Read helix.toml and return its tables."""',
        "    with open(path, encoding='utf-8') as fh:",
        "        return tomllib.loads(fh.read())",
        "",
        "The server listens on 127.0.0.1:11437 by default; set HELIX_PORT to change it.",
        "2026-11-20T10:00:14.436Z ERROR payment capture failed request_id=req-5a3f25",
    ]
    * 12
)

needs_cl100k = pytest.mark.skipif(
    tokens.tokenizer_name() != "cl100k_base", reason="cl100k_base files not found offline"
)


@pytest.fixture
def heuristic(monkeypatch):
    """Pretend tiktoken's files are missing."""
    monkeypatch.setattr(tokens, "_encoder", lambda: None)


def test_empty_text_has_no_tokens():
    assert count_tokens("") == 0
    assert truncate_to_tokens("", 10) == ""


@needs_cl100k
def test_counts_match_cl100k():
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base")
    assert count_tokens("hello world") == 2
    assert count_tokens(SAMPLE) == len(enc.encode_ordinary(SAMPLE))


def test_special_token_text_counts_as_text():
    assert count_tokens("<|endoftext|> is just text here") > 3


def test_tiktoken_cache_points_at_bundled_files():
    bundled = tokens.litellm_tokenizers_dir()
    if bundled is None:
        pytest.skip("litellm is not installed")
    assert (bundled / "9b5ad71b2ce5302211f9c61530b329a4922fc6a4").is_file()
    assert tokens.ensure_tiktoken_cache_env()


def test_counting_never_imports_litellm():
    code = (
        "import sys, helix_context.tokens as t\n"
        "n = t.count_tokens('hello world')\n"
        "print(n, t.tokenizer_name(), 'litellm' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    n, name, litellm_loaded = out.stdout.split()
    assert int(n) > 0
    assert litellm_loaded == "False"


@needs_cl100k
def test_heuristic_is_close_to_the_real_count(monkeypatch):
    real = count_tokens(SAMPLE)
    monkeypatch.setattr(tokens, "_encoder", lambda: None)
    guess = count_tokens(SAMPLE)
    assert 0.9 * real <= guess <= 1.3 * real  # errs on the high side


@pytest.mark.parametrize("limit", [1, 7, 40, 150, 400])
def test_truncate_fits_and_cuts_at_a_line(limit):
    out = truncate_to_tokens(SAMPLE, limit)
    assert count_tokens(out) <= limit
    assert SAMPLE.startswith(out)
    if "\n" in out:  # a cut with a whole line available ends at a line boundary
        assert SAMPLE[len(out)] == "\n"


@pytest.mark.parametrize("limit", [1, 7, 40, 150])
def test_truncate_heuristic_fits_and_cuts_at_a_line(heuristic, limit):
    out = truncate_to_tokens(SAMPLE, limit)
    assert count_tokens(out) <= limit
    assert SAMPLE.startswith(out)
    if "\n" in out:
        assert SAMPLE[len(out)] == "\n"


def test_truncate_returns_short_text_unchanged():
    assert truncate_to_tokens("a short line", 50) == "a short line"
    assert truncate_to_tokens(SAMPLE, 0) == ""


def test_truncate_cuts_inside_a_single_long_line():
    line = "word " * 500
    out = truncate_to_tokens(line, 20)
    assert 0 < count_tokens(out) <= 20
    assert line.startswith(out)


def test_truncate_keeps_multibyte_text_a_prefix():
    text = "héllo wörld — ünïcödé 日本語のテキスト " * 40
    for limit in (3, 11, 25):
        out = truncate_to_tokens(text, limit)
        assert text.startswith(out)
        assert count_tokens(out) <= limit


def test_kept_counts_are_the_counts_and_follow_the_counter(monkeypatch):
    text = "<expressed_context>\n" + SAMPLE
    assert tokens.count_tokens_kept(text) == count_tokens(text) == tokens.count_tokens_kept(text)
    monkeypatch.setattr(tokens, "_encoder", lambda: None)  # the counter changes: the remembered count is not its
    assert tokens.count_tokens_kept(text) == tokens._heuristic_count(text)


def _endings() -> list[str]:
    """Texts ending every way a gene can: the project's own source cut at odd lines, and edge cases."""
    texts = ["x )", "a  )", "it's", "x's')", "'''", "é", "a\u0301", "１２３)", "foo_", "x = {'a': 1}", "…", "🙂",
             "a 🙂", "\t)", "x\u00a0)", "1234", "$$$", " ;", "中文。", "->", "x ->", "\\", "#", "  ...", "a\n)"]
    root = Path(tokens.__file__).parent
    for path in sorted(root.rglob("*.py"))[:60]:
        lines = path.read_text(encoding="utf-8").splitlines()
        texts += ["\n".join(lines[k:k + 1 + k % 23]).rstrip() for k in range(0, len(lines), 5)]
    return [t for t in texts if t]


@pytest.mark.parametrize("counter", ["cl100k", "heuristic"])
def test_a_line_break_is_counted_from_the_texts_own_count(counter, monkeypatch):
    """count_with_line_break must equal counting text + "\\n" again: windows sum their parts with it."""
    if counter == "heuristic":
        monkeypatch.setattr(tokens, "_encoder", lambda: None)
    elif tokens.tokenizer_name() != "cl100k_base":
        pytest.skip("cl100k_base files not found offline")
    texts = _endings()
    assert len(texts) > 1000
    wrong = [t[-20:] for t in texts if tokens.count_with_line_break(t, count_tokens(t)) != count_tokens(t + "\n")]
    assert wrong == []
    assert tokens.count_with_line_break("x  ", count_tokens("x  ")) == count_tokens("x  \n")  # not stripped
