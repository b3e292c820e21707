"""key=value facts: settings, constants and flags — never docstring prose or call results."""

from __future__ import annotations

import sysconfig
import textwrap
from pathlib import Path

import pytest

from helix_context.ingest.chunk import chunk_text
from helix_context.ingest.facts import MAX_FACTS, extract_facts
from helix_context.models import CONTENT_TYPES


def facts(text: str, ct: str, lang: str | None) -> dict[str, str]:
    pairs = extract_facts(text, ct, lang)
    keys = [k.casefold() for k, _ in pairs]
    assert len(keys) == len(set(keys)), "keys are unique"
    return dict(pairs)


PY = textwrap.dedent('''\
    """Server module.

    port = 8080 is what an old doc said
    TIMEOUT = 99
    """
    import os

    PORT = 11437
    MAX_RETRIES: int = 5
    NAME = 'helix'
    RATIO = -0.25
    VERSION = (1, 2, 3)
    CLIENT = make_client(PORT)
    PATH = os.path.join("a", "b")
    __version__ = "0.1.0"
    __all__ = ["main"]


    class Settings:
        """Settings.

        host = evil.example.com
        """
        host = "127.0.0.1"
        debug = False

        def run(self):
            """Run.

            retries = 1000
            """
            local_value = 42
            return local_value


    def main():
        counter = 0
        return counter


    if os.name == "nt":
        WINDOWS_ONLY = 1
    ''')


def test_python_constants_without_docstring_prose_or_calls() -> None:
    f = facts(PY, "code", "python")
    assert f["PORT"] == "11437"
    assert f["MAX_RETRIES"] == "5"
    assert f["NAME"] == "helix"
    assert f["RATIO"] == "-0.25"
    assert f["VERSION"] == "(1, 2, 3)"
    assert f["__version__"] == "0.1.0"
    assert f["host"] == "127.0.0.1" and f["debug"] == "False"
    # docstring prose, call expressions, locals and conditional blocks are not facts
    for key in ("port", "TIMEOUT", "CLIENT", "PATH", "__all__", "retries", "local_value", "counter", "WINDOWS_ONLY"):
        assert key not in f, key
    assert "evil.example.com" not in f.values()


def test_a_string_continued_with_a_backslash_hides_its_next_line() -> None:
    text = 'HELP = "usage: \\\nTIMEOUT = 30  # see the docs"\nREAL = 4\n'
    compile(text, "<test>", "exec")  # valid Python: TIMEOUT = 30 is inside the HELP string
    assert facts(text, "code", "python") == {"REAL": "4"}


def test_python_facts_per_chunk_match_the_whole_file() -> None:
    whole = facts(PY, "code", "python")
    per_chunk: dict[str, str] = {}
    for c in chunk_text(PY, "code", "python", max_chars=300):
        for k, v in extract_facts(c.content, c.content_type, c.language):
            per_chunk.setdefault(k, v)
    assert per_chunk == whole


def test_port_fact_from_each_kind_of_source() -> None:
    sources = [
        ("[server]\nport = 11437\n", "config", "toml"),
        ("port = 11437\n", "config", "ini"),
        ("port: 11437\n", "config", "yaml"),
        ("PORT=11437\n", "config", "dotenv"),
        ("PORT = 11437\n", "code", "python"),
        ("const port = 11437;\n", "code", "javascript"),
        ("export const PORT: number = 11437;\n", "code", "typescript"),
        ("const Port = 11437\n", "code", "go"),
        ("pub const PORT: u16 = 11437;\n", "code", "rust"),
        ("#define PORT 11437\n", "code", "c"),
        ("public class A {\n    public static final int PORT = 11437;\n}\n", "code", "java"),
        ("const val PORT = 11437\n", "code", "kotlin"),
        ("PORT=11437\n", "code", "bash"),
        ("helix serve --port 11437\n", "code", "bash"),
        ("Start it with `helix serve --port=11437`.\n", "markdown", "markdown"),
        ("Port: 11437\n", "markdown", "markdown"),
        ("- **Port**: 11437\n", "markdown", "markdown"),
        ("run: helix serve --port 11437 --verbose\n", "text", None),
        ("2024-01-01 12:00:00 INFO listening port=11437\n", "log", None),
        ('{\n  "port": 11437\n}\n', "json", "json"),
        ("ENV PORT=11437\n", "config", "dockerfile"),
    ]
    for text, ct, lang in sources:
        f = {k.rsplit(".", 1)[-1].casefold(): v for k, v in extract_facts(text, ct, lang)}
        assert f.get("port") == "11437", (text, ct, lang, f)


def test_toml_sections_qualify_keys_and_skip_multiline_values() -> None:
    text = textwrap.dedent('''\
        title = "helix"   # inline comment
        [server]
        port = 11437
        host = '127.0.0.1'
        hosts = ["a", "b"]
        doc = """
        multi
        """
        [ingest.limits]
        max_file_bytes = 2_000_000
        enabled = true
        ''')
    f = facts(text, "config", "toml")
    assert f == {"title": "helix", "server.port": "11437", "server.host": "127.0.0.1",
                 "server.hosts": '["a", "b"]', "ingest.limits.max_file_bytes": "2_000_000",
                 "ingest.limits.enabled": "true"}


def test_yaml_nested_keys() -> None:
    text = textwrap.dedent('''\
        server:
          port: 11437
          host: "localhost"  # comment
          tls:
            enabled: false
        description: |
          key: not a fact
        items:
          - name: first
        ''')
    f = facts(text, "config", "yaml")
    assert f["server.port"] == "11437"
    assert f["server.host"] == "localhost"
    assert f["server.tls.enabled"] == "false"
    assert "description.key" not in f and "key" not in f


def test_markdown_key_value_lines_but_not_sentences() -> None:
    text = textwrap.dedent('''\
        # Release

        Version: 1.4.2
        **Status**: stable
        Note: this is a remark, not a setting.
        The reason we changed the defaults was simple: people kept tripping over the old port number in demos.

        ```toml
        max_chunk_chars = 2400
        ```
        ''')
    f = facts(text, "markdown", "markdown")
    assert f["Version"] == "1.4.2"
    assert f["Status"] == "stable"
    assert f["max_chunk_chars"] == "2400"
    assert "Note" not in f
    assert not any(k.startswith("The reason") for k in f)


def test_cli_flags() -> None:
    f = facts("helix serve --port 11437 --host=0.0.0.0 --verbose notes.txt --config ./helix.toml\n", "text", None)
    assert f["port"] == "11437"
    assert f["host"] == "0.0.0.0"
    assert f["config"] == "./helix.toml"
    assert "verbose" not in f


def test_values_are_short_unquoted_literals() -> None:
    long_value = "x" * 500
    f = facts(f'SHORT = "ok"\nLONG = "{long_value}"\nQUOTED = \'single\'\n', "code", "python")
    assert f == {"SHORT": "ok", "QUOTED": "single"}


def test_first_value_wins_and_count_is_capped() -> None:
    assert facts("A = 1\nA = 2\n", "code", "python") == {"A": "1"}
    many = "".join(f"KEY_{i} = {i}\n" for i in range(500))
    assert len(extract_facts(many, "code", "python")) == MAX_FACTS


@pytest.mark.parametrize("ct", CONTENT_TYPES)
def test_never_raises(ct: str) -> None:
    for text in ("", "   ", "\x00=\x00", "=" * 10_000, "a" * 100_000, "--" * 5000, "k: " * 3000,
                 '"""' * 33, "x = '''\n" * 50, "[" * 1000 + "\nport = 1\n"):
        for lang in (None, "python", "toml", "yaml", "javascript", "go", "bash", "dotenv", "makefile"):
            extract_facts(text, ct, lang)


def test_stdlib_facts_are_sane() -> None:
    """On real code: plenty of facts, none longer than the caps, none from docstrings."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted((stdlib / "http").glob("*.py")) + sorted((stdlib / "logging").glob("*.py"))
    if not files:
        pytest.skip("no stdlib sources")
    total = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        for k, v in extract_facts(text, "code", "python"):
            total += 1
            assert 0 < len(k) <= 64 and 0 < len(v) <= 120 and "\n" not in v
            assert " " not in k
    assert total > 20
