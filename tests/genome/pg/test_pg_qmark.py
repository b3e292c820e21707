"""The `?` SQL of genome/'s shared modules on PostgreSQL: an IN list becomes one array, every argument lands.

Against the real server: the same statement with lists of different lengths gives the rows SQLite's
form would, with one statement text (which the server can prepare once)."""

from __future__ import annotations

import psycopg

from helix_context.genome.pg.qmark import bind, rewrite


def test_in_lists_become_one_array_and_other_arguments_keep_their_place() -> None:
    sql, slots = rewrite("SELECT id FROM t WHERE a = ? AND id IN (?, ?,?) AND b NOT IN (?) AND c = ?")
    assert sql == "SELECT id FROM t WHERE a = %s AND id = ANY(%s) AND b <> ALL(%s) AND c = %s"
    assert bind(slots, ["x", 1, 2, 3, "y", "z"]) == ["x", [1, 2, 3], ["y"], "z"]
    assert rewrite("SELECT 1")[1] == ()


def test_rewritten_lists_select_what_the_lists_name(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id bigint, tag text)")
        conn.execute("INSERT INTO t SELECT g, CASE WHEN g % 2 = 0 THEN 'even' ELSE 'odd' END "
                     "FROM generate_series(1, 50) AS g")
        texts = set()
        for ids in ([3], [4, 5, 6], list(range(1, 40))):
            marks = ", ".join("?" * len(ids))
            sql, slots = rewrite(f"SELECT id FROM t WHERE tag = ? AND id IN ({marks}) ORDER BY id")
            texts.add(sql)
            got = [r[0] for r in conn.execute(sql, bind(slots, ["even", *ids]))]
            assert got == [i for i in ids if i % 2 == 0]
        assert len(texts) == 1  # one statement text whatever the list's length
