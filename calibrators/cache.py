"""TensorRT's calibration cache: a `TRT-<version>-<algorithm>` line, then `tensor: <scale>` lines.

The scale is the INT8 scale (amax / 127) as a float32, written as 8 hex digits of its big-endian
bytes. Tensor names may hold spaces, brackets and colons, so a line splits at its last colon.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

INT8_MAX = 127.0

# TensorRT's names for its algorithms; ours that TensorRT lacks are named in the same style.
ALGORITHMS = {
    "entropy": "EntropyCalibration2",
    "max": "MinMaxCalibration",
    "percentile": "PercentileCalibration",
    "mse": "MSECalibration",
}
# The version TensorRT 10.x's own header carries when none is named (major*10000 + minor*100 + patch).
DEFAULT_TRT_VERSION = 101300

_HEADER = re.compile(r"TRT-(\d+)-(\w+)")


class CacheError(ValueError):
    """The file is not a TensorRT calibration cache; the message names the line."""


@dataclass
class CalibrationTable:
    """Per-tensor amax (the largest magnitude kept) from one calibration, and how it was made."""

    amax: dict[str, float] = field(default_factory=dict)
    algorithm: str = ALGORITHMS["entropy"]
    trt_version: int = DEFAULT_TRT_VERSION

    def scale(self, name: str, qmax: float = INT8_MAX) -> float:
        """Return the symmetric scale for `name` on a grid whose largest value is `qmax`."""
        return self.amax[name] / qmax

    @property
    def header(self) -> str:
        return f"TRT-{self.trt_version}-{self.algorithm}"


def encode_scale(scale: float) -> str:
    return struct.pack(">f", scale).hex()


def decode_scale(text: str) -> float:
    text = text.strip()
    if text == "0":
        return 0.0
    if not re.fullmatch(r"[0-9a-fA-F]{1,8}", text):
        raise ValueError(text)
    return struct.unpack(">f", bytes.fromhex(text.zfill(8)))[0]


def render(table: CalibrationTable, header: str | None = None) -> str:
    """Return the cache text for `table`, under `header` when given (TensorRT checks it)."""
    lines = [header or table.header]
    lines += [f"{name}: {encode_scale(amax / INT8_MAX)}" for name, amax in table.amax.items()]
    return "\n".join(lines) + "\n"


def parse(text: str, source: str = "<cache>") -> CalibrationTable:
    """Return the table in cache `text`; raise CacheError naming the first bad line."""
    lines = text.splitlines()
    if not lines or not _HEADER.fullmatch(lines[0].strip()):
        raise CacheError(f"{source}: line 1 is not a TensorRT cache header (TRT-<version>-<algorithm>)")
    version, algorithm = _HEADER.fullmatch(lines[0].strip()).groups()
    table = CalibrationTable(algorithm=algorithm, trt_version=int(version))
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        name, sep, value = line.rstrip().rpartition(":")
        try:
            if not sep or not name:
                raise ValueError(line)
            table.amax[name] = decode_scale(value) * INT8_MAX
        except (ValueError, struct.error):
            raise CacheError(f"{source}: line {number} is not '<tensor>: <hex scale>': {line.strip()[:60]!r}") from None
    return table


def read_cache(path: str | os.PathLike) -> CalibrationTable:
    """Return the table in the cache file at `path`."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CacheError(f"{path}: cannot read the calibration cache ({exc.__class__.__name__})") from None
    return parse(text, str(path))


def write_cache(table: CalibrationTable, path: str | os.PathLike) -> None:
    """Write `table` to `path` atomically (temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(render(table))
    os.replace(tmp, path)
