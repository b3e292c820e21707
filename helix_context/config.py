"""Settings: helix.toml + HELIX_* environment → one frozen, typed object.

Every process (backend, supervisor, tray, CLI, MCP server) reads its settings
through `load_config()`, so a typo in helix.toml fails the same way everywhere:
at start-up, naming the key and the file, instead of being silently ignored.

Environment overrides: any setting can be set as ``HELIX_<SECTION>_<KEY>``
(e.g. ``HELIX_SERVER_PORT=11500``); a few historic names are kept as aliases
(``HELIX_BUDGET_ZONE``, ``HELIX_DISABLE_HEADROOM``, ``HELIX_OTEL_ENABLED``,
``HELIX_OTEL_ENDPOINT``, ``HELIX_MCP_URL``).
"""

from __future__ import annotations

import dataclasses
import math
import getpass
import logging
import os
import platform
import tomllib
import types
import typing
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helix_context.errors import ConfigError
from helix_context.redact import redact_url

log = logging.getLogger(__name__)

DEFAULT_PORT = 11437


@dataclass(frozen=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    max_body_bytes: int = 8_000_000
    allowed_ingest_roots: tuple[str, ...] = ()
    log_level: str = "info"
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides loopback and `host` (DNS-rebinding guard)


@dataclass(frozen=True)
class GenomeSettings:
    path: str = ""  # empty: HELIX_HOME/genome.db
    url: str = ""  # postgresql://… (or HELIX_GENOME_URL): a shared team genome on PostgreSQL; empty: the SQLite file
    busy_timeout_ms: int = 10_000
    aging_after_days: float = 30.0  # genes neither delivered nor re-verified this long become "aging"
    mmap_mb: int = 0  # genome read through a memory map up to this size per connection (0: off); see README, at scale


@dataclass(frozen=True)
class IngestSettings:
    max_file_bytes: int = 2_000_000
    max_chunk_chars: int = 2_400
    respect_gitignore: bool = True
    ignore: tuple[str, ...] = ()
    follow_symlinks: bool = False
    read_timeout_s: float = 10.0  # a file whose read takes longer (a hung FUSE or network file) is skipped
    workers: int = 0  # processes that parse files (N >= 2: N workers); 0 = one per core (at most 8); 1 = none


@dataclass(frozen=True)
class RetentionSettings:
    """How long bookkeeping tables keep rows (genes themselves follow their files, not this)."""

    coactivation_per_gene: int = 32  # strongest co-activation edges kept per gene
    coactivation_half_life_days: float = 14.0  # an edge's weight halves this often
    coactivation_min_weight: float = 0.05  # decayed edges lighter than this are deleted
    session_ttl_days: float = 30.0  # sessions and chat-buffer rows not seen this long are deleted
    max_sessions: int = 5_000  # most recent sessions kept
    max_buffer_rows: int = 50_000  # most recent chat-buffer rows kept (consolidated rows go at once)
    prune_every: int = 500  # deliveries between prunes
    prune_interval_s: float = 300.0  # and at least this often while the server runs


@dataclass(frozen=True)
class SourcesSettings:
    watch: bool = True  # watch the folders of `helix sources` for changes (false: index on add and at start only)
    force_polling: bool = False  # poll instead of native events (network drives, some containers)
    poll_interval_ms: int = 1_000  # how often polling looks, when force_polling is on
    debounce_ms: int = 1_000  # a burst of changes is gathered for at most this long before indexing
    quiet_ms: int = 100  # ... and ends early once no change came for this long
    missing_check_s: float = 5.0  # how often a vanished folder is looked for again
    max_skipped: int = 50  # skipped files kept per folder (with reasons); the total is always counted
    # a team genome follows one branch (sources/branch.py): "" = the remote default branch the checkout records
    follow_branch: str = ""


@dataclass(frozen=True)
class EmbeddingSettings:
    enabled: bool = True
    batch_size: int = 8  # texts per model call; one call per core runs at a time (8-16 measured fastest)
    max_tokens: int = 128  # prose, config and logs: each gene is embedded from its first N word pieces
    code_max_tokens: int = 32  # code: N word pieces of a digest (names, comments, then code); see embed_text.py
    model: str = "minilm"  # minilm | code-minilm (ingest/embed_models.py); a change re-embeds in the background


@dataclass(frozen=True)
class NerSettings:
    enabled: bool = True
    model: str = "en_core_web_sm"
    file_chars: int = 300  # characters of each file's prose the model reads; the rest gets regex names


@dataclass(frozen=True)
class RetrievalSettings:
    max_genes: int = 12
    fusion: str = "weighted"  # weighted | rrf
    score_floor: float = 0.35  # fraction of the top fused score
    abstain_below: float = 0.0
    candidate_pool: int = 200
    # one index, many projects (retrieve/scope.py, weigh/silence.py): an unscoped question is answered
    # from the project its evidence leads to; a message about nothing indexed gets no context
    scope_by_evidence: bool = True
    silence: bool = True
    ann_threshold: int = 20_000  # live vectors from which dense search uses the HNSW graph instead of a scan
    weight_fts: float = 0.8
    weight_tags: float = 0.6
    weight_path: float = 0.5
    weight_path_terms: float = 0.2
    weight_dense: float = 1.0
    weight_coactivation: float = 0.15
    weight_definition: float = 0.8
    locate_gene: float = 1.0
    locate_symbol: float = 0.6
    locate_definition: float = 0.8
    locate_name: float = 0.3
    locate_tests: float = 0.3
    locate_file_mass: float = 1.5
    # genes of code are weighed with these (chosen on code questions; the weight_* above on prose)
    code_weight_fts: float = 1.2
    code_weight_tags: float = 0.6
    code_weight_path: float = 0.5
    code_weight_path_terms: float = 0.1
    code_weight_dense: float = 1.5
    code_weight_coactivation: float = 0.0
    code_weight_definition: float = 2.0
    # question-aware weighting of code (retrieve/question.py): the code weights above serve text full of
    # names, paths and tracebacks (lexicality 1); a question in plain words (lexicality 0) multiplies the
    # dense weights by question_dense and the lexical ones by question_lexical; linear in between
    question_dense: float = 1.5
    question_lexical: float = 0.4
    # the same for a pointer's own evidence (locate.py): at lexicality 0 its span's words (locate_symbol) and its
    # span's cosine (locate_dense) count these many times what they count for an issue, against its gene's score;
    # from lexicality 0.5 (an issue's) not at all, linear in between
    question_span_lexical: float = 2.4
    question_span_dense: float = 4.5
    # …and a file's header (its lines before its first definition: docstring, imports) counts this much of its
    # score, as a question in words asks for a function or a class, which the header only sums up
    question_header: float = 0.7
    # pointer score: + the span's own cosine to the query (span_dense.py); None: the embedding model's own
    # weight (ingest/embed_models.LOCATE_DENSE), since a better model's span cosines deserve more trust
    locate_dense: float | None = None


@dataclass(frozen=True)
class BudgetSettings:
    token_budget: int = 12_000
    zone_enabled: bool = False
    default_context_window: int = 8_192
    answer_reserve_tokens: int = 1_024
    zone_max_fraction: float = 0.5


@dataclass(frozen=True)
class AssemblySettings:
    decoder_mode: str = "condensed"  # full | condensed | minimal | none
    headroom: bool = True
    compress_min_tokens: int = 200  # smaller genes go in verbatim when they fit: little to gain, readability to lose
    small_model_max_params_b: float = 3.0
    answer_slate_tokens: int = 200


@dataclass(frozen=True)
class WeighSettings:
    half_life_stable_s: float = 7 * 86_400.0
    half_life_medium_s: float = 12 * 3_600.0
    half_life_hot_s: float = 15 * 60.0
    coordinate_floor: float = 0.30
    verified_threshold: float = 0.5
    # relevance (weigh/relevance.py: share of the query's idf mass an item holds), calibrated by
    # benchmarks/bench_verdicts.py on off-topic and on-topic queries: an answer whose best item holds less
    # than relevance_floor is "known empty"; an item is "verified" only from relevance_verified up
    # (scaled per task type: planning and explaining tolerate less, editing and debugging need more)
    relevance_floor: float = 0.25
    relevance_verified: float = 0.50


@dataclass(frozen=True)
class ProxySettings:
    upstream_url: str = "http://127.0.0.1:11434"
    upstream_kind: str = "auto"  # auto | ollama | openai
    timeout_s: float = 120.0
    connect_timeout_s: float = 5.0
    inject_context: bool = True
    default_model: str = ""
    # the project a chat is scoped to when it sends no X-Helix-Project: per model ("model=project", the
    # first match wins; a model name may end in * to match a prefix), else `project`; empty: evidence decides
    model_projects: tuple[str, ...] = ()
    project: str = ""
    api_key: str = ""  # sent as a Bearer token to an OpenAI-compatible upstream that needs one


@dataclass(frozen=True)
class RibosomeSettings:
    enabled: bool = False
    model: str = ""
    timeout_s: float = 5.0


@dataclass(frozen=True)
class SupervisorSettings:
    health_interval_s: float = 1.0
    health_timeout_s: float = 2.0
    hung_after_failures: int = 3
    start_timeout_s: float = 30.0
    stop_timeout_s: float = 5.0
    backoff_initial_s: float = 0.25
    backoff_max_s: float = 30.0
    flap_window_s: float = 60.0
    flap_max_restarts: int = 5
    budget_zone: bool = True
    log_max_bytes: int = 5_000_000
    log_backups: int = 3


@dataclass(frozen=True)
class WatcherSettings:
    gpu_interval_s: float = 5.0
    ollama_interval_s: float = 5.0
    ollama_url: str = "http://127.0.0.1:11434"
    vram_pressure_pct: float = 90.0
    chat_model: str = ""
    allowed_models: tuple[str, ...] = ()
    pressure_action: str = "notify"  # notify | pause_ribosome | unload_ribosome


@dataclass(frozen=True)
class TelemetrySettings:
    enabled: bool = False
    endpoint: str = "http://127.0.0.1:4318"
    protocol: str = "http"  # http | grpc
    export_interval_s: float = 10.0
    include_query_text: bool = False
    grafana_url: str = ""


@dataclass(frozen=True)
class McpSettings:
    url: str = ""  # empty: http://<server.host>:<server.port>
    max_tokens: int = 20_000
    timeout_s: float = 30.0


@dataclass(frozen=True)
class Attribution:
    org: str
    device: str
    user: str
    agent: str


# Every number is finite and at least 0 (no setting means anything below); these need more, or less.
_MINIMUMS: dict[tuple[str, str], float] = {
    ("server", "port"): 1,
    ("ingest", "max_file_bytes"): 1,
    ("ingest", "max_chunk_chars"): 200,  # below this a chunk is a line or two: a file became dozens of genes
    ("ingest", "read_timeout_s"): 0.1,
    ("retrieval", "max_genes"): 1,
    ("retrieval", "candidate_pool"): 1,
    ("budget", "token_budget"): 1,
    ("budget", "default_context_window"): 1,
    ("retention", "coactivation_per_gene"): 1,
    ("retention", "max_sessions"): 1,
    ("retention", "max_buffer_rows"): 1,
    ("retention", "prune_every"): 1,
    ("ingest", "workers"): 0,
    ("embedding", "batch_size"): 1,
    ("embedding", "max_tokens"): 2,  # [CLS] and [SEP]
    ("embedding", "code_max_tokens"): 2,
    ("sources", "poll_interval_ms"): 50,
    ("sources", "debounce_ms"): 10,
    ("sources", "quiet_ms"): 10,
    ("sources", "max_skipped"): 0,
    ("sources", "missing_check_s"): 1,
    ("retrieval", "ann_threshold"): 0,
    ("genome", "mmap_mb"): 0,
    ("ner", "file_chars"): 0,
}

_MAXIMUMS: dict[tuple[str, str], float] = {
    ("server", "port"): 65_535,
    ("ingest", "max_chunk_chars"): 20_000,  # portable/validate.py refuses imported genes past 65,536 characters
    ("retrieval", "score_floor"): 1.0,  # fractions of the best score
    ("retrieval", "abstain_below"): 1.0,
    ("budget", "zone_max_fraction"): 1.0,
}

_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("retrieval", "fusion"): ("weighted", "rrf"),
    ("assembly", "decoder_mode"): ("full", "condensed", "minimal", "none"),
    ("proxy", "upstream_kind"): ("auto", "ollama", "openai"),
    ("watchers", "pressure_action"): ("notify", "pause_ribosome", "unload_ribosome"),
    ("telemetry", "protocol"): ("http", "grpc"),
    ("embedding", "model"): ("minilm", "code-minilm"),
}

_SECTIONS: dict[str, type] = {
    "server": ServerSettings,
    "genome": GenomeSettings,
    "ingest": IngestSettings,
    "sources": SourcesSettings,
    "embedding": EmbeddingSettings,
    "ner": NerSettings,
    "retrieval": RetrievalSettings,
    "budget": BudgetSettings,
    "assembly": AssemblySettings,
    "weigh": WeighSettings,
    "proxy": ProxySettings,
    "ribosome": RibosomeSettings,
    "supervisor": SupervisorSettings,
    "watchers": WatcherSettings,
    "telemetry": TelemetrySettings,
    "mcp": McpSettings,
    "retention": RetentionSettings,
}

_ENV_ALIASES: dict[str, tuple[str, str]] = {
    "HELIX_BUDGET_ZONE": ("budget", "zone_enabled"),
    "HELIX_DISABLE_HEADROOM": ("assembly", "headroom"),  # inverted below
    "HELIX_OTEL_ENABLED": ("telemetry", "enabled"),
    "HELIX_OTEL_ENDPOINT": ("telemetry", "endpoint"),
    "HELIX_MCP_URL": ("mcp", "url"),
    "HELIX_HOST": ("server", "host"),
    "HELIX_PORT": ("server", "port"),
}


@dataclass(frozen=True)
class Settings:
    home: Path
    config_path: Path | None
    server: ServerSettings = field(default_factory=ServerSettings)
    genome: GenomeSettings = field(default_factory=GenomeSettings)
    ingest: IngestSettings = field(default_factory=IngestSettings)
    sources: SourcesSettings = field(default_factory=SourcesSettings)
    embedding: EmbeddingSettings = field(default_factory=EmbeddingSettings)
    ner: NerSettings = field(default_factory=NerSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    assembly: AssemblySettings = field(default_factory=AssemblySettings)
    weigh: WeighSettings = field(default_factory=WeighSettings)
    proxy: ProxySettings = field(default_factory=ProxySettings)
    ribosome: RibosomeSettings = field(default_factory=RibosomeSettings)
    supervisor: SupervisorSettings = field(default_factory=SupervisorSettings)
    watchers: WatcherSettings = field(default_factory=WatcherSettings)
    telemetry: TelemetrySettings = field(default_factory=TelemetrySettings)
    mcp: McpSettings = field(default_factory=McpSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    synonyms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    api_key: str = ""
    attribution: Attribution = field(
        default_factory=lambda: Attribution("local", platform.node() or "device", "user", "cli")
    )

    @property
    def genome_path(self) -> Path:
        return Path(self.genome.path).expanduser() if self.genome.path else self.home / "genome.db"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def signals_dir(self) -> Path:
        return self.home / "shared" / "signals"

    @property
    def base_url(self) -> str:
        host = self.server.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.server.port}"

    @property
    def mcp_url(self) -> str:
        return self.mcp.url or self.base_url

    def replace(self, **sections: Any) -> Settings:
        """Copy with whole sections or single keys changed: replace(server={"port": 1})."""
        changes: dict[str, Any] = {}
        for name, value in sections.items():
            current = getattr(self, name)
            if isinstance(value, dict) and dataclasses.is_dataclass(current) and not isinstance(current, type):
                changes[name] = dataclasses.replace(current, **value)
            else:
                changes[name] = value
        return dataclasses.replace(self, **changes)


def default_home() -> Path:
    env = os.environ.get("HELIX_HOME")
    return Path(env).expanduser() if env else Path.home() / ".helix"


def _repo_config() -> Path | None:
    """helix.toml next to the source tree (an editable install), else the CWD's."""
    for candidate in (Path(__file__).resolve().parent.parent / "helix.toml", Path.cwd() / "helix.toml"):
        if candidate.is_file():
            return candidate
    return None


def find_config_path() -> Path | None:
    env = os.environ.get("HELIX_CONFIG")
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            raise ConfigError(f"HELIX_CONFIG points at {path}, which is not a file. Fix the path or unset HELIX_CONFIG.")
        return path
    home_cfg = default_home() / "helix.toml"
    if home_cfg.is_file():
        return home_cfg
    return _repo_config()


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", str(tp))


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """Check a TOML value against the dataclass field type; return it normalised."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(value, args[0], where)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where} must be a list, got {type(value).__name__} ({value!r})")
        item_tp = typing.get_args(tp)[0]
        return tuple(_coerce(v, item_tp, f"{where}[{i}]") for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, got {value!r}")
        return value
    raise ConfigError(f"{where}: unsupported type {_type_name(tp)}")


def _parse_env_value(raw: str, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):  # `X | None`: an empty value is None
        if not raw.strip():
            return None
        return _parse_env_value(raw, next(a for a in typing.get_args(tp) if a is not type(None)), where)
    if tp is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"{where} must be 1/0 or true/false, got {raw!r}")
    if tp is int:
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{where} must be an integer, got {raw!r}") from None
    if tp is float:
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{where} must be a number, got {raw!r}") from None
    if origin is tuple:
        return tuple(p.strip() for p in raw.split(os.pathsep if "path" in where or "roots" in where else ",") if p.strip())
    return raw


# Settings that existed once: a config that still names one loads, with a warning that says why it is gone.
_RETIRED = {
    ("embedding", "model_dir"): "the embedding models now ship inside helix-context as finished files, "
                                "so no model is built or cached; delete the line",
}


def _check_range(value: float, key: tuple[str, str], where: str) -> None:
    """ConfigError naming the key and the file for a number outside what the setting can mean: NaN, infinity,
    a negative count or weight (`max_genes = -5` made every answer "nothing relevant found")."""
    if not math.isfinite(value):
        raise ConfigError(f"{where} must be a finite number, got {value!r}")
    low, high = _MINIMUMS.get(key, 0), _MAXIMUMS.get(key)
    if value < low:
        raise ConfigError(f"{where} must be at least {low:g}, got {value!r}")
    if high is not None and value > high:
        raise ConfigError(f"{where} must be at most {high:g}, got {value!r}")


def _check_url(value: str, where: str) -> None:
    """ConfigError for a URL that cannot be parsed (`http://localhost:11434x`, `http://[::1`): it stopped the
    supervisor with a traceback from the HTTP client at start-up."""
    shown = redact_url(value)[:200]  # never the password, whatever the URL's shape
    try:
        parts = urllib.parse.urlsplit(value)
        parts.port  # noqa: B018 - reading the port is the check: a port that is not a number raises
    except ValueError:
        raise ConfigError(f"{where} is not a valid URL: {shown!r} (a password holding @ : / ? or # must be "
                          "percent-encoded)") from None
    if not parts.scheme or not parts.netloc:
        raise ConfigError(f"{where} must be a URL like http://127.0.0.1:11434, got {shown!r}")


def _build_section(name: str, cls: type, raw: dict[str, Any], source: str) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        retired = _RETIRED.get((name, key))
        if retired:
            log.warning("[%s] %s in %s is no longer used: %s", name, key, source, retired)
            continue
        if key not in known:
            raise ConfigError(
                f"unknown setting [{name}] {key} in {source}; known keys: {', '.join(sorted(known))}"
            )
        coerced = _coerce(value, hints[key], f"[{name}] {key} in {source}")
        choices = _CHOICES.get((name, key))
        if choices and coerced not in choices:
            raise ConfigError(f"[{name}] {key} in {source} must be one of {', '.join(choices)}, got {coerced!r}")
        if isinstance(coerced, int | float) and not isinstance(coerced, bool):
            _check_range(coerced, (name, key), f"[{name}] {key} in {source}")
        if (key.endswith("url") or key == "endpoint") and isinstance(coerced, str) and coerced:
            _check_url(coerced, f"[{name}] {key} in {source}")
        values[key] = coerced
    return cls(**values)


def _env_overrides(env: typing.Mapping[str, str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for var, (section, key) in _ENV_ALIASES.items():
        if var in env:
            tp = typing.get_type_hints(_SECTIONS[section])[key]
            value = _parse_env_value(env[var], tp, var)
            if var == "HELIX_DISABLE_HEADROOM":
                value = not value
            out.setdefault(section, {})[key] = value
    for var, raw in env.items():
        if not var.startswith("HELIX_") or var in _ENV_ALIASES:
            continue
        rest = var[len("HELIX_"):].lower()
        for section, cls in _SECTIONS.items():
            prefix = section + "_"
            if rest.startswith(prefix):
                key = rest[len(prefix):]
                hints = typing.get_type_hints(cls)
                if key in hints:
                    out.setdefault(section, {})[key] = _parse_env_value(raw, hints[key], var)
                break
    for section, values in out.items():  # a value out of range names its variable, not the file
        for key, value in values.items():
            var = next((v for v, sk in _ENV_ALIASES.items() if sk == (section, key) and v in env),
                       f"HELIX_{section.upper()}_{key.upper()}")
            if isinstance(value, int | float) and not isinstance(value, bool):
                _check_range(value, (section, key), f"{var} (environment)")
            elif (key.endswith("url") or key == "endpoint") and isinstance(value, str) and value:
                _check_url(value, f"{var} (environment)")
    return out


def _attribution(env: typing.Mapping[str, str]) -> Attribution:
    try:
        user = getpass.getuser()
    except Exception:  # no login name on some service accounts
        user = "user"
    return Attribution(
        org=env.get("HELIX_ORG") or "local",
        device=env.get("HELIX_DEVICE") or platform.node() or "device",
        user=env.get("HELIX_USER") or user,
        agent=env.get("HELIX_AGENT") or "helix",
    )


def load_config(path: str | Path | None = None, env: typing.Mapping[str, str] | None = None) -> Settings:
    """Read helix.toml (explicit path, HELIX_CONFIG, HELIX_HOME, or the repo's) and the environment."""
    env = os.environ if env is None else env
    config_path = Path(path).expanduser() if path is not None else find_config_path()
    raw: dict[str, Any] = {}
    source = str(config_path) if config_path else "<defaults>"
    if config_path is not None:
        try:
            raw = tomllib.loads(config_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {config_path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{config_path} is not valid TOML: {exc}. Fix the line it names.") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{config_path} is not UTF-8 text") from None

    sections: dict[str, Any] = {}
    overrides = _env_overrides(env)
    for key in raw:
        if key not in _SECTIONS and key != "synonyms":
            raise ConfigError(
                f"unknown section [{key}] in {source}; known sections: {', '.join(sorted([*_SECTIONS, 'synonyms']))}"
            )
    for name, cls in _SECTIONS.items():
        table = raw.get(name, {})
        if not isinstance(table, dict):
            raise ConfigError(f"[{name}] in {source} must be a table")
        merged = {**table, **overrides.get(name, {})}
        sections[name] = _build_section(name, cls, merged, source)

    synonyms_raw = raw.get("synonyms", {})
    if not isinstance(synonyms_raw, dict):
        raise ConfigError(f"[synonyms] in {source} must be a table of word = [alternatives]")
    synonyms: dict[str, tuple[str, ...]] = {}
    for word, alts in synonyms_raw.items():
        synonyms[word.lower()] = tuple(a.lower() for a in _coerce(alts, tuple[str, ...], f"[synonyms] {word} in {source}"))

    home = Path(env["HELIX_HOME"]).expanduser() if env.get("HELIX_HOME") else Path.home() / ".helix"
    return Settings(
        home=home,
        config_path=config_path,
        synonyms=synonyms,
        api_key=env.get("HELIX_API_KEY", ""),
        attribution=_attribution(env),
        **sections,
    )
