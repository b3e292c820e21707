"""A file's header against its functions, for a question in words (retrieve/locate.py, `question_header`).

A module's lines before its first definition (its docstring, its imports) are a pointer of their own, and the
docstring sums up every function below it, so it sits close in meaning to any question about one of them. A
question in words asks for the function: there the header counts `question_header` (0.7) of its score, and
from lexicality 0.5 (text that reads as an issue's) in full. Real ingest, a real SQLite genome and the real
embedding model; each ranking is also asked with the factor at 1, where the header comes first, so the test
fails if the factor stops working.
"""

from __future__ import annotations

from pathlib import Path

from helix_context import HelixContextManager
from helix_context.retrieve.locate import LocateWeights, QuestionFactors
from tests.retrieve.packed_genes import ingest_files

CACHE = '''"""An in-memory cache of responses, keyed by URL, with a time to live."""

import time

_entries = {}


def remember(url, body, ttl=60.0):
    """Keep a response body for ttl seconds."""
    _entries[url] = (time.monotonic() + ttl, body)


def recall(url):
    """The body kept for url, or None once it has expired."""
    found = _entries.get(url)
    if found is None or found[0] < time.monotonic():
        return None
    return found[1]
'''

# a script: module-level code and no definition, so the whole file is what it does, not a header
DEPLOY = '''"""Deploy the cache service: copy the build, keep the responses cached for a minute, restart it."""

import shutil
import subprocess

shutil.copytree("build", "/srv/cache", dirs_exist_ok=True)
subprocess.run(["systemctl", "restart", "cache"], check=True)
'''

QUESTION = "how long is a cached response kept"


def _ranked(manager: HelixContextManager, query: str, header: float) -> list[tuple[str, str | None, int, float]]:
    other = HelixContextManager(manager.settings.replace(retrieval={"question_header": header}, ner={"enabled": False}))
    try:
        return [(Path(p["source_id"]).name, p["symbol"], p["start_line"], p["score"])
                for p in other.fingerprint(query, max_results=6)]
    finally:
        other.close()


def test_a_question_in_words_gets_the_function_before_its_files_header(dense: HelixContextManager,
                                                                         tmp_path: Path) -> None:
    ingest_files(dense, tmp_path, {"cache.py": CACHE})
    before = _ranked(dense, QUESTION, 1.0)
    assert before[0][:3] == ("cache.py", None, 1), before  # counted in full, the docstring's summary wins
    shipped = [(name, symbol, line) for name, symbol, line, _ in _ranked(dense, QUESTION, 0.7)]
    assert shipped[0] in (("cache.py", "recall", 13), ("cache.py", "remember", 8)), shipped
    assert ("cache.py", None, 1) in shipped[:3], shipped  # the header is still a pointer, after the functions


def test_a_script_without_definitions_is_no_header(dense: HelixContextManager, tmp_path: Path) -> None:
    ingest_files(dense, tmp_path, {"cache.py": CACHE, "deploy.py": DEPLOY})
    question = "deploy the cache service and restart it"
    scores = {header: {(name, symbol, line): score for name, symbol, line, score in _ranked(dense, question, header)}
              for header in (1.0, 0.7)}
    assert scores[1.0][("deploy.py", None, 1)] == scores[0.7][("deploy.py", None, 1)], scores
    assert scores[0.7][("cache.py", None, 1)] < scores[1.0][("cache.py", None, 1)], scores


def test_text_that_reads_as_an_issue_counts_the_header_in_full() -> None:
    question = QuestionFactors(header=0.7)
    assert LocateWeights().blended(0.0, question).header == 0.7
    assert abs(LocateWeights().blended(0.25, question).header - 0.85) < 1e-9
    for lexicality in (0.5, 0.9, 1.0):  # an issue's imports and module names do point at files
        assert LocateWeights().blended(lexicality, question).header == 1.0
