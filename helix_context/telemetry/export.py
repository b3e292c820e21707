"""OTLP metric export: the exporter for the configured protocol and endpoint, and the service version.

Why apart: exporting is optional and loads its own (gRPC or HTTP) client lazily; nothing here
runs unless ``[telemetry] enabled = true``.
"""

from __future__ import annotations

from typing import Any

DEFAULT_HTTP_ENDPOINT = "http://127.0.0.1:4318"
DEFAULT_GRPC_ENDPOINT = "http://127.0.0.1:4317"
EXPORT_TIMEOUT_S = 3.0  # one OTLP export attempt (a down collector must not stall anything)
SHUTDOWN_TIMEOUT_S = 3.0


def otlp_http_metrics_url(endpoint: str) -> str:
    base = (endpoint or DEFAULT_HTTP_ENDPOINT).rstrip("/")
    return base if base.endswith("/v1/metrics") else base + "/v1/metrics"


def make_exporter(section: Any) -> Any:
    protocol = str(getattr(section, "protocol", "http") or "http").lower()
    endpoint = str(getattr(section, "endpoint", "") or "")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcExporter

        if not endpoint or endpoint.rstrip("/") == DEFAULT_HTTP_ENDPOINT:
            endpoint = DEFAULT_GRPC_ENDPOINT  # the default endpoint follows the protocol
        insecure = not endpoint.startswith("https://")
        return GrpcExporter(endpoint=endpoint, insecure=insecure, timeout=EXPORT_TIMEOUT_S)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpExporter

    return HttpExporter(endpoint=otlp_http_metrics_url(endpoint), timeout=EXPORT_TIMEOUT_S)


def package_version() -> str:
    try:
        from importlib.metadata import version

        return version("helix-context")
    except Exception:
        return "0.1.0"

