"""A function whose own words fit the question is judged by its own meaning, wherever its gene ranks.

Storage packs a class's small methods into one gene, and the gene's fused score and its one vector
speak for all of them. A project whose many small files all talk about help and error output ranks
those files' genes first for "change where the help and the error output are written", and the gene
packing `Command.configure_output` with four unrelated methods comes after the best DENSE_GENES, whose
spans alone are embedded one by one. So the method, whose own lines hold every word of the question,
was scored with its gene's blended vector and ranked below the files that only share the topic
(commander's `configureOutput`, 15th; docs/performance.md, session 30). Now the spans whose own words
score best are embedded alone too (retrieve/span_dense.chosen_spans). Real ingest, a real SQLite genome
and the real MiniLM model.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from helix_context import HelixContextManager
from helix_context.models import Gene
from helix_context.retrieve import span_dense
from helix_context.retrieve.retriever import Retriever

from tests.retrieve.packed_genes import symbols_sharing_gene

QUESTION = "change where the help and the error output are written"

# small modules about the question's topic, each its own gene: the gene ranking puts them first
TOPICAL = {
    "print_usage": "Print the usage line of the program to standard output.",
    "format_help": "Build the help text: usage, description, options and commands.",
    "print_help": "Write the full help text and exit.",
    "help_width": "Width of the terminal the help is wrapped to.",
    "wrap_help": "Wrap the help text of an option to the terminal width.",
    "show_error": "Print an error message in red and the hint to run --help.",
    "error_exit": "Print the error and leave with status 1.",
    "help_for_command": "The help text of one subcommand.",
    "usage_for_command": "The usage line of one subcommand.",
    "help_options": "List the options in the help, with their descriptions.",
    "help_commands": "List the subcommands in the help.",
    "print_version": "Print the version of the program and exit.",
    "suggest_command": "After an unknown command, suggest the closest known one.",
    "help_epilog": "Text shown after the options in the help.",
    "colour_output": "Whether the output is a terminal that shows colours.",
    "write_help": "Write the help output to the console.",
    "write_error": "Write the error output to the error stream.",
    "help_to_file": "Save the help output in a file.",
    "error_to_log": "Send the error output to the log.",
    "flush_output": "Flush the help and error output streams.",
    "quiet_output": "Hide the output except for errors.",
    "output_encoding": "The encoding the output is written in.",
    "help_markdown": "Write the help as Markdown.",
    "error_json": "Write an error as JSON for scripts.",
    "help_pager": "Show a long help output through a pager.",
    "error_hint": "Add a hint about the help after an error.",
    "output_width": "The width the help output is wrapped to.",
    "help_colours": "The colours of the help output headings.",
    "error_prefix": "The prefix written before each error.",
    "help_sections": "Split the help output into sections.",
    "help_examples": "Write the examples section of the help.",
    "error_codes": "The exit codes written after an error.",
    "help_header": "The header line of the help output.",
    "output_stream": "The stream the help output goes to by default.",
}

COMMAND = textwrap.dedent('''\
    class Command:
        def parse_numbers(self, values):
            """Turn the values of a numeric option into integers, rejecting fractions."""
            numbers = []
            for value in values:
                if "." in value:
                    raise ValueError(value)
                numbers.append(int(value))
            return numbers

        def alias(self, name):
            """Another name the command can be called by."""
            self._aliases.append(name)
            return self

        def argument(self, name, description=""):
            """Declare a positional argument."""
            self._arguments.append((name, description))
            return self

        def configure_output(self, write_out=None, write_err=None):
            """Change where the help and the error output are written (both default to the console)."""
            self._write_out = write_out or self._write_out
            self._write_err = write_err or self._write_err
            return self

        def action(self, fn):
            """Register the function run when the command is invoked."""
            self._action = fn
            return self
    ''')


def _ingest(dense: HelixContextManager, root: Path) -> None:
    cli = root / "tool" / "cli"  # a neutral folder: the path's words are part of what a gene is embedded from
    cli.mkdir(parents=True)
    for name, doc in TOPICAL.items():
        (cli / f"{name}.py").write_text(f'import sys\n\n\ndef {name}(program, stream=sys.stdout):\n'
                                        f'    """{doc}"""\n    text = program.render("{name}")\n'
                                        f'    stream.write(text + "\\n")\n    return text\n')
    (cli / "command.py").write_text(COMMAND)
    dense.ingest_path(root / "tool")


def _first_symbols(dense: HelixContextManager, n: int = 3) -> list[str | None]:
    dense.retriever.span_vectors = span_dense.SpanVectors()  # each ranking embeds what it chooses afresh
    found = dense.retriever.retrieve(QUESTION, max_genes=10, gate=False, pointers=True)
    return [p.symbol for p in found.pointers[:n]]


def test_the_method_whose_words_fit_comes_first_though_its_gene_ranks_late(dense: HelixContextManager,
                                                                          tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _ingest(dense, tmp_path)
    genes = dense.retriever.retrieve(QUESTION, max_genes=60, gate=False).items
    (gene,) = dense.genome.conn.execute("SELECT gene FROM symbols WHERE name = 'Command.configure_output'").fetchone()
    assert symbols_sharing_gene(dense, "Command.configure_output") >= 3
    rank = next(i for i, it in enumerate(genes, 1) if it.gene.rowid == gene)
    assert rank > span_dense.DENSE_GENES, "the method's gene must rank past the best genes (else this shows nothing)"

    assert _first_symbols(dense, 1) == ["Command.configure_output"]
    assert [item.symbol for item in dense.packet(QUESTION).items][:1] == ["Command.configure_output"]
    assert dense.retriever.retrieve(QUESTION).items, "answered, not silenced"

    # choosing spans by their words is lexical evidence: a ranking that weighs no span's words chooses none
    # (the dense-only ranking the benchmarks print beside the fusion)
    wordless = Retriever(dense.genome, dense.settings.replace(retrieval={"locate_symbol": 0.0}),
                         embedder_part=dense.embedder_part)
    found = wordless.retrieve(QUESTION, max_genes=10, gate=False, pointers=True)
    assert "Command.configure_output" not in [p.symbol for p in found.pointers[:3]]

    # what users got before: the method scored with its gene's blended vector, below the topical files
    monkeypatch.setattr(span_dense, "WORDED_SPANS", 0)
    assert "Command.configure_output" not in _first_symbols(dense)


def _gene(rowid: int, content_type: str = "code") -> Gene:
    return Gene(f"g{rowid}", "", content_type, "python", f"m{rowid}.py", None, 1, 40, rowid=rowid)


def _span(name: str | None, first: int, words: float) -> tuple:
    return (SimpleNamespace(name=name) if name else None, first, first + 3, words, 0.0, False)


def test_spans_chosen_are_the_best_genes_and_past_them_only_the_best_worded() -> None:
    genes = [_gene(r) for r in range(1, 6)] + [_gene(6, "text")]
    spans = {
        1: [_span("a", 1, 1.0), _span("b", 5, 0.1)],  # a best gene packing two: every span
        2: [_span("solo", 1, 9.0)],  # one span: the gene's own vector already is the span's
        3: [_span("c", 1, 0.2), _span("d", 5, 10.0), _span(None, 9, 10.0)],  # d: the best words anywhere
        4: [_span("e", 1, 7.5), _span("f", 5, 6.9)],  # e at 75 % of the best, f at 69 %
        5: [_span("g", 1, 7.2), _span("h", 5, 7.1)],
        6: [_span("prose", 1, 10.0), _span("more", 5, 10.0)],  # prose: scored by its gene's vector
    }
    chosen = span_dense.chosen_spans(genes, spans, best=1, worded=3, share=0.7)
    assert {r: [s[1] for s in own] for r, own in chosen.items()} == {1: [1, 5], 3: [5], 4: [1], 5: [1]}
    assert span_dense.chosen_spans(genes, spans, best=1, worded=0) == {1: spans[1]}
