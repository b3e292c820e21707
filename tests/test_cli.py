"""The `helix` command line as a user meets it: exit codes, messages, help, and finding the backend."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from helix_context import signals
from helix_context.cli import build_parser
from tests.conftest import REPO, free_port


def cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "false", "HELIX_NER_ENABLED": "false",
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "helix_context.cli", *args], capture_output=True, text=True,
                          timeout=180, env=full, cwd=REPO, input=stdin)


def test_a_missing_path_is_an_error_and_nothing_is_ingested(tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("# Notes\n\nThe frobnicator listens on port 7781.\n")
    done = cli("ingest", str(real), str(tmp_path / "nope"), "--no-embed", "--quiet")
    assert done.returncode == 2
    assert f"no such file or folder: {tmp_path / 'nope'}" in done.stderr and "nothing was ingested" in done.stderr
    stats = json.loads(cli("stats", "--json").stdout)
    assert stats["total_genes"] == 0  # the path that exists was not half-ingested either


def test_an_empty_query_is_one_clear_error_everywhere_in_the_cli() -> None:
    for args, stdin in ((("query", ""), None), (("query", "   "), None), (("packet", ""), None),
                        (("fingerprint",), None), (("query", "-"), "  \n")):
        done = cli(*args, stdin=stdin)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "the query is empty" in done.stderr, (args, done.stderr)
        assert done.stdout == "", args  # no empty answer that looks like "nothing is indexed"


def test_nothing_relevant_exits_1_and_says_so_plainly(tmp_path: Path) -> None:
    doc = tmp_path / "notes.md"
    doc.write_text("# Deploy\n\nThe quasar_flux service listens on port 7781 behind nginx.\n")
    assert cli("ingest", str(doc), "--no-embed", "--quiet").returncode == 0
    found = cli("query", "quasar_flux port")
    assert found.returncode == 0 and "7781" in found.stdout
    assert "answer found" in found.stderr and "[aligned]" not in found.stderr
    for args in (("query", "zebra xylophone marmalade"), ("fingerprint", "zebra xylophone marmalade"),
                 ("packet", "zebra xylophone marmalade")):
        done = cli(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert "nothing relevant found" in done.stderr
        for word in ("denatured", "genes ", "tier="):
            assert word not in done.stderr, (args, word, done.stderr)


def test_the_same_file_in_two_projects_answers_in_each_and_a_new_project_re_indexes_it(tmp_path: Path) -> None:
    """`--project pb` on a copy of a file `pa` already held was a success that changed nothing: pb stayed an
    unknown project and the copy's chunks answered under pa. A file indexed under another project is indexed
    again when `--project` names a new one."""
    text = 'def settle_invoice(ledger, invoice):\n    """Settle an invoice against the ledger."""\n    return ledger\n'
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "billing.py").write_text(text)
    assert cli("ingest", str(tmp_path / "a"), "--project", "pa", "--quiet").returncode == 0
    assert cli("ingest", str(tmp_path / "b"), "--project", "pb", "--quiet").returncode == 0
    for project, folder in (("pa", "a"), ("pb", "b")):
        done = cli("fingerprint", "settle an invoice", "--project", project)
        assert done.returncode == 0, done.stderr
        assert str(tmp_path / folder / "billing.py") in done.stdout, done.stdout
        assert str(tmp_path / ("b" if folder == "a" else "a")) not in done.stdout, done.stdout
    assert cli("ingest", str(tmp_path / "a"), "--project", "pc", "--quiet").returncode == 0  # the folder moves
    done = cli("fingerprint", "settle an invoice", "--project", "pc")
    assert done.returncode == 0 and str(tmp_path / "a" / "billing.py") in done.stdout, done.stdout + done.stderr
    assert "unknown project 'pa'" in cli("fingerprint", "settle an invoice", "--project", "pa").stderr


def test_a_packet_line_names_the_function_it_points_at(tmp_path: Path) -> None:
    src = tmp_path / "billing.py"
    src.write_text('"""Invoices."""\n\n\ndef apply_late_fee(invoice, days_overdue):\n'
                   '    """Add the late fee to an overdue invoice."""\n'
                   '    return invoice.total * 0.02 * days_overdue\n\n\n'
                   'def format_invoice_number(n):\n    """Zero-padded invoice number."""\n    return f"INV-{n:06d}"\n')
    assert cli("ingest", str(src), "--no-embed", "--quiet").returncode == 0
    done = cli("packet", "apply_late_fee overdue invoice")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if f"{src}:" in line]
    assert lines and "  apply_late_fee  " in lines[0], done.stdout  # the name beside the lines, as fingerprint shows it


def _without_help(parser: argparse.ArgumentParser, name: str = "helix") -> list[str]:
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                missing += _without_help(sub, f"{name} {sub_name}")
        elif not isinstance(action, argparse._HelpAction) and not action.help:
            missing.append(f"{name}: {'/'.join(action.option_strings) or action.dest}")
    return missing


def test_every_argument_has_help() -> None:
    assert _without_help(build_parser()) == []
    text = cli("ingest", "--help").stdout
    assert "files or folders to index" in text


def test_the_cli_finds_a_backend_started_on_another_port(live_server, helix_home: Path) -> None:
    """The backend writes its URL into HELIX_HOME's state file; the CLI reads it, whatever port helix.toml says."""
    other = free_port()  # what the CLI would use from its configuration: nothing listens there
    state = signals.read_server_state(helix_home)[0]
    assert state is not None and state.url == f"http://127.0.0.1:{live_server.port}"
    done = cli("sources", "list", "--json", env={"HELIX_SERVER_PORT": str(other)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout).get("backend") != "not running"
    folder = helix_home.parent / "project-for-cli"
    folder.mkdir(exist_ok=True)
    (folder / "a.md").write_text("# A\n\nalpha\n")
    done = cli("sources", "add", str(folder), env={"HELIX_SERVER_PORT": str(other)})
    assert done.returncode == 0 and "the backend is indexing it now" in done.stdout, done.stderr
    listed = httpx.get(f"http://127.0.0.1:{live_server.port}/sources", timeout=10).json()["sources"]
    assert [row["path"] for row in listed] == [str(folder.resolve())]


def test_the_cli_never_acts_on_another_homes_backend(live_server, helix_home: Path, tmp_path: Path) -> None:
    """With HELIX_HOME pointing at a home whose backend is not running, `helix sources` went to whatever backend
    answered on the configured port: another home's, whose index it then changed."""
    other_home = tmp_path / "other-home"
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nalpha\n")
    env = {"HELIX_HOME": str(other_home), "HELIX_SERVER_PORT": str(live_server.port)}
    done = cli("sources", "add", str(folder), env=env)
    assert done.returncode == 0 and "the backend is indexing it now" not in done.stdout, done.stdout + done.stderr
    assert httpx.get(f"http://127.0.0.1:{live_server.port}/sources", timeout=10).json()["sources"] == []
    listed = json.loads(cli("sources", "list", "--json", env=env).stdout)
    assert [row["path"] for row in listed["sources"]] == [str(folder.resolve())], listed


def test_a_backend_that_claims_to_run_but_does_not_answer_is_exit_3(helix_home: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    signals.write_server_state("running", pid=os.getpid(), home=helix_home, url=dead)  # a live pid, no answer
    done = cli("sources", "list", env={"HELIX_SERVER_PORT": str(free_port())})
    assert done.returncode == 3
    assert dead in done.stderr and "does not answer" in done.stderr


def test_answers_echo_only_a_short_prefix_of_a_huge_query(live_server) -> None:
    query = "frobnicate the quasar " * 5000  # ~110 KB
    for path in ("/fingerprint", "/context", "/context/packet", "/context/refresh-plan"):
        response = httpx.post(f"http://127.0.0.1:{live_server.port}{path}", json={"query": query}, timeout=120)
        assert response.status_code == 200, (path, response.text[:300])
        echoed = response.json()["query"]
        assert len(echoed) < 200 and echoed.startswith("frobnicate the quasar") and "110,000 characters" in echoed
        assert len(response.content) < 20_000, (path, len(response.content))


def test_an_import_of_another_models_vectors_says_so_and_stats_counts_them(tmp_path: Path) -> None:
    """An export made with the code-trained model, imported into a genome on MiniLM with no backend running: the
    import says how many chunks wait for a re-embed, and `helix stats` counts them until a backend has done it."""
    from helix_context.config import load_config
    from helix_context.genome.store import Genome
    from helix_context.portable import export_genome
    from tests.stdlib_logging import build_genome, copy_logging

    root = copy_logging(tmp_path / "tree")
    genes = build_genome(root.parent, "code-minilm", genome={"path": str(tmp_path / "mate" / "genome.db")})
    mate = Genome(tmp_path / "mate" / "genome.db")
    export_genome(mate, tmp_path / "mate.helix")
    mate.close()
    assert load_config().embedding.model == "minilm"

    done = cli("import", str(tmp_path / "mate.helix"), "--remap", f"logging={root}")
    assert done.returncode == 0, done.stderr
    assert f"vectors   {genes} chunks hold vectors of another embedding model than this genome's " \
           "(all-MiniLM-L6-v2-int8)" in done.stdout, done.stdout
    stats = cli("stats")
    assert f"re-embed        {genes:,} chunks hold vectors of another embedding model" in stats.stdout, stats.stdout
    assert json.loads(cli("stats", "--json").stdout)["vectors_to_reembed"] == genes


def _small_tree(root: Path, files: int = 30) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"mod{i}.py").write_text(f'def handler_{i}(request):\n    """Answer request {i} with its port."""\n'
                                         f"    return {i}\n" * 20)
    return root


def test_a_damaged_genome_is_named_by_check_and_every_command_says_what_to_do(tmp_path: Path, helix_home: Path) -> None:
    """`helix check`, the command for this case, printed a sqlite3 traceback; so did stats, export and vacuum."""
    assert cli("ingest", str(_small_tree(tmp_path / "tree")), "--quiet").returncode == 0
    assert cli("checkpoint").returncode == 0
    genome = helix_home / "genome.db"
    with genome.open("r+b") as fh:  # three pages of noise in the middle of the file
        fh.seek(4096 * 3)
        fh.write(os.urandom(4096 * 3))
    done = cli("check")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["problems"], report
    for args in (("stats",), ("export", str(tmp_path / "out.helix")), ("vacuum",)):
        done = cli(*args)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode == 4 and "damaged" in done.stderr and "helix import" in done.stderr, (args, done.stderr)


def test_a_query_with_bytes_that_are_not_utf8_is_answered(tmp_path: Path) -> None:
    """Pasted logs hold Latin-1 bytes; Python hands them over as lone surrogates, which the embedding model's
    tokenizer refused: a TypeError traceback and exit 1 ("nothing relevant found")."""
    assert cli("ingest", str(_small_tree(tmp_path / "tree", 3)), "--quiet").returncode == 0
    env = {"HELIX_EMBEDDING_ENABLED": "true"}
    query = b"which handler answers the request port \xff\xfe"
    for args in (("query", "-"), ("fingerprint", "-"), ("packet", "-")):
        done = subprocess.run([sys.executable, "-m", "helix_context.cli", *args], capture_output=True, timeout=180,
                              env={**os.environ, "PYTHONPATH": str(REPO), "HELIX_NER_ENABLED": "false", **env},
                              cwd=REPO, input=query)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (args, done.stderr[-600:])
        assert b"mod" in done.stdout, args
    batch = tmp_path / "batch.jsonl"
    batch.write_bytes(b'{"id": 1, "query": "handler request \\ud800"}\n\xff\xfe not text\n{"id": 2, "query": "port"}\n')
    done = cli("fingerprint", "--batch", str(batch), env=env)
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1, 2], done.stderr
    assert "line 2: not UTF-8 text; skipped" in done.stderr and done.returncode == 1
    done = cli("fingerprint", "--batch", str(tmp_path / "missing.jsonl"))
    assert done.returncode == 2 and "Traceback" not in done.stderr and "missing.jsonl" in done.stderr


def test_output_cut_short_by_a_pipe_ends_quietly(tmp_path: Path) -> None:
    assert cli("ingest", str(_small_tree(tmp_path / "tree")), "--quiet").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "false", "HELIX_NER_ENABLED": "false"}
    proc = subprocess.Popen([sys.executable, "-m", "helix_context.cli", "fingerprint", "handler request",
                             "--max-results", "1000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    stderr = proc.stderr.read().decode()
    proc.wait(60)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_an_export_never_replaces_a_folder_a_device_or_a_link(tmp_path: Path) -> None:
    """The file is renamed into place: a symbolic link became a local file, and run as root `helix export
    /dev/null` would have deleted the device."""
    assert cli("ingest", str(_small_tree(tmp_path / "tree", 2)), "--quiet").returncode == 0
    folder = tmp_path / "exports"
    folder.mkdir()
    done = cli("export", str(folder))
    assert done.returncode == 2 and "is a folder" in done.stderr and "Traceback" not in done.stderr, done.stderr
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = cli("export", str(fifo))
    assert done.returncode == 2 and "not a file" in done.stderr and fifo.is_fifo(), done.stderr
    real = tmp_path / "nas" / "latest.helix"
    real.parent.mkdir()
    real.write_text("an older export")
    link = tmp_path / "latest.helix"
    link.symlink_to(real)
    assert cli("export", str(link)).returncode == 0
    assert link.is_symlink() and real.read_bytes()[:4] != b"an o" and real.stat().st_size > 100


def test_a_file_name_with_a_newline_stays_on_one_line_of_output(tmp_path: Path) -> None:
    """A newline or tab in a name split `fingerprint`'s line and the `<GENE src=...>` opening the model reads."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "new\nline\t.py").write_text('def settle_invoice(ledger):\n    """Settle an invoice."""\n    return 1\n')
    assert cli("ingest", str(tree), "--quiet").returncode == 0
    done = cli("fingerprint", "settle an invoice")
    first = done.stdout.splitlines()[0]
    assert "new\\nline\\t.py:1-3" in first and "settle_invoice" in first, done.stdout
    done = cli("query", "settle an invoice")
    assert f'<GENE src="{tree}/new\\nline\\t.py:1-3">' in done.stdout, done.stdout
    done = cli("packet", "settle an invoice")
    assert "new\\nline\\t.py" in done.stdout and all("settle" in line or not line.startswith("verified")
                                                       for line in done.stdout.splitlines()), done.stdout


def test_a_project_name_no_scope_can_name_is_refused(tmp_path: Path) -> None:
    """`a,b` is read as two projects by every scope, and a NUL or newline prints as something else."""
    (tmp_path / "notes.md").write_text("# Notes\n\nThe frobnicator listens on port 7781.\n")
    for name in ("billing,forecast", "bill\ning"):
        done = cli("ingest", str(tmp_path), "--project", name, "--quiet")
        assert done.returncode == 2 and "comma or a control character" in done.stderr, done.stderr
    assert json.loads(cli("stats", "--json").stdout)["total_genes"] == 0


def test_helix_supervise_prints_each_line_once(tmp_path: Path, helix_home: Path) -> None:
    """`helix supervise` printed every supervisor line twice: the CLI's root handler and the supervisor's own."""
    import signal
    import time

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "HELIX_EMBEDDING_ENABLED": "false", "HELIX_NER_ENABLED": "false",
           "HELIX_SERVER_PORT": str(port)}
    proc = subprocess.Popen([sys.executable, "-m", "helix_context.cli", "supervise"], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    lines = [line for line in out.splitlines() if "helix.supervisor" in line]
    assert any("serving on" in line for line in lines), out
    assert len(lines) == len(set(lines)), out


def test_genome_copy_to_a_folder_asks_for_a_file_name(tmp_path: Path) -> None:
    done = cli("genome", "copy", "--to", str(tmp_path))
    assert done.returncode == 2 and "is a folder: give the file name" in done.stderr, done.stderr
    assert "re-ingest" not in done.stderr  # the genome's repair advice does not fit a copy's target
