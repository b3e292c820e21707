"""A connection for reads that walk a large part of the genome, so their pages never stay mapped.

Why: the genome's connections read through a memory map (`[genome] mmap_mb`, default
1 GB): fast for the scattered reads of a query, but every page a read touches stays
mapped, and counted in the server's resident memory, for as long as the connection
lives — one per thread. A count of the genes table or a scan of every vector (~1 GB
at 1M genes) would pin up to the whole map. Reads that walk the whole table open this
one instead (read-only, no map, a small page cache) and close it when done: the OS
still caches the pages, outside the process.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


def scan_connection(path: Path, timeout_s: float = 30.0) -> sqlite3.Connection:
    """Read-only, no memory map; the caller closes it."""
    conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True, timeout=timeout_s,
                           check_same_thread=False)
    conn.execute("PRAGMA mmap_size = 0")
    return conn
