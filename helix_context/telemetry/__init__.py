"""OpenTelemetry metrics for Helix: one MeterProvider per process, an in-process
reader for the built-in dashboard, and OTLP export only when the user turns it on.

The parts: ``instruments`` (:class:`Telemetry`: the provider, its instruments and recorders),
``export`` (OTLP exporters), ``reader`` (the in-process snapshot and percentiles), ``http``
(ASGI request metrics), ``supervisor_status`` (the supervisor's snapshot as plain numbers),
``attrs`` (what an attribute may carry). The supervisor and the launcher import this package,
so its public names stay here.

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

from helix_context.telemetry.attrs import hash_query
from helix_context.telemetry.http import HttpMetricsMiddleware, instrument_app, route_template
from helix_context.telemetry.instruments import Telemetry
from helix_context.telemetry.reader import QUANTILES, quantile_from_buckets
from helix_context.telemetry.supervisor_status import normalize_supervisor_status

__all__ = [
    "QUANTILES",
    "HttpMetricsMiddleware",
    "Telemetry",
    "hash_query",
    "instrument_app",
    "normalize_supervisor_status",
    "quantile_from_buckets",
    "route_template",
]
