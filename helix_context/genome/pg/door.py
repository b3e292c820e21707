"""PostgreSQL's side of the write door (genome/write_door.py): row locks, halfvec vectors, BM25 postings.

Why row locks: two backends may write at once (different sources; one indexer per source is
team.py's lock), so the genes a write may change are looked up FOR UPDATE, in id order; a
deadlock between two batches is still possible and the store retries the batch.

Why the postings writer buffers: each gene has a posting per distinct term, so row-by-row inserts
would set the pace of an ingest; the buffer goes in with one COPY per batch. A gene unindexed while
still buffered is dropped from the buffer; one already written has its document row deleted, and a
trigger deletes its postings by their key (term, gene), from the terms that row lists (schema.py:
V_KEY_ONLY_POSTINGS says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector

from helix_context.genome import fts_text
from helix_context.genome.pg import lexical
from helix_context.genome.stored_form import StoredForm, unpack_text


class PostingsWriter:
    """The BM25 postings of one PostgreSQL transaction (write_door.LexicalWriter).

    `index` only notes the gene; `flush` sends the rows in one COPY, tokenizing each gene whose
    parse worker did not already (stored_form.LexicalRows).
    """

    def __init__(self, raw: psycopg.Connection[tuple[Any, ...]]) -> None:
        self.raw = raw
        self.docs: dict[int, tuple[str | bytes, str, str | None, StoredForm | None]] = {}

    def index(self, rowid: int, content: str | bytes, tags: str, path: str | None, form: StoredForm | None) -> None:
        self.docs[rowid] = (content, tags, path, form)

    def unindex(self, rowid: int) -> None:
        if self.docs.pop(rowid, None) is None:  # its postings go with it (schema.py's trigger lex_docs_gone)
            self.raw.execute("DELETE FROM lex_docs WHERE gene = %s", (rowid,))

    def flush(self) -> None:
        """One COPY of every buffered gene's postings, in term order: the key's B-tree then takes them
        leaf by leaf instead of all over the tree (bench_team's 621k postings, in 46 batches: 3.4 -> 2.7
        server CPU s; sorting them here costs 0.2 s)."""
        if not self.docs:
            return
        rows: list[str] = []
        docs: list[str] = []
        for gene, (content, tags, path, form) in self.docs.items():
            ready = form.postings if form is not None else None
            if ready is not None and ready.tags == tags and ready.path == path:
                text, length, terms = ready.rows, ready.length, ready.terms
            else:
                body = form.fts_body if form is not None else fts_text.body_text(unpack_text(content))
                text, length, terms = lexical.gene_rows(body, tags, path)
            rows.append(text.replace("\n", f"\t{gene}\n"))  # each line ends with its gene
            docs.append(f"{gene}\t{length}\t{terms}\n")
        lines = "".join(rows).splitlines(keepends=True)
        lines.sort()
        with self.raw.cursor() as cur:
            with cur.copy("COPY lex_postings (term, tf_body, tf_tags, tf_path, doc_tokens, gene) FROM STDIN") as copy:
                copy.write("".join(lines))
            with cur.copy("COPY lex_docs (gene, tokens, terms) FROM STDIN") as copy:
                copy.write("".join(docs))
        self.docs.clear()


class PgDialect:
    """write_door.DoorDialect for PostgreSQL. The team genome holds one model's vectors (vector_model.py
    refuses a backend set to another), so "missing" means no vector at all."""

    lock_rows = " FOR UPDATE"
    vector_columns = ", embedding"
    vector_set = "embedding = ?"
    vector_missing = "embedding IS NULL"

    def vector_values(self, vector: np.ndarray | None) -> tuple[Any, ...]:
        return (None if vector is None else HalfVector(np.asarray(vector, dtype=np.float32)),)

    def vector_missing_values(self) -> tuple[Any, ...]:
        return ()

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """One array argument: the statement's text is the same for any number of values, so psycopg
        converts it once and the server can keep it prepared (a long IN list is parsed every time)."""
        return f"{column} = ANY(?)", [list(values)]

    def insert_genes(self, tx: Any, columns: str, rows: Sequence[tuple[Any, ...]]) -> list[tuple[int, str]]:
        """One short statement for all rows, pipelined by psycopg's executemany: one round trip."""
        marks = ", ".join(["%s"] * len(rows[0]))
        out: list[tuple[int, str]] = []
        with tx.conn.cursor() as cur:
            cur.executemany(f"INSERT INTO genes({columns}) VALUES ({marks}) ON CONFLICT (gene_id) DO NOTHING "
                            "RETURNING id, gene_id", rows, returning=True)
            while True:
                out.extend((int(r[0]), str(r[1])) for r in cur.fetchall())
                if not cur.nextset():
                    break
        return out

    def lexical(self, tx: Any) -> PostingsWriter:  # pg/store.PgTx (its raw connection runs the COPY)
        return PostingsWriter(tx.conn)
