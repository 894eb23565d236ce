"""TensorRT data types as numpy dtypes, for every type an engine's I/O can have.

`trt.nptype` knows only the types numpy itself has and raises TypeError for BF16 and FP8;
ml_dtypes (a dependency already) gives numpy those two. INT4, FP4 and E8M0 pack two values or a
shared exponent per byte; no numpy array holds them one element per item, so an engine with such
I/O is refused by name: the typed ONNX keeps I/O in float, and only a hand-made graph has them.
"""

from __future__ import annotations

import numpy as np

from trtpipe.errors import TrtpipeError

_NUMPY = {
    "FLOAT": "float32", "HALF": "float16", "BF16": "bfloat16", "FP8": "float8_e4m3fn",
    "INT8": "int8", "UINT8": "uint8", "INT32": "int32", "INT64": "int64", "BOOL": "bool",
}
PACKED = ("INT4", "FP4", "E8M0")


def trt_type_name(trt_dtype) -> str:
    """'DataType.BF16' (or a member with .name) -> 'BF16'."""
    return getattr(trt_dtype, "name", None) or str(trt_dtype).rsplit(".", 1)[-1]


def numpy_dtype(trt_dtype, tensor: str = "tensor") -> np.dtype:
    """Return the numpy dtype of a TensorRT DataType, or raise naming `tensor` if numpy has none."""
    name = trt_type_name(trt_dtype).upper()
    if name in _NUMPY:
        if name in ("BF16", "FP8"):
            import ml_dtypes  # noqa: F401 - registers bfloat16 and float8_e4m3fn with numpy

        return np.dtype(_NUMPY[name])
    if name in PACKED:
        raise TrtpipeError(f"{tensor} is {name}, packed below one byte per value, which no numpy array holds; "
                           "keep engine inputs and outputs in float (trtpipe's typed ONNX does)")
    raise TrtpipeError(f"{tensor} has TensorRT type {name}, which trtpipe does not map to numpy")
