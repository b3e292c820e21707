"""A pasted issue is read by the embedding model as its title and prose, not its REPL session.

The model reads ~128 word pieces: an interpreter banner or a printout at the top of an
issue would otherwise fill them and pull the dense search toward whatever code talks
about interpreters and output.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from helix_context import HelixContextManager
from helix_context.config import Settings
from helix_context.retrieve.query import extract

ISSUE = textwrap.dedent('''\
    Wrong result with apart

    ```
    Python 3.6.0 |Continuum Analytics, Inc.| (default, Dec 23 2016, 12:22:00)
    Type "copyright", "credits" or "license" for more information.

    IPython 5.1.0 -- An enhanced Interactive Python.
    ?         -> Introduction and overview of IPython's features.
    %quickref -> Quick reference.
    help      -> Python's own help system.
    object?   -> Details about 'object', use 'object??' for extra details.

    In [1]: from pkg import symbols
    In [2]: bug = a * (-t + (-t + 1) * (2 * t - 1)) / (2 * t - 1)
    In [3]: bug.apart(t)
    Out[3]: -a*t
    ```
    The partial fraction decomposition drops a term.
    ''')


def test_an_issue_is_read_as_its_title_and_prose() -> None:
    views = extract(ISSUE).meaning
    assert views[0] == "Wrong result with apart"
    assert "decomposition drops a term" in views[1]
    assert not any("IPython" in v or "Out[3]" in v or "quickref" in v for v in views)
    assert extract("where is the zip member extracted").meaning == ("where is the zip member extracted",)
    only_code = "```\n>>> f(1)\n3\n```"
    assert extract(only_code).meaning == (only_code,), "a query of nothing but code is read whole"
    traceback = 'Traceback (most recent call last):\n  File "a.py", line 3, in f\nKeyError: 5'
    assert extract(traceback).meaning == (traceback,), "a traceback alone is read whole, not as a title"


def test_the_dense_search_finds_what_the_title_describes_despite_a_banner(settings: Settings,
                                                                           tmp_path: Path) -> None:
    (tmp_path / "partfrac.py").write_text(textwrap.dedent('''\
        def apart(f, x):
            """Partial fraction decomposition of a rational function of x."""
            return f
        '''))
    (tmp_path / "session.py").write_text(textwrap.dedent('''\
        def init_session(banner=True):
            """Start an interactive IPython shell: print the interpreter banner, the quick reference
            and how to get help on an object."""
            return banner
        '''))
    signals = ("fts", "tags", "path", "path_terms", "coactivation", "definition")
    dense_only = {f"{kind}_{s}": 0.0 for kind in ("weight", "code_weight") for s in signals}
    manager = HelixContextManager(settings.replace(retrieval=dense_only, ner={"enabled": False}))
    try:
        manager.ingest_path(tmp_path, embed=True)
        top = manager.fingerprint(ISSUE, max_results=2)
        assert top[0]["source_id"].endswith("partfrac.py") and top[0]["symbol"] == "apart"
    finally:
        manager.close()
