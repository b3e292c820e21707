"""Backend log capture: rotation, the probe-line filter, and the tail a FATAL snapshot shows."""

from __future__ import annotations

import io

from supervisor.logs import LogCapture, tail_file


def test_capture_rotates_filters_probe_lines_and_keeps_a_tail(tmp_path):
    path = tmp_path / "logs" / "backend.log"
    cap = LogCapture(path, max_bytes=2_000, backups=2, keep_lines=50)
    stream = io.BytesIO(b"".join(
        [b'INFO:     127.0.0.1:5050 - "GET /health HTTP/1.1" 200 OK\n',
         b'INFO:     127.0.0.1:5050 - "POST /context HTTP/1.1" 200 OK\n']
        + [f"line {i} \xe9\n".encode("latin-1") for i in range(600)]))  # not UTF-8: replaced, not fatal
    cap.follow(stream).join(5)
    cap.close()
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["backend.log", "backend.log.1", "backend.log.2"]  # rotated, two backups kept
    assert all(p.stat().st_size <= 2_100 for p in path.parent.iterdir())
    tail = cap.tail(3)
    assert tail == ["line 597 \ufffd", "line 598 \ufffd", "line 599 \ufffd"]
    everything = "".join(p.read_text(encoding="utf-8") for p in path.parent.iterdir())
    assert "GET /health" not in everything
    assert tail_file(path, 1) == ["line 599 \ufffd"]
    assert tail_file(tmp_path / "missing.log") == []
