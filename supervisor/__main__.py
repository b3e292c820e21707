"""`python -m supervisor [--console]`: run the supervisor in the foreground (= `helix supervise`)."""

from __future__ import annotations

import sys

from helix_context.config import load_config
from helix_context.errors import ConfigError

from supervisor import run_supervisor


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        settings = load_config()
    except ConfigError as exc:
        print(f"helix supervise: {exc}", file=sys.stderr)
        return 2
    return run_supervisor(settings, headless="--console" not in args)


if __name__ == "__main__":
    raise SystemExit(main())
