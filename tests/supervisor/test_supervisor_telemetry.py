"""The supervisor exports its own metrics (service helix-supervisor) to a real OTLP receiver."""

from __future__ import annotations

import asyncio
import time

import pytest
from supkit import fake_nvml, fast_settings, free_port, serving

oteltap = pytest.importorskip("oteltap", reason="oteltap (the test OTLP receiver) is in the [test] extra")


def test_supervisor_metrics_reach_a_real_otlp_receiver(supervisors, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_nvml(monkeypatch, [(6_000_000_000, 24_000_000_000)])
    port = free_port()
    settings = fast_settings(telemetry={"enabled": True, "endpoint": f"http://127.0.0.1:{port}",
                                        "export_interval_s": 0.5})
    wanted = {"helix.backend.up", "hw.gpu.memory.usage", "hw.gpu.memory.limit"}
    got: dict[str, list] = {}

    async def main() -> None:
        cfg = oteltap.OtelTapHttpProtobufReceiverSettings(http_port=port)
        async with oteltap.OtelTapHttpProtobufReceiver(cfg) as receiver:
            async def collect() -> None:
                async for metric in receiver.stream_metrics():
                    points = list(metric.gauge.data_points) or list(metric.sum.data_points)
                    got[metric.name] = [(p.as_double or p.as_int) for p in points]

            task = asyncio.create_task(collect())
            sup = await asyncio.to_thread(supervisors.make, settings)
            await asyncio.to_thread(serving, sup)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (wanted <= set(got) and 1 in got["helix.backend.up"]):
                await asyncio.sleep(0.1)
            task.cancel()
            # stopped while the receiver still listens: its last export lands at once instead of
            # retrying against a closed port until the exporter's timeout
            await asyncio.to_thread(sup.shutdown, stop_backend=True, timeout=15)

    asyncio.run(main())
    assert wanted <= set(got), sorted(got)
    assert 1 in got["helix.backend.up"]
    assert 6_000_000_000 in got["hw.gpu.memory.usage"]
    assert 24_000_000_000 in got["hw.gpu.memory.limit"]
