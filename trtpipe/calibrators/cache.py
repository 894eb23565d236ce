"""TensorRT's calibration cache: a `TRT-<version>-<algorithm>` line, then `tensor: <scale>` lines.

The scale is the INT8 scale (amax / 127) as a float32, written as 8 hex digits of its big-endian
bytes. Tensor names may hold spaces, brackets and colons, so a line splits at its last colon.
"""

from __future__ import annotations

import math
import os
import re
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

INT8_MAX = 127.0

# TensorRT's names for its algorithms; ours that TensorRT lacks are named in the same style.
ALGORITHMS = {
    "entropy": "EntropyCalibration2",
    "max": "MinMaxCalibration",
    "percentile": "PercentileCalibration",
    "mse": "MSECalibration",
    "auto": "AutoCalibration",
}
# The version TensorRT 10.x's own header carries when none is named (major*10000 + minor*100 + patch).
DEFAULT_TRT_VERSION = 101300

_HEADER = re.compile(r"TRT-(\d+)-(\w+)")


class CacheError(ValueError):
    """The file is not a TensorRT calibration cache; the message names the line."""


@dataclass
class CalibrationTable:
    """Per-tensor amax (the largest magnitude kept) from one calibration, and how it was made.

    `weight_steps`: {weight: each output channel's grid position} where `auto` chose FP8 weight scales
    (trtpipe.calibrators.choose); TensorRT's cache has no place for them, so calibrate's sidecar holds them.
    """

    amax: dict[str, float] = field(default_factory=dict)
    algorithm: str = ALGORITHMS["entropy"]
    trt_version: int = DEFAULT_TRT_VERSION
    weight_steps: dict[str, tuple[int, ...]] = field(default_factory=dict)

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


def nameable(name: str) -> bool:
    """Return whether a cache line can name tensor `name`: it splits at the last colon, so any text on one line."""
    return "\n" not in name and "\r" not in name and bool(name.strip())


def render(table: CalibrationTable, header: str | None = None) -> str:
    """Return the cache text for `table`, under `header` when given (TensorRT checks it)."""
    lines = [header or table.header]
    for name, amax in table.amax.items():
        if amax == 0 and nameable(name):
            lines.append(f"{name}: 0")  # TensorRT's own mark for a tensor that was zero on every sample
            continue
        try:
            scale = encode_scale(amax / INT8_MAX)
        except (OverflowError, struct.error):
            scale = "7f800000"
        if not nameable(name) or not (math.isfinite(amax) and amax > 0) \
                or not 0 < decode_scale(scale) < math.inf:
            raise ValueError(f"tensor {name!r}: amax {amax!r} cannot be written "
                             "(a one-line name and an amax that is 0 or has a finite float32 scale above 0)")
        lines.append(f"{name}: {scale}")
    return "\n".join(lines) + "\n"


def parse(text: str, source: str = "<cache>") -> CalibrationTable:
    """Return the table in cache `text`; raise CacheError naming the first bad line."""
    # Lines end at \n (optionally \r\n) only, as TensorRT reads them: names may hold other separators.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    header = _HEADER.fullmatch(lines[0].strip()) if lines else None
    if header is None:
        raise CacheError(f"{source}: line 1 is not a TensorRT cache header (TRT-<version>-<algorithm>)")
    version, algorithm = header.groups()
    table = CalibrationTable(algorithm=algorithm, trt_version=int(version))
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        name, sep, value = line.rstrip().rpartition(":")
        try:
            if not sep or not name:
                raise ValueError(line)
            amax = decode_scale(value) * INT8_MAX
        except (ValueError, struct.error):
            raise CacheError(f"{source}: line {number} is not '<tensor>: <hex scale>': {line.strip()[:60]!r}") from None
        # A NaN, infinite, negative or hex-encoded zero scale would quantize the tensor to garbage (or
        # NaN) downstream. TensorRT writes a bare "0" for a tensor that was zero on every sample:
        # that one zero is kept (any scale represents an all-zero tensor exactly).
        if not (math.isfinite(amax) and (amax > 0 or value.strip() == "0")):
            raise CacheError(f"{source}: line {number} gives tensor {name[:60]!r} the scale {amax / INT8_MAX!r}; "
                             "a scale is a finite number above 0 (or a bare 0 for an all-zero tensor)")
        if name in table.amax:
            raise CacheError(f"{source}: line {number} gives tensor {name[:60]!r} a second scale")
        table.amax[name] = amax
    return table


def read_cache(path: str | os.PathLike) -> CalibrationTable:
    """Return the table in the cache file at `path`."""
    from trtpipe.errors import TrtpipeError
    from trtpipe.files import read_text_input  # the one text reader: no FIFO, no endless file, UTF-8

    try:
        text = read_text_input(path, str(path), "recalibrate with 'trtpipe calibrate'")
    except TrtpipeError as exc:
        raise CacheError(str(exc)) from None
    return parse(text, str(path))


def write_cache(table: CalibrationTable, path: str | os.PathLike) -> None:
    """Write `table` to `path` atomically (temporary file, then rename)."""
    path = Path(path)
    text = render(table)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # one per writer
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
