"""The PostgreSQL genome: a team's shared index on a real database server (pgvector for dense search).

connect.py opens and checks the server, schema.py holds the versioned migrations, lexical.py
the BM25 postings, store.py the write door and the reads retrieval calls, team.py the
one-indexer-per-source lock and the change notifications. psycopg is imported only here.
"""
