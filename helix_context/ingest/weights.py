"""Model tensors on disk: safetensors read and written with numpy, and a compact per-row int8 form.

Why numpy only: the run-time embedder must not need torch or the
``safetensors`` package, and the training tools (tools/train_embedder/) use the
same functions so that what they write is exactly what the product reads.

The packed form keeps each 2-D float tensor ``name`` as ``name.__q8`` (int8,
same shape) and ``name.__scale`` (float32, one per row: the row's largest
absolute value / 127); every other tensor is stored as it is. It is a quarter
of the fp32 size and, since the product's ONNX model is int8 anyway, costs the
embeddings next to nothing (see tools/train_embedder/README.md).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

__all__ = ["pack_rows_int8", "read_safetensors", "unpack_rows_int8", "write_safetensors"]

_ST_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
_ST_NAMES = {np.dtype(v).str.lstrip("<>|="): k for k, v in _ST_DTYPES.items()}
_Q8 = ".__q8"
_SCALE = ".__scale"


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Read a .safetensors file with numpy only.

    Layout: u64 little-endian header length N, N bytes of JSON
    ``{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}``,
    then the raw little-endian tensor bytes (offsets relative to the data start).
    Raises ValueError when the file is not a consistent safetensors file.
    """
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: not a safetensors file (too short)")
    (header_len,) = struct.unpack("<Q", data[:8])
    if header_len > len(data) - 8:
        raise ValueError(f"{path}: not a safetensors file (bad header length)")
    try:
        header = json.loads(data[8 : 8 + header_len])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a safetensors file (bad header: {exc})") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a safetensors file (header is not an object)")
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _ST_DTYPES.get(info["dtype"])
            begin, end = (int(x) for x in info["data_offsets"])
            shape = tuple(int(d) for d in info["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: tensor {name} has a malformed header entry") from exc
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        le = np.dtype(dtype).newbyteorder("<")
        count = (end - begin) // le.itemsize
        if begin < 0 or end > len(data) - base or count != int(np.prod(shape, dtype=np.int64)):
            raise ValueError(f"{path}: tensor {name} has inconsistent offsets/shape")
        arr = np.frombuffer(data, dtype=le, count=count, offset=base + begin)
        tensors[name] = arr.reshape(shape).astype(dtype, copy=True)
    return tensors


def write_safetensors(path: Path, tensors: dict[str, np.ndarray],
                      metadata: dict[str, str] | None = None) -> None:
    """Write tensors (sorted by name, so the bytes depend on the contents alone) as .safetensors."""
    header: dict[str, object] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        code = _ST_NAMES.get(arr.dtype.str.lstrip("<>|="))
        if code is None:
            raise ValueError(f"tensor {name}: dtype {arr.dtype} cannot be written")
        blob = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * (-len(head) % 8)  # keeps the data 8-byte aligned, as the reference writer does
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)))
        fh.write(head)
        for blob in blobs:
            fh.write(blob)


def pack_rows_int8(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each 2-D float tensor as int8 rows + one float32 scale per row; the rest unchanged (fp32)."""
    out: dict[str, np.ndarray] = {}
    for name, arr in tensors.items():
        if arr.ndim == 2 and np.issubdtype(arr.dtype, np.floating):
            a = arr.astype(np.float32)
            scale = np.abs(a).max(axis=1) / 127.0
            scale[scale == 0] = 1.0
            out[name + _Q8] = np.clip(np.rint(a / scale[:, None]), -127, 127).astype(np.int8)
            out[name + _SCALE] = scale.astype(np.float32)
        elif np.issubdtype(arr.dtype, np.floating):
            out[name] = arr.astype(np.float32)
        else:
            out[name] = arr
    return out


def unpack_rows_int8(tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inverse of pack_rows_int8 (float32); tensors not in packed form pass through."""
    out: dict[str, np.ndarray] = {}
    for name, arr in tensors.items():
        if name.endswith(_SCALE):
            continue
        if name.endswith(_Q8):
            base = name[: -len(_Q8)]
            scale = tensors.get(base + _SCALE)
            if scale is None or scale.shape != (arr.shape[0],):
                raise ValueError(f"packed tensor {base} has no matching per-row scales")
            out[base] = arr.astype(np.float32) * scale.astype(np.float32)[:, None]
        else:
            out[name] = arr
    return out
