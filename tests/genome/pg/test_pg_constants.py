"""Symbols that an older Helix did not find, on a team genome: Python's constants (schema V_CONSTANTS),
JavaScript's functions assigned to a property (V_TREE_SITTER_SYMBOLS), route handlers (V_CALL_DEFINITIONS), Dart
functions' bodies (V_DEFINITION_LINES), what a wrapped library defines (V_WRAPPED_FUNCTIONS) and the comment block above a
Python definition (V_PYTHON_COMMENTS). A genome indexed before re-parses those files on the next ingest (and, before
V_PYTHON_COMMENTS, its Python files), and a question naming the symbol then points at its lines."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from helix_context.config import Settings
from helix_context.manager import HelixContextManager

from tests.retrieve.test_definition_lines import DART
from tests.retrieve.test_wrapped_modules import LIBRARY, wrapped_symbol

from .conftest import older_team_genome

_SOURCE = "MAX_RETRIES = 5\n\n\ndef fetch(get, url):\n    for _ in range(MAX_RETRIES):\n        if get(url):\n" \
          "            return True\n    return False\n"


_COMMENTED = ("MAX_RETRIES = 5\n\n\n# Wait twice as long after each failed attempt.\ndef backoff(attempt):\n"
              "    return 2 ** attempt\n")
_JS = "exports.handler = async (event) => {\n  return respond(event);\n};\n"
_ROUTES = ("router.get('/users/:id', async (req, res) => {\n  res.json(await accounts.find(req.params.id));\n});\n\n"
           "router.delete('/users/:id', async (req, res) => {\n  await accounts.remove(req.params.id);\n"
           "  res.status(204).end();\n});\n")

# schema version an older Helix left, its files, the file it marks for a re-parse, the question, the pointer wanted
UPGRADES = {
    "constants": (6, {"retry.py": _SOURCE, "NOTES.md": "# notes\n\nFetching retries a few times.\n"}, "retry.py",
                  "MAX_RETRIES", ("MAX_RETRIES", "constant", 1, 1)),
    "assigned-functions": (7, {"lambda.js": _JS, "retry.py": _SOURCE}, "lambda.js",
                           "handler", ("handler", "function", 1, 3)),
    "route-handlers": (8, {"users.js": _ROUTES, "retry.py": _SOURCE}, "users.js",
                       "which handler serves DELETE /users/:id", ("DELETE /users/:id", "function", 5, 8)),
    "definition-lines": (9, {"cart.dart": DART, "retry.py": _SOURCE}, "cart.dart",
                         "Cart.total", ("Cart.total", "method", 10, 17)),
    "wrapped-functions": (10, {"tinydash.js": LIBRARY, "retry.py": _SOURCE}, "tinydash.js",
                          "chunk", ("runInContext.chunk", "function", *wrapped_symbol("chunk"))),
    "python-comments": (11, {"retry.py": _COMMENTED, "lambda.js": _JS}, "retry.py",
                        "backoff", ("backoff", "function", 4, 6)),
}


@pytest.mark.parametrize("upgrade", sorted(UPGRADES))
def test_an_older_team_genome_gets_its_new_symbols_on_the_next_ingest(settings: Settings, pg_url: str,
                                                                       tmp_path: Path, upgrade: str) -> None:
    version, files, marked, question, want = UPGRADES[upgrade]
    tree = tmp_path / "tree"
    tree.mkdir()
    for name, text in files.items():
        (tree / name).write_text(text)
    chosen = older_team_genome(settings, pg_url, tree, version)
    helix = HelixContextManager(chosen)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            sizes = {Path(p).name: size for p, size in conn.execute("SELECT path, size FROM files")}
        # before V_PYTHON_COMMENTS (version 12) every Python file is marked as well
        marks = {name: name == marked or (version < 11 and name.endswith(".py")) for name in files}
        assert {name: size == -1 for name, size in sizes.items()} == marks
        report = helix.ingest_path(tree)
        assert report.files_ingested == sum(marks.values()) and report.genes_added == 0
        top = helix.fingerprint(question, max_results=2)[0]
        assert (top["symbol"], top["kind"], top["start_line"], top["end_line"]) == want
    finally:
        helix.close()
