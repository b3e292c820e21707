"""bench_code_retrieval.py --shapes reads each chunk the way the trained model's pairs were cut.

The "code without docstrings" shape must drop exactly the docstrings (of the function and of what
it defines) and keep every line of code, or the figure it prints in docs/performance.md measures
something else.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_code_retrieval import strip_docstrings  # noqa: E402  (the benchmarks folder is not a package)

METHOD = '''    def rollover(self, record):
        """Decide whether to roll over.

        Long explanation.
        """
        message = "%s\\n" % self.format(record)
        if self.maxBytes > 0:
            """not a docstring: a string statement after code"""
            return True
        class Inner:
            \'\'\'inner docstring\'\'\'
            x = 1
        return False'''


def test_docstrings_go_and_code_stays() -> None:
    out = strip_docstrings(METHOD)
    assert "Decide whether" not in out and "Long explanation" not in out and "inner docstring" not in out
    assert out.splitlines()[0] == "def rollover(self, record):"  # dedented, as the training pairs are
    for kept in ('message = "%s\\n" % self.format(record)', "if self.maxBytes > 0:",
                 '"""not a docstring: a string statement after code"""', "class Inner:", "x = 1", "return False"):
        assert kept in out


def test_code_that_does_not_parse_is_read_as_it_is() -> None:
    broken = "def f(:\n    '''doc'''\n    return 1"
    assert strip_docstrings(broken) == broken
