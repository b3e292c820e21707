"""A connection for reads that walk a large part of the genome, so their pages never stay mapped.

Why: the genome's connections may read through a memory map (`[genome] mmap_mb`, off
by default), and every page a read touches then stays mapped, counted in the server's
resident memory, for as long as the connection lives — one per thread; without the map
each connection keeps up to 32 MB of pages in its own cache. A count of the genes table
or a scan of every vector (~1.5 GB at 1M genes) would fill either. Reads that walk the
whole table open this one instead (read-only, no map, SQLite's small default cache) and
close it when done: the OS still caches the pages, outside the process.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def scan_connection(path: Path, timeout_s: float = 30.0, *, immutable: bool = False) -> sqlite3.Connection:
    """Read-only, no memory map; the caller closes it. `immutable`: the genome's disk is full (store.py),
    so not even a lock file can be made."""
    flags = "mode=ro&immutable=1" if immutable else "mode=ro"
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?{flags}", uri=True, timeout=timeout_s,
                           check_same_thread=False)
    conn.execute("PRAGMA mmap_size = 0")
    return conn
