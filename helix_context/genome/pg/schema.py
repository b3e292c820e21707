"""The PostgreSQL genome's schema: forward migrations, versioned in helix_meta('schema_version').

Each entry takes the database from version i to i+1 in one transaction, under an advisory
lock so two backends starting together migrate once. A database at a higher version than
this Helix knows was migrated by a newer Helix: this one still reads it but refuses every
write (store.py checks the version inside each write transaction), and says why.

Per-person state (sessions, their chat buffer, co-activation, activity) carries its party
(user@device), so a shared database never mixes one developer's history into another's.
"""

from __future__ import annotations

from helix_context.genome.schema import (V8_CONSTANTS, V9_TREE_SITTER_SYMBOLS, V10_CALL_DEFINITIONS,
                                         V11_DEFINITION_LINES, V12_WRAPPED_FUNCTIONS,
                                         V13_PYTHON_COMMENTS)

MIGRATE_LOCK = 0x48454C4958  # "HELIX": the advisory lock key that serialises migrations

V1 = """
CREATE TABLE helix_meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);
CREATE SEQUENCE helix_generation;

CREATE TABLE genes (
    id               bigserial PRIMARY KEY,
    gene_id          text NOT NULL UNIQUE,
    content          bytea NOT NULL,
    content_type     text NOT NULL,
    language         text,
    source_path      text,
    project          text,
    start_line       integer NOT NULL DEFAULT 1,
    end_line         integer NOT NULL DEFAULT 1,
    symbol           text,
    tags             text NOT NULL DEFAULT '',
    facts            text NOT NULL DEFAULT '[]',
    source_kind      text NOT NULL DEFAULT 'file',
    volatility_class text NOT NULL DEFAULT 'stable',
    authority_class  text NOT NULL DEFAULT 'primary',
    observed_at      double precision NOT NULL,
    last_verified_at double precision NOT NULL,
    source_mtime     double precision,
    source_hash      text,
    org              text NOT NULL DEFAULT '',
    device           text NOT NULL DEFAULT '',
    "user"           text NOT NULL DEFAULT '',
    agent            text NOT NULL DEFAULT '',
    tier             text NOT NULL DEFAULT 'open',
    access_count     integer NOT NULL DEFAULT 0,
    last_access_at   double precision,
    retired_at       double precision,
    source_changed   smallint NOT NULL DEFAULT 0,
    embedding        halfvec(384)
);
CREATE INDEX genes_source ON genes(source_path);
CREATE INDEX genes_project ON genes(project, tier);
CREATE INDEX genes_embedding ON genes USING hnsw (embedding halfvec_cosine_ops) WHERE retired_at IS NULL;

CREATE TABLE gene_sources (
    gene       bigint NOT NULL REFERENCES genes(id) ON DELETE CASCADE,
    path       text NOT NULL,
    start_line integer NOT NULL,
    end_line   integer NOT NULL,
    PRIMARY KEY (path, start_line, gene)
);
CREATE INDEX gene_sources_gene ON gene_sources(gene);

CREATE TABLE files (
    path         text PRIMARY KEY,
    project      text,
    size         bigint NOT NULL,
    mtime_ns     bigint NOT NULL,
    content_hash text NOT NULL,
    genes        integer NOT NULL DEFAULT 0,
    ingested_at  double precision NOT NULL
);

CREATE TABLE symbols (
    id         bigserial PRIMARY KEY,
    path       text NOT NULL,
    gene       bigint NOT NULL,
    name       text NOT NULL,
    leaf       text NOT NULL,
    kind       text NOT NULL,
    start_line integer NOT NULL,
    end_line   integer NOT NULL
);
CREATE INDEX symbols_path ON symbols(path);
CREATE INDEX symbols_gene ON symbols(gene);
CREATE INDEX symbols_leaf ON symbols(leaf);

-- lexical search: one row per (stemmed term, live gene) with its count in each column (lexical.py)
CREATE TABLE lex_postings (
    term    text NOT NULL,
    gene    bigint NOT NULL REFERENCES genes(id) ON DELETE CASCADE,
    tf_body integer NOT NULL,
    tf_tags integer NOT NULL,
    tf_path integer NOT NULL,
    doc_tokens integer NOT NULL,  -- the gene's length (lex_docs.tokens), here so a search joins nothing
    PRIMARY KEY (term, gene)
);
CREATE INDEX lex_postings_gene ON lex_postings(gene);
-- a live gene's token count over all columns (BM25's document length)
CREATE TABLE lex_docs (
    gene   bigint PRIMARY KEY REFERENCES genes(id) ON DELETE CASCADE,
    tokens integer NOT NULL
);

CREATE TABLE sources (
    path          text PRIMARY KEY,
    project       text,
    added_at      double precision NOT NULL,
    last_indexed  double precision,
    files         integer NOT NULL DEFAULT 0,
    genes         integer NOT NULL DEFAULT 0,
    skipped       text NOT NULL DEFAULT '[]',
    skipped_total integer NOT NULL DEFAULT 0,
    last_error    text,
    state         text NOT NULL DEFAULT 'new',
    pending       text
);

CREATE TABLE coactivation (
    party   text NOT NULL,
    a       bigint NOT NULL,
    b       bigint NOT NULL,
    count   integer NOT NULL DEFAULT 0,
    last_at double precision NOT NULL,
    PRIMARY KEY (party, a, b)
);
CREATE INDEX coactivation_age ON coactivation(party, last_at);
CREATE TABLE sessions (
    party           text NOT NULL,
    session_id      text NOT NULL,
    agent           text NOT NULL DEFAULT '',
    first_seen      double precision NOT NULL,
    last_seen       double precision NOT NULL,
    requests        integer NOT NULL DEFAULT 0,
    genes_delivered integer NOT NULL DEFAULT 0,
    PRIMARY KEY (party, session_id)
);
CREATE TABLE session_buffer (
    id           bigserial PRIMARY KEY,
    party        text NOT NULL,
    session_id   text NOT NULL,
    role         text NOT NULL,
    content      text NOT NULL,
    at           double precision NOT NULL,
    consolidated smallint NOT NULL DEFAULT 0
);
CREATE INDEX session_buffer_pending ON session_buffer(party, consolidated, session_id);
CREATE TABLE activity (
    id      bigserial PRIMARY KEY,
    party   text NOT NULL,
    at      double precision NOT NULL,
    kind    text NOT NULL,
    actor   text NOT NULL DEFAULT '',
    summary text NOT NULL,
    counts  text NOT NULL DEFAULT '{}'
);
CREATE INDEX activity_kind_at ON activity(party, kind, at);
"""

# co-activation weights decay by a factor at each prune (genome/retention.py): a fraction, not a count
V2_DECAYING_WEIGHTS = """
ALTER TABLE coactivation ALTER COLUMN count TYPE double precision;
"""

# Reads of each question (issue 27 part B). Lexical search reads only the index: the postings' key
# carries each row's counts and document length (INCLUDE), so a word's postings come from the index
# pages alone (an index-only scan),
# not one table page per posting (bench_team.py: a 3-word search read 1,279 pages before, 35 after).
V_COVERING_POSTINGS = """
ALTER TABLE lex_postings DROP CONSTRAINT lex_postings_pkey;
ALTER TABLE lex_postings ADD CONSTRAINT lex_postings_pkey PRIMARY KEY (term, gene)
    INCLUDE (tf_body, tf_tags, tf_path, doc_tokens);
-- co-activation is read from both ends of a pair each question (store.coactivated): the key serves
-- `a = ANY(…)`, this index `b = ANY(…)` (else a scan of the party's pairs, which grow with use)
CREATE INDEX coactivation_b ON coactivation(party, b);
"""

# Ingest (issue 27: ingest >= 0.5x SQLite's MB/s). COPY into lex_postings was most of the server's
# ingest work, and most of that was not the rows' own key: the foreign key ran a lookup of the gene
# per posting (~60 per gene) and the second index (gene) took every row again. Measured on the
# bench_team corpus (621k postings COPYed in 46 batches, server CPU): 8.1 s with both, 3.6 s without
# the foreign key, 2.0 s without either. The write door already keeps postings with their genes (it
# unindexes a gene before it deletes or retires it, under the gene's row lock), so the key is
# dropped; the gene index only served deletes, which now go through the primary key: each document
# row keeps its gene's distinct terms (`terms`, space-separated), and a trigger deletes a document
# row's postings as (term, gene) pairs through the key whenever the row goes: unindexed by the write
# door, or deleted with its gene (lex_docs keeps its cascading key, one row per gene), so the database
# itself still keeps no posting of a gene that is gone, as the foreign key's cascade did, even when two
# writers race. The terms are kept rather than re-tokenized from the gene's text, so deletes stay exact
# across a tokenizer change. Existing rows are filled from the postings (through the gene index, before
# it goes). A trigger fires on deletes only: a COPY of new postings pays nothing for it.
V_KEY_ONLY_POSTINGS = """
ALTER TABLE lex_docs ADD COLUMN terms text;
UPDATE lex_docs d SET terms = COALESCE((SELECT string_agg(p.term, ' ') FROM lex_postings p WHERE p.gene = d.gene), '');
ALTER TABLE lex_docs ALTER COLUMN terms SET NOT NULL;
ALTER TABLE lex_postings DROP CONSTRAINT lex_postings_gene_fkey;
DROP INDEX lex_postings_gene;
CREATE FUNCTION helix_lex_docs_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM lex_postings p USING unnest(string_to_array(OLD.terms, ' ')) AS t(term)
        WHERE p.term = t.term AND p.gene = OLD.gene;
    RETURN NULL;
END $$;
CREATE TRIGGER lex_docs_gone AFTER DELETE ON lex_docs FOR EACH ROW EXECUTE FUNCTION helix_lex_docs_gone();
"""

# Each term's document counts kept as the postings change (issue 27: 8 clients at 100k genes). Retrieval
# weighs every word of a question by how many genes hold it; counted from the postings that was a pass
# over each new word's postings (6.9 ms of a 14 ms question at 96k genes, profile_team_reads.py), and
# every write by any teammate empties each backend's remembered counts (read_stats.py). Kept here, a
# count is one key lookup. Statement triggers on lex_postings keep them, so every path that adds or
# removes postings (the write door's COPY, the document rows' delete trigger, a gene deleted by hand)
# keeps them exact; each statement's terms are added in term order, so two writers take the rows'
# locks in one order. A term no gene holds any more loses its row (bounded by the live vocabulary).
V_TERM_COUNTS = """
CREATE TABLE lex_terms (
    term   text PRIMARY KEY,
    n_all  integer NOT NULL,  -- genes holding the term in any column
    n_body integer NOT NULL,
    n_tags integer NOT NULL,
    n_path integer NOT NULL,
    -- new whenever the term lost a gene or its row was made: a reader's copy of the term's gene ids
    -- stays good under the same stamp, as long as only new genes (higher ids) joined (posting_sets.py)
    stamp  bigint NOT NULL
) WITH (fillfactor = 70);  -- room on each page for updates that need no index change (HOT)
CREATE SEQUENCE lex_terms_stamp OWNED BY lex_terms.stamp;
INSERT INTO lex_terms
    SELECT term, count(*), count(*) FILTER (WHERE tf_body > 0), count(*) FILTER (WHERE tf_tags > 0),
           count(*) FILTER (WHERE tf_path > 0), nextval('lex_terms_stamp')
    FROM lex_postings GROUP BY term;
CREATE FUNCTION helix_lex_terms_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lex_terms AS t (term, n_all, n_body, n_tags, n_path, stamp)
        SELECT term, count(*), count(*) FILTER (WHERE tf_body > 0), count(*) FILTER (WHERE tf_tags > 0),
               count(*) FILTER (WHERE tf_path > 0), nextval('lex_terms_stamp')
        FROM added GROUP BY term ORDER BY term
    ON CONFLICT (term) DO UPDATE SET n_all = t.n_all + excluded.n_all, n_body = t.n_body + excluded.n_body,
        n_tags = t.n_tags + excluded.n_tags, n_path = t.n_path + excluded.n_path;
    RETURN NULL;
END $$;
CREATE FUNCTION helix_lex_terms_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO lex_terms AS t (term, n_all, n_body, n_tags, n_path, stamp)
        SELECT term, -count(*), -count(*) FILTER (WHERE tf_body > 0), -count(*) FILTER (WHERE tf_tags > 0),
               -count(*) FILTER (WHERE tf_path > 0), nextval('lex_terms_stamp')
        FROM removed GROUP BY term ORDER BY term
    ON CONFLICT (term) DO UPDATE SET n_all = t.n_all + excluded.n_all, n_body = t.n_body + excluded.n_body,
        n_tags = t.n_tags + excluded.n_tags, n_path = t.n_path + excluded.n_path, stamp = excluded.stamp;
    DELETE FROM lex_terms t USING (SELECT DISTINCT term FROM removed) AS r WHERE t.term = r.term AND t.n_all <= 0;
    RETURN NULL;
END $$;
CREATE TRIGGER lex_terms_added AFTER INSERT ON lex_postings REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION helix_lex_terms_added();
CREATE TRIGGER lex_terms_removed AFTER DELETE ON lex_postings REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION helix_lex_terms_removed();
"""

# each project's live gene ids and counts from an index alone, as on SQLite (genome/schema.py: V7_LIVE_PROJECTS)
V_LIVE_PROJECTS = """
CREATE INDEX genes_live_project ON genes(project, id) WHERE retired_at IS NULL;
"""

# constants become symbols: the next ingest re-parses those languages' files, as on SQLite
V_CONSTANTS = V8_CONSTANTS
# tree-sitter symbols corrected (JS/TS assigned functions, Go receivers, Rust impls, ...): the next ingest
# re-parses those languages' files, as on SQLite
V_TREE_SITTER_SYMBOLS = V9_TREE_SITTER_SYMBOLS
# routes' handlers and RSpec's tests become symbols: the next ingest re-parses those languages' files, as on SQLite
V_CALL_DEFINITIONS = V10_CALL_DEFINITIONS
# doc comments, decorators, attributes and annotations above a definition, and Dart's bodies, in its lines: the
# next ingest re-parses every file with symbols but Python's, as on SQLite
V_DEFINITION_LINES = V11_DEFINITION_LINES
# the other IIFE forms and the functions a bound function defines inside: the next ingest re-parses JS/TS files and
# the files <script> blocks are read from, as on SQLite
V_WRAPPED_FUNCTIONS = V12_WRAPPED_FUNCTIONS
# a Python definition's lines with the comment block right above it: the next ingest re-parses Python files, as on
# SQLite
V_PYTHON_COMMENTS = V13_PYTHON_COMMENTS

MIGRATIONS: tuple[str, ...] = (V1, V2_DECAYING_WEIGHTS, V_COVERING_POSTINGS, V_KEY_ONLY_POSTINGS, V_TERM_COUNTS,
                               V_LIVE_PROJECTS, V_CONSTANTS, V_TREE_SITTER_SYMBOLS, V_CALL_DEFINITIONS,
                               V_DEFINITION_LINES, V_WRAPPED_FUNCTIONS, V_PYTHON_COMMENTS)
SCHEMA_VERSION = len(MIGRATIONS)
