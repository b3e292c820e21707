"""OpenTelemetry metrics for Helix: one MeterProvider per process, an in-process
reader for the built-in dashboard, and OTLP export only when the user turns it on.

Who uses it
-----------
* the backend (``service_name="helix-backend"``): HTTP server latency
  (:func:`instrument_app`), chat proxy tokens/latency, retrieval stages, verdicts,
  ingest, compression, and the genome size (``observe_genome``);
* the supervisor (``service_name="helix-supervisor"``): backend up/restarts, GPU
  memory, resident models and VRAM pressure (``observe_supervisor``).

Privacy
-------
Nothing leaves the machine unless ``[telemetry] enabled = true`` (or
``HELIX_OTEL_ENABLED=1``); then metrics go to ``[telemetry] endpoint`` only. No
metric attribute ever carries query or document text; :func:`hash_query` is the
one way to name a query (a sha256 prefix unless ``include_query_text``).

Metric names (OTel) and what an OTel Collector's Prometheus exporter makes of them
-------------------------------------------------------------------------------
================================  =========  ======================================
OTel name                          unit       Prometheus (collector prometheus exp.)
================================  =========  ======================================
http.server.request.duration       s          http_server_request_duration_seconds_*
gen_ai.client.token.usage          {token}    gen_ai_client_token_usage_*
gen_ai.client.operation.duration   s          gen_ai_client_operation_duration_seconds_*
helix.retrieval.duration           s          helix_retrieval_duration_seconds_*
helix.genes.delivered              {gene}     helix_genes_delivered_*
helix.budget.tier                  {request}  helix_budget_tier_total
helix.budget_zone.cap              {gene}     helix_budget_zone_cap_*
helix.verdicts                     {item}     helix_verdicts_total
helix.ingest.bytes                 By         helix_ingest_bytes_total
helix.ingest.files                 {file}     helix_ingest_files_total
helix.ingest.genes                 {gene}     helix_ingest_genes_total
helix.ingest.duration              s          helix_ingest_duration_seconds_*
helix.compression.ratio            1          helix_compression_ratio_*
helix.compression.critical_keep_rate 1        helix_compression_critical_keep_rate_*
helix.compression.tokens           {token}    helix_compression_tokens_total
helix.genome.genes                 {gene}     helix_genome_genes
helix.genome.db.size               By         helix_genome_db_size_bytes
helix.backend.up                   {backend}  helix_backend_up
helix.backend.restarts             {restart}  helix_backend_restarts_total
hw.gpu.memory.usage                By         hw_gpu_memory_usage_bytes
hw.gpu.memory.limit                By         hw_gpu_memory_limit_bytes
helix.models.resident              {model}    helix_models_resident
helix.model.size                   By         helix_model_size_bytes
helix.model.vram.usage             By         helix_model_vram_usage_bytes
helix.gpu.pressure                 {state}    helix_gpu_pressure
helix.ribosome.paused              {state}    helix_ribosome_paused
================================  =========  ======================================
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping
from urllib.parse import urlsplit

from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Gauge,
    Histogram,
    InMemoryMetricReader,
    MetricReader,
    PeriodicExportingMetricReader,
    Sum,
)
from opentelemetry.sdk.resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI

    from helix_context.config import Settings

log = logging.getLogger("helix.telemetry")

SCOPE_NAME = "helix_context"
DEFAULT_HTTP_ENDPOINT = "http://127.0.0.1:4318"
DEFAULT_GRPC_ENDPOINT = "http://127.0.0.1:4317"
EXPORT_TIMEOUT_S = 3.0  # one OTLP export attempt (a down collector must not stall anything)
SHUTDOWN_TIMEOUT_S = 3.0

# Bucket boundaries. Latency: the semconv advisory for HTTP, extended below 5 ms
# (a local server answers /health in ~1 ms) and up to the proxy timeout.
HTTP_DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75,
                         1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0, 120.0)
# gen_ai semconv advisory boundaries
GENAI_DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                          40.96, 81.92)
GENAI_TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                       16777216, 67108864)
STAGE_DURATION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                          0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
INGEST_DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
                           900.0, 3600.0)
GENE_COUNT_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128)
RATIO_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)

QUANTILES = (0.5, 0.9, 0.95, 0.99)

_KNOWN_METHODS = frozenset({"CONNECT", "DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "QUERY", "TRACE"})
_UP_STATES = frozenset({"running", "healthy", "ok", "up", "degraded", "ready", "adopted"})


# ── helpers ───────────────────────────────────────────────────────────────────


def hash_query(text: str, settings: Any = None) -> str:
    """How a query may be named in telemetry: ``sha256:<16 hex>`` of the text, unless
    ``[telemetry] include_query_text = true`` (then the text itself).

    ``settings`` may be a :class:`Settings`, its ``telemetry`` section, or None (hash).
    """
    section = getattr(settings, "telemetry", settings)
    if section is not None and bool(getattr(section, "include_query_text", False)):
        return text
    data = (text or "").encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()[:16]


class _Bounded:
    """Caps the distinct values an attribute may take (model names come from callers)."""

    def __init__(self, limit: int, max_len: int = 96) -> None:
        self._limit = limit
        self._max_len = max_len
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: Any) -> str:
        text = str(value if value is not None else "").strip()[: self._max_len] or "unknown"
        if text in self._seen:
            return text
        with self._lock:
            if text in self._seen:
                return text
            if len(self._seen) >= self._limit:
                return "_OTHER"
            self._seen.add(text)
            return text


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _otlp_http_metrics_url(endpoint: str) -> str:
    base = (endpoint or DEFAULT_HTTP_ENDPOINT).rstrip("/")
    return base if base.endswith("/v1/metrics") else base + "/v1/metrics"


def _make_exporter(section: Any) -> Any:
    protocol = str(getattr(section, "protocol", "http") or "http").lower()
    endpoint = str(getattr(section, "endpoint", "") or "")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExporter

        if not endpoint or endpoint.rstrip("/") == DEFAULT_HTTP_ENDPOINT:
            endpoint = DEFAULT_GRPC_ENDPOINT  # the default endpoint follows the protocol
        insecure = not endpoint.startswith("https://")
        return GrpcExporter(endpoint=endpoint, insecure=insecure, timeout=EXPORT_TIMEOUT_S)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter

    return HttpExporter(endpoint=_otlp_http_metrics_url(endpoint), timeout=EXPORT_TIMEOUT_S)


def _package_version() -> str:
    try:
        from importlib.metadata import version

        return version("helix-context")
    except Exception:
        return "0.1.0"


class _Source:
    """A user callback feeding several observable instruments: called once per
    collection (short TTL cache), failures logged (rate-limited) and swallowed."""

    def __init__(self, name: str, ttl_s: float = 0.5) -> None:
        self.name = name
        self.ttl_s = ttl_s
        self.fn: Callable[[], Any] | None = None
        self._lock = threading.Lock()
        self._value: Any = None
        self._at = 0.0
        self._last_error_log = 0.0

    def set(self, fn: Callable[[], Any] | None) -> None:
        with self._lock:
            self.fn = fn
            self._at = 0.0
            self._value = None

    def get(self) -> Any:
        with self._lock:
            fn = self.fn
            if fn is None:
                return None
            now = time.monotonic()
            if self._at and now - self._at < self.ttl_s:
                return self._value
            try:
                value = fn()
            except Exception as exc:  # a broken probe must never break collection
                if now - self._last_error_log > 60:
                    self._last_error_log = now
                    log.warning("telemetry %s callback failed: %s", self.name, exc)
                value = None
            self._value, self._at = value, now
            return value


# ── supervisor snapshot → plain numbers ──────────────────────────────────────


def normalize_supervisor_status(snapshot: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Read the supervisor's status document (signals.read_supervisor_status) tolerantly.

    The document is the one supervisor/status.py describes (``backend.status/pid/restarts/
    health``, ``gpu.available/used_bytes/total_bytes/devices``, ``resident_models``,
    ``pressure.active``, ``ribosome_paused``). Also accepts the fields flat (``status``, ``pid``, ``restarts``) or under ``backend``;
    ``gpu`` as a dict (or a list of dicts: the first is used); models under
    ``models`` / ``resident_models`` / ``ollama.models``; ``pressure`` as a bool, a
    string (``ok``/``none``/``normal`` = no pressure) or a dict with ``active``.
    """
    if not isinstance(snapshot, Mapping):
        return None
    backend = snapshot.get("backend") if isinstance(snapshot.get("backend"), Mapping) else {}
    status = backend.get("status", backend.get("state", snapshot.get("backend_status", snapshot.get("status"))))
    status = str(status) if status is not None else "unknown"
    up_raw = backend.get("up", snapshot.get("backend_up"))
    health = backend.get("health") if isinstance(backend.get("health"), Mapping) else {}
    if up_raw is not None:
        up = bool(up_raw)
    else:  # running (or adopted) and not failing its health checks
        up = status.lower() in _UP_STATES and health.get("ok") is not False
    restarts = _num(backend.get("restarts", snapshot.get("restarts"))) or 0.0
    pid = backend.get("pid", snapshot.get("pid"))

    gpu_raw: Any = snapshot.get("gpu")
    if isinstance(gpu_raw, list):
        gpu_raw = gpu_raw[0] if gpu_raw else None
    gpu: dict[str, Any] = {"available": False, "used_bytes": None, "total_bytes": None, "name": "", "devices": []}
    if isinstance(gpu_raw, Mapping):
        used = _num(gpu_raw.get("used_bytes", gpu_raw.get("used")))
        total = _num(gpu_raw.get("total_bytes", gpu_raw.get("total")))
        available = gpu_raw.get("available")
        devices = []
        for i, dev in enumerate(gpu_raw.get("devices") or []):
            if isinstance(dev, Mapping):
                devices.append({"id": str(dev.get("index", i)), "name": str(dev.get("name", "") or ""),
                                "used_bytes": _num(dev.get("used_bytes")), "total_bytes": _num(dev.get("total_bytes"))})
        if not devices and (used is not None or total is not None):
            devices.append({"id": str(gpu_raw.get("index", gpu_raw.get("id", "0"))),
                            "name": str(gpu_raw.get("name", "") or ""), "used_bytes": used, "total_bytes": total})
        names = sorted({d["name"] for d in devices if d["name"]})
        gpu.update(
            available=bool(available) if available is not None else total is not None,
            used_bytes=used,
            total_bytes=total,
            name=str(gpu_raw.get("name") or (names[0] + (f" ×{len(devices)}" if len(devices) > 1 else "") if names else "")),
            devices=devices,
        )

    models_raw: Any = snapshot.get("models", snapshot.get("resident_models"))
    if models_raw is None and isinstance(snapshot.get("ollama"), Mapping):
        models_raw = snapshot["ollama"].get("models")
    models: list[dict[str, Any]] = []
    if isinstance(models_raw, list):
        for item in models_raw:
            if isinstance(item, Mapping):
                models.append({
                    "name": str(item.get("name", item.get("model", "?"))),
                    "size": _num(item.get("size")) or 0.0,
                    "size_vram": _num(item.get("size_vram")) or 0.0,
                })
            elif isinstance(item, str):
                models.append({"name": item, "size": 0.0, "size_vram": 0.0})

    pressure_raw = snapshot.get("pressure")
    if isinstance(pressure_raw, Mapping):
        active = pressure_raw.get("active", pressure_raw.get("pressure", pressure_raw.get("high")))
        if active is None:
            level = str(pressure_raw.get("state", pressure_raw.get("level", "ok"))).lower()
            active = level not in ("ok", "none", "normal", "low", "")
        pressure, pressure_detail = bool(active), dict(pressure_raw)
    elif isinstance(pressure_raw, str):
        pressure, pressure_detail = pressure_raw.lower() not in ("ok", "none", "normal", "low", ""), pressure_raw
    else:
        pressure, pressure_detail = bool(pressure_raw), pressure_raw

    return {
        "backend_status": status,
        "backend_up": up,
        "pid": pid,
        "restarts": restarts,
        "gpu": gpu,
        "models": models,
        "pressure": pressure,
        "pressure_detail": pressure_detail,
        "ribosome_paused": bool(snapshot.get("ribosome_paused", False)),
        "written_at": _num(snapshot.get("written_at")),
    }


# ── percentiles from explicit buckets ─────────────────────────────────────────


def quantile_from_buckets(q: float, bounds: list[float] | tuple[float, ...], counts: list[int] | tuple[int, ...],
                          lo: float | None = None, hi: float | None = None) -> float | None:
    """Estimate a quantile from explicit-bucket counts (linear within a bucket).

    ``counts`` has ``len(bounds) + 1`` entries (the last is the overflow bucket);
    ``lo``/``hi`` (observed min/max, when known) bound the first and last buckets.
    """
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0.0
    for i, count in enumerate(counts):
        if count <= 0:
            continue
        if seen + count >= rank:
            lower = bounds[i - 1] if i > 0 else (lo if lo is not None else min(0.0, bounds[0] if bounds else 0.0))
            upper = bounds[i] if i < len(bounds) else (hi if hi is not None else (bounds[-1] if bounds else 0.0))
            if lo is not None:
                lower = max(lower, lo)
            if hi is not None:
                upper = min(upper, hi)
            if upper < lower:
                upper = lower
            frac = (rank - seen) / count
            return lower + (upper - lower) * max(0.0, min(1.0, frac))
        seen += count
    return hi


# ── the telemetry object ──────────────────────────────────────────────────────


class Telemetry:
    """One MeterProvider (never installed as the global one), its instruments,
    an in-memory reader for :meth:`snapshot`, and OTLP export when enabled."""

    def __init__(self, settings: "Settings", service_name: str) -> None:
        self.settings = settings
        self.service_name = service_name
        section = settings.telemetry
        self.enabled_export: bool = bool(section.enabled)
        self.export_protocol = str(section.protocol)
        self.export_endpoint = str(section.endpoint)
        self._closed = False
        self._lock = threading.Lock()

        self._reader = InMemoryMetricReader()
        readers: list[MetricReader] = [self._reader]
        self._export_reader: PeriodicExportingMetricReader | None = None
        if self.enabled_export:
            try:
                exporter = _make_exporter(section)
                interval_ms = max(100.0, float(section.export_interval_s) * 1000.0)
                self._export_reader = PeriodicExportingMetricReader(
                    exporter, export_interval_millis=interval_ms, export_timeout_millis=EXPORT_TIMEOUT_S * 1000
                )
                readers.append(self._export_reader)
            except Exception as exc:  # never crash the server over telemetry
                log.warning("OTLP metrics export disabled: %s", exc)
                self.enabled_export = False

        resource = Resource.create({
            "service.name": service_name,
            "service.version": _package_version(),
            "service.instance.id": str(uuid.uuid4()),
        })
        self._provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
        meter = self._provider.get_meter(SCOPE_NAME, _package_version())

        self._model = _Bounded(64)
        self._route = _Bounded(256, max_len=200)
        self._stage = _Bounded(32, max_len=48)
        self._label = _Bounded(64, max_len=48)

        # HTTP server (semconv)
        self._http_duration = meter.create_histogram(
            "http.server.request.duration", unit="s", description="Duration of HTTP server requests.",
            explicit_bucket_boundaries_advisory=HTTP_DURATION_BUCKETS)
        # GenAI client (semconv): the proxy's calls to the upstream LLM
        self._token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=GENAI_TOKEN_BUCKETS)
        self._op_duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=GENAI_DURATION_BUCKETS)
        # retrieval
        self._retrieval_duration = meter.create_histogram(
            "helix.retrieval.duration", unit="s", description="Time spent per retrieval stage (attribute stage).",
            explicit_bucket_boundaries_advisory=STAGE_DURATION_BUCKETS)
        self._genes_delivered = meter.create_histogram(
            "helix.genes.delivered", unit="{gene}", description="Genes delivered per retrieval.",
            explicit_bucket_boundaries_advisory=GENE_COUNT_BUCKETS)
        self._budget_tier = meter.create_counter(
            "helix.budget.tier", unit="{request}", description="Retrievals per budget tier (tight / focused / broad).")
        self._zone_cap = meter.create_histogram(
            "helix.budget_zone.cap", unit="{gene}", description="Gene cap set by the budget zone, when one applied.",
            explicit_bucket_boundaries_advisory=GENE_COUNT_BUCKETS)
        self._verdicts = meter.create_counter(
            "helix.verdicts", unit="{item}", description="Packet items per verdict (verified / stale_risk / needs_refresh).")
        # ingest
        self._ingest_bytes = meter.create_counter("helix.ingest.bytes", unit="By", description="Source bytes ingested.")
        self._ingest_files = meter.create_counter("helix.ingest.files", unit="{file}", description="Files ingested.")
        self._ingest_genes = meter.create_counter("helix.ingest.genes", unit="{gene}", description="Genes written by ingest.")
        self._ingest_duration = meter.create_histogram(
            "helix.ingest.duration", unit="s", description="Duration of ingest runs.",
            explicit_bucket_boundaries_advisory=INGEST_DURATION_BUCKETS)
        # compression
        self._compression_ratio = meter.create_histogram(
            "helix.compression.ratio", unit="1", description="Compressed tokens / original tokens per compression.",
            explicit_bucket_boundaries_advisory=RATIO_BUCKETS)
        self._critical_keep = meter.create_histogram(
            "helix.compression.critical_keep_rate", unit="1",
            description="Share of critical tokens (paths, identifiers, numbers) kept by compression.",
            explicit_bucket_boundaries_advisory=RATIO_BUCKETS)
        self._compression_tokens = meter.create_counter(
            "helix.compression.tokens", unit="{token}", description="Tokens before (type=original) and after (type=compressed) compression.")

        # observable: genome (backend)
        self._genome = _Source("genome")
        meter.create_observable_gauge("helix.genome.genes", callbacks=[self._observe_genes], unit="{gene}",
                                      description="Genes in the genome per lifecycle tier.")
        meter.create_observable_gauge("helix.genome.db.size", callbacks=[self._observe_db_size], unit="By",
                                      description="Size of the genome database files (file=main|wal).")
        # observable: supervisor
        self._supervisor = _Source("supervisor")
        meter.create_observable_gauge("helix.backend.up", callbacks=[self._observe_up], unit="{backend}",
                                      description="1 when the supervised backend is serving, else 0.")
        meter.create_observable_counter("helix.backend.restarts", callbacks=[self._observe_restarts], unit="{restart}",
                                        description="Backend restarts done by the supervisor.")
        meter.create_observable_up_down_counter("hw.gpu.memory.usage", callbacks=[self._observe_gpu_used], unit="By",
                                                description="GPU memory used.")
        meter.create_observable_up_down_counter("hw.gpu.memory.limit", callbacks=[self._observe_gpu_total], unit="By",
                                                description="GPU memory available in total.")
        meter.create_observable_gauge("helix.models.resident", callbacks=[self._observe_model_count], unit="{model}",
                                      description="Models resident in the local LLM server (Ollama /api/ps).")
        meter.create_observable_gauge("helix.model.size", callbacks=[self._observe_model_size], unit="By",
                                      description="Memory taken by each resident model (attribute model).")
        meter.create_observable_gauge("helix.model.vram.usage", callbacks=[self._observe_model_vram], unit="By",
                                      description="GPU memory taken by each resident model (attribute model).")
        meter.create_observable_gauge("helix.gpu.pressure", callbacks=[self._observe_pressure], unit="{state}",
                                      description="1 while GPU memory is over the pressure threshold.")
        meter.create_observable_gauge("helix.ribosome.paused", callbacks=[self._observe_ribosome], unit="{state}",
                                      description="1 while the ribosome is paused.")

    # ── synchronous recorders ──

    def record_http(self, method: str, route: str, status: int, seconds: float) -> None:
        """One HTTP request: ``route`` must be the route template (``/items/{id}``), never the raw path;
        pass an empty route when nothing matched (the attribute is then left out)."""
        if self._closed:
            return
        method = (method or "").upper()
        attrs: dict[str, Any] = {
            "http.request.method": method if method in _KNOWN_METHODS else "_OTHER",
            "http.response.status_code": int(status),
        }
        if route:
            attrs["http.route"] = self._route(route)
        if int(status) >= 500:
            attrs["error.type"] = str(int(status))
        self._http_duration.record(max(0.0, float(seconds)), attrs)

    def record_chat(self, model: str, input_tokens: int, output_tokens: int, seconds: float, upstream: str) -> None:
        """One chat completion forwarded upstream. ``upstream`` is the upstream kind (``ollama``,
        ``openai``) or its URL (then recorded as server.address / server.port)."""
        if self._closed:
            return
        attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": self._model(model)}
        attrs.update(self._upstream_attrs(upstream))
        if input_tokens is not None and input_tokens >= 0:
            self._token_usage.record(int(input_tokens), {**attrs, "gen_ai.token.type": "input"})
        if output_tokens is not None and output_tokens >= 0:
            self._token_usage.record(int(output_tokens), {**attrs, "gen_ai.token.type": "output"})
        self._op_duration.record(max(0.0, float(seconds)), attrs)

    def record_retrieval(self, stage_seconds: dict[str, float], genes_delivered: int, tier: str,
                         zone_cap: int | None) -> None:
        """One retrieval: seconds per stage (e.g. signals, fts, dense, fusion, assemble, total),
        the genes delivered, the budget tier, and the budget-zone cap (None when no zone applied)."""
        if self._closed:
            return
        for stage, seconds in (stage_seconds or {}).items():
            value = _num(seconds)
            if value is not None:
                self._retrieval_duration.record(max(0.0, value), {"stage": self._stage(stage)})
        tier_label = self._label(tier or "unknown")
        self._genes_delivered.record(max(0, int(genes_delivered or 0)), {"tier": tier_label})
        self._budget_tier.add(1, {"tier": tier_label})
        if zone_cap is not None:
            self._zone_cap.record(max(0, int(zone_cap)))

    def record_verdicts(self, counts: dict[str, int]) -> None:
        """Items per verdict of one packet: {"verified": n, "stale_risk": n, "needs_refresh": n}."""
        if self._closed:
            return
        for verdict, n in (counts or {}).items():
            if n and int(n) > 0:
                self._verdicts.add(int(n), {"verdict": self._label(verdict)})

    def record_ingest(self, bytes_: int, files: int, genes: int, seconds: float) -> None:
        """One ingest run (or batch): source bytes read, files and genes written, seconds taken."""
        if self._closed:
            return
        if bytes_ and bytes_ > 0:
            self._ingest_bytes.add(int(bytes_))
        if files and files > 0:
            self._ingest_files.add(int(files))
        if genes and genes > 0:
            self._ingest_genes.add(int(genes))
        self._ingest_duration.record(max(0.0, float(seconds or 0.0)))

    def record_compression(self, original_tokens: int, compressed_tokens: int, critical_total: int,
                           critical_kept: int) -> None:
        """One compressed gene (or context): token counts before/after and the critical-token keep."""
        if self._closed:
            return
        if original_tokens and original_tokens > 0:
            self._compression_ratio.record(max(0.0, compressed_tokens / original_tokens))
            self._compression_tokens.add(int(original_tokens), {"type": "original"})
            self._compression_tokens.add(max(0, int(compressed_tokens)), {"type": "compressed"})
        if critical_total and critical_total > 0:
            self._critical_keep.record(max(0.0, min(1.0, critical_kept / critical_total)))

    # ── observable sources ──

    def observe_genome(self, callback: Callable[[], dict]) -> None:
        """Register the genome probe: ``callback()`` → {"genes_by_tier": {tier: n}, "db_bytes": n,
        "wal_bytes": n}. Called at most about twice a second, from the collecting thread."""
        self._genome.set(callback)

    def observe_supervisor(self, callback: Callable[[], dict | None]) -> None:
        """Register the supervisor probe: ``callback()`` → the status snapshot dict (the one
        signals.write_supervisor_status writes) or None when there is nothing to report."""
        self._supervisor.set(callback)

    def _observe_genes(self, options: CallbackOptions) -> Iterable[Observation]:
        data = self._genome.get()
        if not isinstance(data, Mapping):
            return []
        tiers = data.get("genes_by_tier") or {}
        out = []
        for tier, n in tiers.items():
            value = _num(n)
            if value is not None:
                out.append(Observation(int(value), {"tier": str(tier)}))
        return out

    def _observe_db_size(self, options: CallbackOptions) -> Iterable[Observation]:
        data = self._genome.get()
        if not isinstance(data, Mapping):
            return []
        out = []
        for key, file in (("db_bytes", "main"), ("wal_bytes", "wal")):
            value = _num(data.get(key))
            if value is not None:
                out.append(Observation(int(value), {"file": file}))
        return out

    def _sup(self) -> dict[str, Any] | None:
        return normalize_supervisor_status(self._supervisor.get())

    def _observe_up(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(1 if sup["backend_up"] else 0)] if sup else []

    def _observe_restarts(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(int(sup["restarts"]))] if sup else []

    def _observe_gpu(self, key: str) -> list[Observation]:
        """One observation per GPU device (hw.id = gpu<index>, hw.name when known)."""
        sup = self._sup()
        if not sup or not sup["gpu"]["available"]:
            return []
        out = []
        for dev in sup["gpu"]["devices"]:
            if dev[key] is None:
                continue
            attrs = {"hw.id": f"gpu{dev['id']}", "hw.type": "gpu"}
            if dev["name"]:
                attrs["hw.name"] = dev["name"]
            out.append(Observation(int(dev[key]), attrs))
        return out

    def _observe_gpu_used(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_gpu("used_bytes")

    def _observe_gpu_total(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_gpu("total_bytes")

    def _observe_model_count(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(len(sup["models"]))] if sup else []

    def _observe_model_size(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        if not sup:
            return []
        return [Observation(int(m["size"]), {"model": self._model(m["name"])}) for m in sup["models"]]

    def _observe_model_vram(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        if not sup:
            return []
        return [Observation(int(m["size_vram"]), {"model": self._model(m["name"])}) for m in sup["models"]]

    def _observe_pressure(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(1 if sup["pressure"] else 0)] if sup else []

    def _observe_ribosome(self, options: CallbackOptions) -> Iterable[Observation]:
        sup = self._sup()
        return [Observation(1 if sup["ribosome_paused"] else 0)] if sup else []

    @staticmethod
    def _upstream_attrs(upstream: str) -> dict[str, Any]:
        text = str(upstream or "").strip()
        if not text:
            return {}
        if "://" in text:
            parts = urlsplit(text)
            attrs: dict[str, Any] = {}
            if parts.hostname:
                attrs["server.address"] = parts.hostname
            try:
                if parts.port:
                    attrs["server.port"] = parts.port
            except ValueError:
                pass
            return attrs
        return {"gen_ai.provider.name": text.lower()[:32]}

    # ── reading back ──

    def snapshot(self) -> dict[str, Any]:
        """Current cumulative values from the in-process reader:

        ``{"service", "at", "export": {...}, "counters": {name: {"unit", "description", "series":
        [{"attrs", "value"}]}}, "gauges": {…same…}, "histograms": {name: {"unit", "description",
        "series": [{"attrs", "count", "sum", "min", "max", "p50", "p90", "p95", "p99", "bounds",
        "buckets"}]}}}``. Up-down counters are listed with the gauges.
        """
        out: dict[str, Any] = {
            "service": self.service_name,
            "at": time.time(),
            "export": {"enabled": self.enabled_export, "protocol": self.export_protocol,
                       "endpoint": self.export_endpoint if self.enabled_export else None},
            "counters": {},
            "gauges": {},
            "histograms": {},
        }
        if self._closed:
            return out
        try:
            data = self._reader.get_metrics_data()
        except Exception as exc:
            log.warning("telemetry snapshot failed: %s", exc)
            return out
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    self._add_metric(out, metric)
        return out

    @staticmethod
    def _add_metric(out: dict[str, Any], metric: Any) -> None:
        body = metric.data
        head = {"unit": metric.unit, "description": metric.description}
        if isinstance(body, Histogram):
            series = []
            for p in body.data_points:
                bounds = [float(b) for b in p.explicit_bounds]
                counts = [int(c) for c in p.bucket_counts]
                lo = float(p.min) if p.count else None
                hi = float(p.max) if p.count else None
                item = {"attrs": dict(p.attributes or {}), "count": int(p.count), "sum": float(p.sum),
                        "min": lo, "max": hi, "bounds": bounds, "buckets": counts}
                for q in QUANTILES:
                    item[f"p{int(q * 100)}"] = quantile_from_buckets(q, bounds, counts, lo, hi)
                series.append(item)
            out["histograms"][metric.name] = {**head, "series": series}
        elif isinstance(body, Sum):
            kind = "counters" if body.is_monotonic else "gauges"
            out[kind][metric.name] = {**head, "series": [
                {"attrs": dict(p.attributes or {}), "value": p.value} for p in body.data_points]}
        elif isinstance(body, Gauge):
            out["gauges"][metric.name] = {**head, "series": [
                {"attrs": dict(p.attributes or {}), "value": p.value} for p in body.data_points]}

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Export now (OTLP on) — tests and clean stops use it."""
        if self._closed:
            return True
        try:
            return bool(self._provider.force_flush(timeout_millis))
        except Exception as exc:
            log.warning("telemetry flush failed: %s", exc)
            return False

    def shutdown(self) -> None:
        """Final export (when enabled) and stop the reader threads; safe to call twice.
        Takes at most ~4 s even when the collector is unreachable (the supervisor's stop
        timeout must not be spent waiting on telemetry)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True

        def stop() -> None:
            try:
                self._provider.shutdown(timeout_millis=SHUTDOWN_TIMEOUT_S * 1000)
            except Exception as exc:
                log.warning("telemetry shutdown: %s", exc)

        if self._export_reader is None:
            stop()
            return
        thread = threading.Thread(target=stop, name="helix-telemetry-shutdown", daemon=True)
        thread.start()
        thread.join(SHUTDOWN_TIMEOUT_S + 1.0)


# ── HTTP server instrumentation (pure ASGI) ───────────────────────────────────


def route_template(scope: Mapping[str, Any]) -> str:
    """The matched route template of a request after routing ("" when nothing matched)."""
    root_path = str(scope.get("root_path", "") or "")
    app_root = str(scope.get("app_root_path", root_path) or "")
    mount_prefix = root_path[len(app_root):] if root_path.startswith(app_root) else ""
    fastapi_scope = scope.get("fastapi")
    if isinstance(fastapi_scope, Mapping):
        context = fastapi_scope.get("effective_route_context")
        path_format = getattr(context, "path_format", None)
        if isinstance(path_format, str) and path_format:
            return mount_prefix + path_format
    route = scope.get("route")
    if route is None:
        return ""
    from starlette.routing import Mount

    if isinstance(route, Mount):
        return (mount_prefix or getattr(route, "path", "")) + "/{path}"
    path_format = getattr(route, "path_format", None) or getattr(route, "path", None)
    return mount_prefix + path_format if isinstance(path_format, str) else ""


class HttpMetricsMiddleware:
    """Records http.server.request.duration per request. Pure ASGI: it only watches the
    messages going by, so streaming responses are never buffered; the duration ends
    with the last body chunk (background tasks after it do not count)."""

    def __init__(self, app: Any, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None
        done = False

        def finish(final_status: int | None) -> None:
            nonlocal done
            if done:
                return
            done = True
            try:
                self.telemetry.record_http(scope.get("method", ""), route_template(scope),
                                           final_status if final_status is not None else 500,
                                           time.perf_counter() - start)
            except Exception as exc:  # pragma: no cover - telemetry must not break serving
                log.debug("record_http failed: %s", exc)

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            kind = message.get("type")
            if kind == "http.response.start":
                status = int(message.get("status", 0))
            await send(message)
            if kind == "http.response.body" and not message.get("more_body", False):
                finish(status)

        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException:
            finish(status if status is not None else 500)
            raise
        finish(status)


def instrument_app(app: "FastAPI", telemetry: Telemetry | None) -> None:
    """Add :class:`HttpMetricsMiddleware` to ``app`` (before it starts); no-op for None or twice."""
    if telemetry is None or getattr(app.state, "_helix_http_metrics", False):
        return
    app.add_middleware(HttpMetricsMiddleware, telemetry=telemetry)
    app.state._helix_http_metrics = True
