"""A GGUF file's header, read without loading the model: its metadata scalars (the
architecture, the context length) and the bytes its tensors need, so a truncated or
corrupt file is refused in one line before any backend reads it.

Format (GGUF v2/v3, little-endian): magic, version u32, tensor count u64, metadata count
u64, the metadata key/value pairs, the tensor infos (name, dims, type, offset), padding to
``general.alignment`` (default 32), then the tensor data.
"""
from __future__ import annotations

import functools
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    metadata: dict       # scalar and string values; arrays as None
    data_end: int        # the file size the tensor infos need
    size: int            # the file's size

    @property
    def architecture(self) -> str | None:
        return self.metadata.get("general.architecture")

    @property
    def context_length(self) -> int | None:
        """Positions the model was trained for (``<arch>.context_length``), if recorded."""
        value = self.metadata.get(f"{self.architecture}.context_length")
        return int(value) if isinstance(value, int) and value > 0 else None


class HeaderCursor:
    """Reads a GGUF header's little-endian fields from ``buf`` in order; arrays as None."""

    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return value

    def skip(self, n: int) -> None:
        if n < 0 or self.pos + n > len(self.buf):
            raise struct.error("the header runs past the end of the file")
        self.pos += n

    def string(self) -> str:
        n = self.take("Q")
        start = self.pos
        self.skip(n)
        return bytes(self.buf[start:self.pos]).decode("utf-8", errors="replace")

    def value(self, vtype: int):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            sub, n = self.take("I"), self.take("Q")
            if sub in SCALARS:
                self.skip(n * struct.calcsize("<" + SCALARS[sub]))
            elif sub == STRING:  # a vocabulary: skipped, not decoded
                for _ in range(n):
                    self.skip(self.take("Q"))
            else:
                for _ in range(n):
                    self.value(sub)
            return None
        if vtype not in SCALARS:
            raise ValueError(f"unknown metadata value type {vtype}")
        return self.take(SCALARS[vtype])


def _tensor_bytes(dims: list[int], ggml_type: int) -> int:
    """Bytes of one tensor; 0 for a type this gguf package does not know (not checked)."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return 0
    n = 1
    for d in dims:
        n *= d
    return n // block * type_size


def header_entries(cur: HeaderCursor) -> tuple[int, dict, list[tuple[str, list[int], int, int]]]:
    """(version, metadata, tensor infos (name, dims, ggml type, data offset)) read by
    ``cur`` from a GGUF's leading bytes, the magic skipped; ``cur.pos`` is left at the end
    of the tensor infos. ValueError for a version other than 2 or 3."""
    cur.skip(4)  # magic, checked by the caller
    version, n_tensors, n_kv = cur.take("I"), cur.take("Q"), cur.take("Q")
    if version not in (2, 3):
        raise ValueError(f"unsupported GGUF version {version}")
    metadata = {}
    for _ in range(n_kv):
        key = cur.string()
        metadata[key] = cur.value(cur.take("I"))
    tensors = []
    for _ in range(n_tensors):
        name = cur.string()
        dims = [cur.take("Q") for _ in range(cur.take("I"))]
        tensors.append((name, dims, cur.take("I"), cur.take("Q")))
    return version, metadata, tensors


def _parse(buf, size: int) -> GGUFHeader:
    cur = HeaderCursor(buf)
    version, metadata, tensors = header_entries(cur)
    end = max((offset + _tensor_bytes(dims, ggml_type) for _, dims, ggml_type, offset in tensors), default=0)
    if not tensors:
        return GGUFHeader(version, metadata, cur.pos, size)
    align = metadata.get("general.alignment") or 32
    start = -(-cur.pos // align) * align
    return GGUFHeader(version, metadata, start + end, size)


@functools.cache
def _cached(path: str, size: int, mtime_ns: int) -> GGUFHeader:
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _parse(buf, size)


def read_header(path: Path) -> GGUFHeader:
    """The header of the GGUF file ``path`` (its magic already checked); struct.error or
    ValueError where it is truncated or corrupt. Cached per (path, size, mtime)."""
    st = Path(path).stat()
    return _cached(str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
