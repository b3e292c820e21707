"""A parse worker process: `python -m helix_context.ingest.parse_worker`.

Reads pickled frames on stdin: first (settings, tagger), then one ParseJob per file;
writes one pickled (ok, Parsed or exception) per job on stdout, in order. Exits at
EOF, which is also what it sees when its parent dies. Logs go to stderr: stdout
carries only results, so a stray print cannot corrupt the stream.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from typing import Any


def main() -> int:
    results = sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed while parsing lands on stderr, never in the results
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s helix parse worker %(levelname)s %(message)s")
    _lower_priority()
    from helix_context.ingest.parallel import parse

    jobs = sys.stdin.buffer
    try:
        settings, tagger = pickle.load(jobs)
    except EOFError:
        return 0
    while True:
        try:
            job = pickle.load(jobs)
        except EOFError:
            return 0
        reply: tuple[bool, Any]  # (True, Parsed) or (False, the exception, made picklable)
        try:
            reply = (True, parse(job, settings, tagger))
        except Exception as exc:  # a parser bug on one file: the parent reports it for that file
            logging.getLogger("helix.ingest").exception("failed to parse %s", getattr(job, "path", "?"))
            reply = (False, _picklable(exc))
        pickle.dump(reply, results, protocol=pickle.HIGHEST_PROTOCOL)
        results.flush()


def _lower_priority() -> None:
    """Run below the main process: it writes what the workers parse, and on a big tree those writes
    set the pace; when every core is busy they must not wait for a share of one. The user's own
    programs also stay responsive during a long ingest."""
    try:
        if hasattr(os, "nice"):
            os.nice(5)
        else:  # Windows
            import psutil

            psutil.Process().nice(psutil.BELOW_NORMAL_PRIORITY_CLASS)
    except Exception as exc:  # a priority is a nicety, never a reason to fail
        logging.getLogger("helix.ingest").debug("parse worker keeps its priority: %s", exc)


def _picklable(exc: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
