"""Chunking prose, logs, config, JSON and diffs: sections keep their heading, a traceback its line, a record
stays whole."""

from __future__ import annotations

import textwrap

from tests.ingest.chunking import chunk_with, containing


# --------------------------------------------------------------------------- markdown / text

MD = textwrap.dedent('''\
    # Helix

    Intro paragraph.

    ## Install

    Run the installer.

    ```bash
    # not a heading
    pip install helix
    ```

    ## Configure

    Edit helix.toml.

    Setext Title
    ============

    Under setext.
    ''')


def test_markdown_sections_keep_their_heading() -> None:
    chunks = chunk_with(MD, "markdown", "markdown", max_chars=60)
    install = containing(chunks, "Run the installer.")
    assert install.content.startswith("## Install")
    assert install.symbol == "Install"
    fence = containing(chunks, "# not a heading")
    assert fence.symbol == "Install", "a '#' line in a code fence is not a heading"
    configure = containing(chunks, "Edit helix.toml.")
    assert configure.symbol == "Configure" and configure.content.startswith("## Configure")
    setext = containing(chunks, "Under setext.")
    assert setext.symbol == "Setext Title"


def test_markdown_small_sections_merge_but_start_at_a_heading() -> None:
    chunks = chunk_with(MD, "markdown", "markdown")
    assert len(chunks) == 1 and chunks[0].symbol == "Helix"


def test_long_markdown_section_splits_at_paragraphs() -> None:
    paras = "\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(12))
    src = "# Big\n\n" + paras + "\n"
    chunks = chunk_with(src, "markdown", "markdown", max_chars=800)
    assert len(chunks) > 1
    assert all(c.symbol == "Big" for c in chunks)
    for i in range(12):
        containing(chunks, f"Paragraph {i} ")  # never cut mid-paragraph


def test_text_by_paragraphs() -> None:
    paras = [f"Paragraph number {i}. " + "lorem ipsum " * 30 for i in range(10)]
    src = "\n\n".join(paras) + "\n"
    chunks = chunk_with(src, "text", None, max_chars=1000)
    assert len(chunks) >= 4
    for i in range(10):
        containing(chunks, f"Paragraph number {i}.")


# --------------------------------------------------------------------------- logs

LOG = textwrap.dedent('''\
    2024-05-01 12:00:00,001 INFO server started on port 11437
    2024-05-01 12:00:01,002 INFO request GET /health 200
    2024-05-01 12:00:02,003 ERROR request failed
    Traceback (most recent call last):
      File "/app/server.py", line 10, in handle
        result = work()
      File "/app/work.py", line 3, in work
        raise ValueError("bad input")
    ValueError: bad input

    During handling of the above exception, another exception occurred:

    Traceback (most recent call last):
      File "/app/server.py", line 12, in handle
        raise RuntimeError("wrapped")
    RuntimeError: wrapped
    2024-05-01 12:00:03,004 INFO request GET /health 200
    ''')


def test_log_traceback_stays_with_the_line_that_started_it() -> None:
    big = "".join(f"2024-05-01 11:{i // 60:02d}:{i % 60:02d},000 INFO tick {i} " + "x" * 40 + "\n" for i in range(200))
    src = big + LOG
    for max_chars in (2400, 900):
        chunks = chunk_with(src, "log", None, max_chars=max_chars)
        c = containing(chunks, "ERROR request failed")
        assert "ValueError: bad input" in c.content
        assert "RuntimeError: wrapped" in c.content
        assert "During handling of the above exception" in c.content


def test_java_stack_trace_stays_together() -> None:
    src = "".join(f"2024-05-01 11:00:{i:02d} INFO step {i} " + "y" * 50 + "\n" for i in range(40))
    src += "2024-05-01 11:01:00 ERROR boom\njava.lang.IllegalStateException: bad\n" + "".join(
        f"\tat com.example.Foo.bar{i}(Foo.java:{i})\n" for i in range(10)) + "Caused by: java.io.IOException: x\n\t... 5 more\n"
    chunks = chunk_with(src, "log", None, max_chars=1000)
    c = containing(chunks, "ERROR boom")
    assert "Foo.bar9" in c.content and "... 5 more" in c.content


def test_log_without_timestamps_splits_at_blank_lines() -> None:
    blocks = ["\n".join(f"block {b} line {i} " + "z" * 30 for i in range(8)) for b in range(10)]
    src = "\n\n".join(blocks) + "\n"
    chunks = chunk_with(src, "log", None, max_chars=1000)
    for b in range(10):
        c = containing(chunks, f"block {b} line 0 ")
        assert f"block {b} line 7 " in c.content


# --------------------------------------------------------------------------- config / json / diff


def test_toml_by_sections() -> None:
    src = "# global\ntitle = \"x\"\n\n# the server\n[server]\nport = 11437\nhost = \"127.0.0.1\"\n\n[ingest]\nmax = 1\n"
    chunks = chunk_with(src, "config", "toml", max_chars=50)
    server = containing(chunks, "port = 11437")
    assert server.symbol == "server"
    assert server.content.startswith("# the server\n[server]")
    assert containing(chunks, "max = 1").symbol == "ingest"


def test_yaml_by_top_level_keys() -> None:
    src = "services:\n  web:\n    image: nginx\n    ports:\n      - 80\nvolumes:\n  data: {}\nnetworks:\n  default: {}\n"
    chunks = chunk_with(src, "config", "yaml", max_chars=60)
    assert containing(chunks, "image: nginx").symbol == "services"
    assert containing(chunks, "data: {}").symbol == "volumes"


def test_json_by_top_level_keys_and_jsonl_by_records() -> None:
    members = ",\n".join(f'  "key{i}": {{\n    "value": {i},\n    "text": "{"t" * 40}"\n  }}' for i in range(20))
    src = "{\n" + members + "\n}\n"
    chunks = chunk_with(src, "json", "json", max_chars=400)
    assert len(chunks) > 1
    for i in (0, 7, 19):
        c = containing(chunks, f'"key{i}": {{')
        assert f'"value": {i},' in c.content
    k7 = containing(chunks, '"key7": {')
    assert k7.symbol is not None and k7.symbol.startswith("key")
    jsonl = "".join(f'{{"id": {i}, "msg": "{"m" * 50}"}}\n' for i in range(30))
    chunks = chunk_with(jsonl, "json", "jsonl", max_chars=300)
    assert len(chunks) > 1
    for i in range(30):
        containing(chunks, f'{{"id": {i}, ')


def test_minified_json_is_hard_split() -> None:
    src = "[" + ",".join(f'{{"id":{i}}}' for i in range(5000)) + "]"
    chunks = chunk_with(src, "json", "json", max_chars=1000)
    assert len(chunks) > 10
    assert "".join(c.content for c in chunks) == src


DIFF = textwrap.dedent('''\
    diff --git a/app/server.py b/app/server.py
    index 1111111..2222222 100644
    --- a/app/server.py
    +++ b/app/server.py
    @@ -1,3 +1,3 @@
    -PORT = 1
    +PORT = 11437
     HOST = "x"
    @@ -10,2 +10,2 @@ def main():
    -    run()
    +    run(PORT)
    diff --git a/README.md b/README.md
    --- a/README.md
    +++ b/README.md
    @@ -1 +1 @@
    -old
    +new
    ''')


def test_diff_by_file_then_hunk() -> None:
    chunks = chunk_with(DIFF, "diff", "diff", max_chars=2400)
    assert len(chunks) >= 1
    small = chunk_with(DIFF, "diff", "diff", max_chars=200)
    server = containing(small, "+PORT = 11437")
    assert server.symbol == "app/server.py"
    assert server.content.startswith("diff --git a/app/server.py")
    assert containing(small, "+    run(PORT)").symbol == "app/server.py"
    readme = containing(small, "+new")
    assert readme.symbol == "README.md" and "PORT" not in readme.content
