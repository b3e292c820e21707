"""Content-type / language detection and the binary check."""

from __future__ import annotations

import os

import pytest

from helix_context.ingest.detect import decode_text, detect_type, is_binary
from helix_context.models import CONTENT_TYPES


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/app/main.py", ("code", "python")),
        ("web/index.js", ("code", "javascript")),
        ("web/app.ts", ("code", "typescript")),
        ("web/App.tsx", ("code", "tsx")),
        ("cmd/server/main.go", ("code", "go")),
        ("src/lib.rs", ("code", "rust")),
        ("src/Main.java", ("code", "java")),
        ("src/x.c", ("code", "c")),
        ("include/x.h", ("code", "c")),
        ("src/x.cpp", ("code", "cpp")),
        ("src/Program.cs", ("code", "csharp")),
        ("lib/x.rb", ("code", "ruby")),
        ("www/index.php", ("code", "php")),
        ("scripts/deploy.sh", ("code", "bash")),
        ("app/Main.kt", ("code", "kotlin")),
        ("App/View.swift", ("code", "swift")),
        ("README.md", ("markdown", "markdown")),
        ("docs/index.rst", ("markdown", "rst")),
        ("notes.txt", ("text", None)),
        ("var/log/app.log", ("log", None)),
        ("var/log/app.log.1", ("log", None)),
        ("helix.toml", ("config", "toml")),
        ("setup.cfg", ("config", "ini")),
        ("settings.ini", ("config", "ini")),
        ("compose.yaml", ("config", "yaml")),
        (".github/workflows/ci.yml", ("config", "yaml")),
        ("project/.env", ("config", "dotenv")),
        ("project/.env.local", ("config", "dotenv")),
        ("Dockerfile", ("config", "dockerfile")),
        ("Makefile", ("config", "makefile")),
        ("package.json", ("json", "json")),
        ("events.jsonl", ("json", "jsonl")),
        ("fix.diff", ("diff", "diff")),
        ("fix.patch", ("diff", "diff")),
        ("C:\\Users\\me\\proj\\tool.py", ("code", "python")),
        ("requirements.txt", ("config", "requirements")),
        ("LICENSE", ("text", None)),
    ],
)
def test_by_name(path: str, expected: tuple[str, str | None]) -> None:
    assert detect_type(path, "") == expected


def test_name_wins_over_content() -> None:
    assert detect_type("notes.md", "def foo():\n    pass\n") == ("markdown", "markdown")


@pytest.mark.parametrize(
    ("text", "content_type"),
    [
        ("diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n", "diff"),
        ("--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n", "diff"),
        ("2024-05-01 12:00:01 INFO start\n2024-05-01 12:00:02 ERROR boom\n2024-05-01 12:00:03 INFO ok\n", "log"),
        ("[2024-05-01T12:00:01Z] started\n[2024-05-01T12:00:02Z] stopped\n", "log"),
        ('{\n  "name": "x",\n  "version": "1.0.0"\n}\n', "json"),
        ('{"a": 1}\n{"a": 2}\n{"a": 3}\n', "json"),
        ("# Title\n\nSome prose with a [link](http://x.y).\n\n## More\n", "markdown"),
        ("[server]\nport = 11437\nhost = \"127.0.0.1\"\n", "config"),
        ("import os\n\ndef main():\n    print(os.getcwd())\n", "code"),
        ("#!/usr/bin/env python3\nprint('hi')\n", "code"),
        ("#!/bin/sh\necho hi\n", "code"),
        ("Dear team,\n\nthe meeting moved to Friday. Please bring notes.\n", "text"),
        ("", "text"),
    ],
)
def test_sniffing_without_a_known_name(text: str, content_type: str) -> None:
    for path in (None, "UNKNOWNFILE"):
        ct, _lang = detect_type(path, text)
        assert ct == content_type


def test_sniffed_languages() -> None:
    assert detect_type(None, "#!/usr/bin/env python3\nprint(1)\n") == ("code", "python")
    assert detect_type(None, "#!/bin/bash\necho 1\n") == ("code", "bash")
    assert detect_type(None, '{"a": 1}\n{"a": 2}\n')[1] == "jsonl"


def test_detect_never_raises_and_returns_known_types() -> None:
    weird = ["\x00\x01\x02", "\ufeff{", "{" * 10_000, "[", "\r\n\r\n", "a" * 100_000, "@@ -x @@", "---\n+++"]
    for text in weird:
        for path in (None, "", "x", ".", "/", "a.", ".hidden", "dir/"):
            ct, _ = detect_type(path, text)
            assert ct in CONTENT_TYPES


def test_is_binary() -> None:
    assert is_binary(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert is_binary(os.urandom(4096))
    assert is_binary(b"text then a NUL \x00 byte")
    assert not is_binary(b"")
    assert not is_binary(b"plain ascii text\nwith lines\n")
    assert not is_binary("naïve café — ünïcödé ✓\n".encode() * 100)
    # a multi-byte character cut by the 8 KB window is still text
    data = ("x" * 8191 + "é" + "tail").encode()
    assert not is_binary(data)
    # latin-1 prose: a few invalid UTF-8 bytes, still text
    assert not is_binary("Résumé of the café meeting, très bien.\n".encode("latin-1") * 50)
    # UTF-16 with a BOM is text even though it has NUL bytes
    assert not is_binary("hello world\n".encode("utf-16"))


def test_decode_text() -> None:
    assert decode_text("hello".encode("utf-16")) == "hello"
    assert decode_text(b"\xef\xbb\xbfhi") == "hi"
    assert decode_text(b"ok \xff") == "ok \ufffd"
