"""What one request may be, taken from the model, and what a refused or failed request is told.

A request's shape is checked before anything is allocated for it: the HTTP guard checks the JSON
header before Triton's HTTP frontend sizes its buffers from the declared shape (Triton 2.51, the
one nvidia-pytriton 0.7.0 bundles, aborts the whole server with std::bad_alloc on a huge one), and
the Python-backend model checks every request before it reaches a runner. The bounds: rank and
fixed dimensions as the model declares them, dimension 0 at most the batch limit, dynamic
dimensions at most the engine profile's maximum, and the request's bytes at most the model's
largest request (DEFAULT_MAX_REQUEST_BYTES when a dynamic dimension has no maximum).

This module runs in Triton's Python stub too (python_model.py): the standard library only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trtpipe.errors import first_line

# As Triton's own HTTP frontend bounds its input since 2.59 (--http-max-input-size), for a model whose
# dynamic dimensions have no maximum.
DEFAULT_MAX_REQUEST_BYTES = 64 << 20
ITEM_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
              "int8": 1, "uint64": 8, "uint32": 4, "uint16": 2, "uint8": 1, "bool": 1}
TRITON_DATATYPES = {"float64": "FP64", "float32": "FP32", "float16": "FP16", "bfloat16": "BF16", "int64": "INT64",
                    "int32": "INT32", "int16": "INT16", "int8": "INT8", "uint64": "UINT64", "uint32": "UINT32",
                    "uint16": "UINT16", "uint8": "UINT8", "bool": "BOOL"}


@dataclass(frozen=True)
class InputLimit:
    """One input's bounds: its dtype, and per dimension the largest size (None: no maximum known)."""

    dtype: str
    fixed: tuple[int, ...]  # the model's shape, batch dimension included; -1 where dynamic
    largest: tuple[int | None, ...]
    reshaped: bool = False  # clients send one more dimension of 1 (Triton's reshape of [N] or a scalar)


@dataclass(frozen=True)
class RequestLimits:
    """The largest request a model takes: per input, per dimension, and in bytes all told."""

    model: str
    inputs: dict[str, InputLimit]
    max_bytes: int

    def problem(self, shapes: Mapping[str, Sequence[int]], datatypes: Mapping[str, str] | None = None) -> str | None:
        """Return what is wrong with a request of these input shapes (and Triton datatypes), or None."""
        unknown = sorted(set(shapes) - set(self.inputs))
        if unknown:
            return f"unknown input '{unknown[0]}' for model '{self.model}'; it takes {', '.join(self.inputs)}"
        total = 0
        for name, shape in shapes.items():
            limit = self.inputs[name]
            if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool)
                                                               for d in shape):
                return f"input '{name}': the shape must be a list of integers"
            if limit.reshaped and len(shape) == len(limit.fixed) + 1 and shape[-1] == 1:
                shape = shape[:-1]  # as a client sends it ([N, 1]); the model gets it reshaped ([N])
            if len(shape) != len(limit.fixed):
                return (f"input '{name}' has {len(shape)} dimensions, model '{self.model}' takes {len(limit.fixed)} "
                        f"({_shape(limit)})")
            for axis, (size, fixed, largest) in enumerate(zip(shape, limit.fixed, limit.largest)):
                if size < 1:
                    return f"input '{name}' dimension {axis} is {size}; every dimension is at least 1"
                if fixed >= 0 and size != fixed:
                    return f"input '{name}' has shape {list(shape)}, model '{self.model}' takes {_shape(limit)}"
                if largest is not None and size > largest:
                    what = "the batch limit" if axis == 0 and fixed < 0 else "the model's maximum"
                    return (f"input '{name}' dimension {axis} is {size}, more than {largest} ({what}) "
                            f"for model '{self.model}'")
            if datatypes is not None and datatypes.get(name) != TRITON_DATATYPES.get(limit.dtype):
                return (f"input '{name}' is {datatypes.get(name) or 'sent without a datatype'}, model '{self.model}' takes "
                        f"{TRITON_DATATYPES.get(limit.dtype, limit.dtype)}")
            total += math.prod(shape) * ITEM_BYTES.get(limit.dtype, 8)
            if total > self.max_bytes:
                return f"the request holds more than {self.max_bytes} bytes, the most model '{self.model}' takes"
        return None

    def to_json(self) -> str:
        return json.dumps({"model": self.model, "max_bytes": self.max_bytes,
                           "inputs": {n: [i.dtype, list(i.fixed), list(i.largest), i.reshaped] for n, i in self.inputs.items()}})

    @classmethod
    def from_json(cls, text: str) -> RequestLimits:
        data = json.loads(text)
        inputs = {n: InputLimit(dtype, tuple(fixed), tuple(largest), reshaped)
                  for n, (dtype, fixed, largest, reshaped) in data["inputs"].items()}
        return cls(data["model"], inputs, int(data["max_bytes"]))


def _shape(limit: InputLimit) -> str:
    return "[" + ",".join(str(d) for d in limit.fixed) + "]"


def request_limits(model: str, inputs: Sequence[tuple[str, str, Sequence[int]]], max_batch: int,
                   maxima: Mapping[str, Sequence[int]] | None = None) -> RequestLimits:
    """Return the limits of a model from its inputs (name, dtype, shape with -1 dynamic), batch limit and
    profile maxima (per input, every dimension; None or absent: none known)."""
    limits, total, bounded = {}, 0, True
    for name, dtype, shape in inputs:
        largest: list[int | None] = [d if d >= 0 else None for d in shape]
        for axis, size in enumerate((maxima or {}).get(name) or ()):
            if largest[axis] is None:
                largest[axis] = int(size)
        if max_batch and shape and shape[0] < 0:
            largest[0] = min(max_batch, largest[0] or max_batch)
        limits[name] = InputLimit(dtype, tuple(shape), tuple(largest), len(shape) == (1 if max_batch else 0))
        if any(d is None for d in largest):
            bounded = False
        else:
            total += math.prod(largest) * ITEM_BYTES.get(dtype, 8)
    return RequestLimits(model, limits, total if bounded else max(total, DEFAULT_MAX_REQUEST_BYTES))


# An absolute path's directories (/home/x/models/), whose file name alone stays in a reply.
_DIRECTORIES = re.compile(r"(?<![\w.])/(?:[^\s/'\"():,]+/)+")


def reply_error(exc: BaseException | str) -> str:
    """Return the one line a client is told of a failed request: the error's first line, no paths."""
    line = first_line(exc) or type(exc).__name__
    return _DIRECTORIES.sub("", line)[:500]
