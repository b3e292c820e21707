"""Schema and forward migrations, versioned with PRAGMA user_version.

Each entry of MIGRATIONS takes the genome from version i to i+1 and runs in
one transaction. A genome with a user_version above len(MIGRATIONS) was written
by a newer Helix and is refused before anything touches it.
"""

from __future__ import annotations

# FTS text derivation version: bump when fts_text.py changes how text is
# indexed; the store rebuilds the index on open (contentless FTS needs the exact
# old text to delete a row, so the index must match the current derivation).
# 2: identifier parts come from the tagger's word scan (dotted names, `$`).
# 3: rebuild once: before this, a gene revived in another file (a rename between two checkouts)
#    kept its old path and tags in its row, and a later delete left stale index entries behind
#    ("database disk image is malformed" on searches that scored them).
FTS_VERSION = 3
# the full-text index's tokenizer (V1 below spells it out; fts_terms.py tokenizes query words with it)
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2 tokenchars '_'"

V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE genes (
    id               INTEGER PRIMARY KEY,
    gene_id          TEXT NOT NULL UNIQUE,
    content          BLOB NOT NULL,  -- zlib-compressed UTF-8 (see store.pack_text)
    content_type     TEXT NOT NULL,
    language         TEXT,
    source_path      TEXT,
    project          TEXT,
    start_line       INTEGER NOT NULL DEFAULT 1,
    end_line         INTEGER NOT NULL DEFAULT 1,
    symbol           TEXT,
    tags             TEXT NOT NULL DEFAULT '',
    facts            TEXT NOT NULL DEFAULT '[]',
    source_kind      TEXT NOT NULL DEFAULT 'file',
    volatility_class TEXT NOT NULL DEFAULT 'stable',
    authority_class  TEXT NOT NULL DEFAULT 'primary',
    observed_at      REAL NOT NULL,
    last_verified_at REAL NOT NULL,
    source_mtime     REAL,
    source_hash      TEXT,
    org              TEXT NOT NULL DEFAULT '',
    device           TEXT NOT NULL DEFAULT '',
    user             TEXT NOT NULL DEFAULT '',
    agent            TEXT NOT NULL DEFAULT '',
    tier             TEXT NOT NULL DEFAULT 'open',
    access_count     INTEGER NOT NULL DEFAULT 0,
    last_access_at   REAL,
    retired_at       REAL,
    source_changed   INTEGER NOT NULL DEFAULT 0,
    embedding        BLOB
);
CREATE INDEX genes_source ON genes(source_path);
CREATE INDEX genes_project ON genes(project, tier);

-- every place a gene's content appears (identical chunks are stored once)
CREATE TABLE gene_sources (
    gene       INTEGER NOT NULL REFERENCES genes(id) ON DELETE CASCADE,
    path       TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL,
    PRIMARY KEY (path, start_line, gene)
) WITHOUT ROWID;
CREATE INDEX gene_sources_gene ON gene_sources(gene);

CREATE TABLE files (
    path         TEXT PRIMARY KEY,
    project      TEXT,
    size         INTEGER NOT NULL,
    mtime_ns     INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    genes        INTEGER NOT NULL DEFAULT 0,
    ingested_at  REAL NOT NULL
) WITHOUT ROWID;

-- genes delivered together before (a < b)
CREATE TABLE coactivation (
    a       INTEGER NOT NULL,
    b       INTEGER NOT NULL,
    count   INTEGER NOT NULL DEFAULT 0,
    last_at REAL NOT NULL,
    PRIMARY KEY (a, b)
) WITHOUT ROWID;
CREATE INDEX coactivation_b ON coactivation(b);

CREATE TABLE sessions (
    session_id      TEXT PRIMARY KEY,
    agent           TEXT NOT NULL DEFAULT '',
    first_seen      REAL NOT NULL,
    last_seen       REAL NOT NULL,
    requests        INTEGER NOT NULL DEFAULT 0,
    genes_delivered INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE session_buffer (
    id           INTEGER PRIMARY KEY,
    session_id   TEXT NOT NULL,
    role         TEXT NOT NULL,
    content      TEXT NOT NULL,
    at           REAL NOT NULL,
    consolidated INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX session_buffer_pending ON session_buffer(consolidated, session_id);

-- body: content + split identifier parts; tags; path tokens (see fts_text.py)
CREATE VIRTUAL TABLE genes_fts USING fts5(
    body, tags, path,
    content='',
    tokenize="porter unicode61 remove_diacritics 2 tokenchars '_'"
);
"""

# symbols: every function / method / class with its own span, whichever gene stores it.
# Files ingested before this version are re-parsed once by the next ingest (their
# hash is cleared), so their symbols appear without a manual step.
V2_SYMBOLS = """
CREATE TABLE symbols (
    id         INTEGER PRIMARY KEY,
    path       TEXT NOT NULL,
    gene       INTEGER NOT NULL,  -- the gene holding the symbol's first line
    name       TEXT NOT NULL,     -- qualified name: ZipFile._extract_member
    leaf       TEXT NOT NULL,     -- last part of the name, lowercased: definition lookups
    kind       TEXT NOT NULL,     -- function / method / class
    start_line INTEGER NOT NULL,
    end_line   INTEGER NOT NULL
);
CREATE INDEX symbols_path ON symbols(path);
CREATE INDEX symbols_gene ON symbols(gene);
CREATE INDEX symbols_leaf ON symbols(leaf);
UPDATE files SET content_hash = '';
-- document counts per indexed term: retrieval keeps a long query's rarest words
CREATE VIRTUAL TABLE genes_fts_vocab USING fts5vocab(genes_fts, row);
"""

# activity: ingests, packets and live-check events of every process sharing the genome (the
# dashboard's view of CLI work; genome/activity_sql.py). IF NOT EXISTS keeps it safe to reorder
# with other migrations.
V3_ACTIVITY = """
CREATE TABLE IF NOT EXISTS activity (
    id      INTEGER PRIMARY KEY,
    at      REAL NOT NULL,
    kind    TEXT NOT NULL,             -- ingest | packet | context
    actor   TEXT NOT NULL DEFAULT '',  -- which process: server, cli or a script, with its pid
    summary TEXT NOT NULL,             -- one line for people
    counts  TEXT NOT NULL DEFAULT '{}' -- JSON numbers: files, genes, verdicts, refreshed/dropped genes
);
CREATE INDEX IF NOT EXISTS activity_kind_at ON activity(kind, at);
"""

# sources: the folders the user chose to keep indexed and watched (see helix_context/sources/).
# `pending` holds a change recorded while no backend ran ('add', 'forget'), applied at the next start.
# `skipped` keeps at most [sources] max_skipped entries (JSON), `skipped_total` counts them all.
V4_SOURCES = """
CREATE TABLE sources (
    path          TEXT PRIMARY KEY,
    project       TEXT,
    added_at      REAL NOT NULL,
    last_indexed  REAL,
    files         INTEGER NOT NULL DEFAULT 0,
    genes         INTEGER NOT NULL DEFAULT 0,
    skipped       TEXT NOT NULL DEFAULT '[]',
    skipped_total INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    state         TEXT NOT NULL DEFAULT 'new',
    pending       TEXT
) WITHOUT ROWID;
"""

# vector_changes: which genes' vectors appeared, left or came back, so the dense index
# on disk (genome/ann.py) replays only what changed since it was saved (genome/vectors.py).
V5_VECTOR_LOG = """
CREATE TABLE vector_changes (
    seq  INTEGER PRIMARY KEY AUTOINCREMENT,
    gene INTEGER NOT NULL
);
CREATE TRIGGER genes_vector_insert AFTER INSERT ON genes WHEN NEW.embedding IS NOT NULL
BEGIN INSERT INTO vector_changes(gene) VALUES (NEW.id); END;
CREATE TRIGGER genes_vector_update AFTER UPDATE OF embedding, retired_at ON genes
WHEN NEW.embedding IS NOT OLD.embedding OR (NEW.retired_at IS NULL) != (OLD.retired_at IS NULL)
BEGIN INSERT INTO vector_changes(gene) VALUES (NEW.id); END;
CREATE TRIGGER genes_vector_delete AFTER DELETE ON genes WHEN OLD.embedding IS NOT NULL
BEGIN INSERT INTO vector_changes(gene) VALUES (OLD.id); END;
"""

# vector_model: which embedding model made each stored vector (ids in vector_models), so a search
# never compares vectors of two models and a model change re-embeds only what is stale
# (genome/vectors.py). Vectors stored before this version were all made by plain MiniLM.
V6_VECTOR_MODEL = """
CREATE TABLE vector_models (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE
);
INSERT INTO vector_models(id, name) VALUES (1, 'all-MiniLM-L6-v2-int8');
ALTER TABLE genes ADD COLUMN vector_model INTEGER;
UPDATE genes SET vector_model = 1 WHERE embedding IS NOT NULL;
INSERT OR REPLACE INTO meta(key, value) VALUES ('vector_model', 'all-MiniLM-L6-v2-int8');
DROP TRIGGER genes_vector_update;
CREATE TRIGGER genes_vector_update AFTER UPDATE OF embedding, vector_model, retired_at ON genes
WHEN NEW.embedding IS NOT OLD.embedding OR NEW.vector_model IS NOT OLD.vector_model
  OR (NEW.retired_at IS NULL) != (OLD.retired_at IS NULL)
BEGIN INSERT INTO vector_changes(gene) VALUES (NEW.id); END;
"""

# genes_live_project: each project's live gene ids from an index alone. The retriever reads them (and the
# live genes per project) again whenever the genome changed, so the first question after each edit paid
# for them: through the (project, tier) index every id was checked in its table row (96k genes: ~45 ms
# for the counts, ~100 ms for the ids, most of them reading rows whose content is the gene's text).
V7_LIVE_PROJECTS = """
CREATE INDEX genes_live_project ON genes(project, id) WHERE retired_at IS NULL;
"""

# symbols gain constants (Python, JS/TS, Go, Rust, Java, Ruby) and JS/TS functions bound to names (ingest/
# symbols.py): files of those languages ingested before this version are re-parsed once by the next ingest of
# their folder or a source's reconciling pass at start (no size matches -1, and no content the empty hash: the
# file is read and parsed again; its unchanged chunks keep their vectors), so "where is MAX_RETRIES set" finds
# the line in an existing genome too. The team genome's V_CONSTANTS is the same statement.
REPARSED_FOR_CONSTANTS = ("py", "pyw", "pyi", "pyx", "js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "go", "rs",
                          "java", "rb", "rake", "gemspec")


def reparse_files(suffixes: tuple[str, ...]) -> str:
    """The statement that has the next ingest read and parse again the indexed files with these suffixes."""
    return ("UPDATE files SET content_hash = '', size = -1 WHERE "
            + " OR ".join(f"path LIKE '%.{suffix}'" for suffix in suffixes) + ";")


V8_CONSTANTS = reparse_files(REPARSED_FOR_CONSTANTS)

# tree-sitter symbols corrected (ingest/symbols_tree.py): JS/TS functions a module assigns to a property
# (`exports.handler = ...`, `Cart.prototype.add = ...`), the classes and objects it exports, and its tests (`it(...)`);
# Go methods named for their receiver (`Server.Start`), Rust impl methods for their type (`Cart.add`); constructors,
# Kotlin's and Swift's declarations, C++ classes, R's, Julia's and Perl's functions and the <script> blocks of Vue,
# Svelte and HTML files found; enum members, accessors and bodies no longer taken for definitions. Those languages'
# files are re-parsed once more, as for V8. The team genome's V_TREE_SITTER_SYMBOLS is the same statement.
REPARSED_FOR_TREE_SITTER_SYMBOLS = ("js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "go", "rs", "java", "cs", "csx",
                                    "kt", "kts", "swift", "scala", "sc", "php", "dart", "sol", "cpp", "cc", "cxx",
                                    "c++", "hpp", "hh", "hxx", "h++", "ipp", "inl", "cu", "cuh", "m", "mm", "r", "jl",
                                    "pl", "pm", "vue", "svelte", "html", "htm", "xhtml")
V9_TREE_SITTER_SYMBOLS = reparse_files(REPARSED_FOR_TREE_SITTER_SYMBOLS)

# calls that define something (ingest/call_definitions.py): web routes' handlers (`app.get('/users/:id', ...)`,
# Gin's `r.GET(...)`, Sinatra's `get '/x' do`, `app.MapGet(...)`, `Route::get(...)`, Ktor's `get("{id}") {}`) named
# by method and path, RSpec's tests by their titles, what functions handed to calls define (an IIFE's, a Rails
# concern's) and Swift's `deinit`. Those languages' files are re-parsed once more, as for V8. The team genome's
# V_CALL_DEFINITIONS is the same statement.
REPARSED_FOR_CALL_DEFINITIONS = ("js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "go", "rb", "rake", "cs", "csx",
                                 "php", "phtml", "java", "kt", "kts", "swift", "vue", "svelte", "html", "htm",
                                 "xhtml")
V10_CALL_DEFINITIONS = reparse_files(REPARSED_FOR_CALL_DEFINITIONS)

# a definition's lines with what its grammar parses beside it (ingest/symbols_tree.py: _definition_symbol): the doc
# comment right above it (JSDoc, Javadoc, Go's and Rust's), TypeScript's decorators (`@Delete(':id')`), Rust's
# attributes and Dart's annotations, and a Dart function's body, which left its symbol spanning the signature's line
# alone; chunks keep a doc comment with its definition (chunk_code.py). Every file with symbols but Python's (whose
# scanner is unchanged) is re-parsed once more, as for V8. The team genome's V_DEFINITION_LINES is the same statement.
V11_DEFINITION_LINES = ("UPDATE files SET content_hash = '', size = -1 WHERE path IN (SELECT path FROM symbols) AND NOT ("
                        + " OR ".join(f"path LIKE '%.{suffix}'" for suffix in ("py", "pyw", "pyi", "pyx")) + ");")

# what wrapped JavaScript defines (ingest/call_definitions.py, symbols_tree.py): the other forms of an IIFE
# (`(function () {...}())`, `!function () {...}()`, `(function () {...}).call(this)`: lodash, underscore, UMD
# bundles), the functions defined inside a function a name is bound to (`var runInContext = (function
# runInContext(context) {...})`: lodash's 300 methods), and a name bound to a function a call wraps (`const getUser =
# asyncHandler(async (req, res) => {...})`, `React.forwardRef(...)`), which left such files with no symbols or a
# handful; and minified files define none. JS/TS files and the files <script> blocks are read from are re-parsed once more, with or without symbols,
# as for V8. The team genome's V_WRAPPED_FUNCTIONS is the same statement.
REPARSED_FOR_WRAPPED_FUNCTIONS = ("js", "mjs", "cjs", "jsx", "ts", "mts", "cts", "tsx", "vue", "svelte", "html", "htm",
                                  "xhtml")
V12_WRAPPED_FUNCTIONS = reparse_files(REPARSED_FOR_WRAPPED_FUNCTIONS)

# a Python definition's lines with the `#` comment block right above it (ingest/py_layout.comment_block_start: the
# rule the chunker already kept such a block with its definition by), which a function documented by comments instead
# of a docstring lost from its pointer's words and its span's vector. Python files are re-parsed once more, as for V8.
# The team genome's V_PYTHON_COMMENTS is the same statement.
REPARSED_FOR_PYTHON_COMMENTS = ("py", "pyw", "pyi", "pyx")
V13_PYTHON_COMMENTS = reparse_files(REPARSED_FOR_PYTHON_COMMENTS)

MIGRATIONS: tuple[str, ...] = (V1, V2_SYMBOLS, V3_ACTIVITY, V4_SOURCES, V5_VECTOR_LOG, V6_VECTOR_MODEL,
                               V7_LIVE_PROJECTS, V8_CONSTANTS, V9_TREE_SITTER_SYMBOLS, V10_CALL_DEFINITIONS,
                               V11_DEFINITION_LINES, V12_WRAPPED_FUNCTIONS, V13_PYTHON_COMMENTS)
SCHEMA_VERSION = len(MIGRATIONS)
