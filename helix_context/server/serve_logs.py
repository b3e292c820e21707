"""Where `helix serve` writes its logs: a rotating file, like the supervisor's backend.log.

Why: uvicorn's default writes one access line per request to the terminal and keeps nothing;
a backend left running for weeks under `helix serve` (systemd, a terminal tab) then grows an
unbounded journal and loses its history on close. Here every line (access lines included)
goes to ``logs/serve.log``, rotated at ``[supervisor] log_max_bytes`` with ``log_backups``
old files kept, and only warnings and errors still reach stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helix_context.config import Settings

SERVE_LOG = "serve.log"


def serve_log_config(settings: Settings) -> tuple[dict[str, Any], Path]:
    """A logging.dictConfig for uvicorn.run(log_config=...) and the file it writes."""
    path = settings.logs_dir / SERVE_LOG
    path.parent.mkdir(parents=True, exist_ok=True)
    level = settings.server.log_level.upper()
    rotating = {"class": "logging.handlers.RotatingFileHandler", "filename": str(path), "encoding": "utf-8",
                "maxBytes": max(0, settings.supervisor.log_max_bytes),
                "backupCount": max(0, settings.supervisor.log_backups), "formatter": "plain"}
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
        "handlers": {
            "file": {**rotating, "level": level},
            "stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain",
                       "level": "WARNING"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["file", "stderr"], "level": level, "propagate": False},
            "uvicorn.error": {"level": level},
            "uvicorn.access": {"handlers": ["file"], "level": level, "propagate": False},
            "helix": {"handlers": ["file", "stderr"], "level": level, "propagate": False},
            # modules that log under their own name (re-embed progress, the model fallback, the tagger)
            "helix_context": {"handlers": ["file", "stderr"], "level": level, "propagate": False},
        },
    }
    return config, path
