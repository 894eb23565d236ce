"""The typed ONNX of a precision: the graph whose types make a strongly typed build run in it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from calibrators.cache import CalibrationTable
from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.graph.half import to_half
from trtpipe.graph.lowbit import lowbit_model
from trtpipe.graph.qdq import insert_qdq
from trtpipe.targets import Precision

# What the layers left out of INT8/FP8 compute in.
UNQUANTIZED = ("fp16", "fp32")


def write_typed_onnx(model, precision: Precision, output: Path, table: CalibrationTable | None,
                     exclude: Sequence[str] = (), implicit: bool = False, unquantized: str = "fp16") -> Path:
    """Write the ONNX whose types make a strongly typed build of `model` run in `precision`; return its path."""
    return onnxio.save(typed_model(model, precision, table, exclude, implicit, unquantized), output)


def typed_model(model, precision: Precision, table: CalibrationTable | None, exclude: Sequence[str] = (),
                implicit: bool = False, unquantized: str = "fp16", only: Sequence[str] | None = None):
    """Return the typed ONNX of `model` for `precision`.

    INT8 and FP8 graphs compute what is not quantized (excluded layers, normalizations, softmax,
    elementwise ops) in `unquantized`: FP16 by default, as a weakly typed TensorRT build with the
    FP16 and INT8 flags would, or FP32. `only` names the nodes to quantize, all others stay out.
    """
    if precision in (Precision.FP32, Precision.TF32) or implicit:
        typed = model  # implicit INT8: TensorRT quantizes the FP32 graph itself
    elif precision in (Precision.FP16, Precision.BF16):
        typed = to_half(model, precision, keep=exclude)
    elif precision in (Precision.INT4, Precision.FP4):
        typed = lowbit_model(model, precision, table, exclude)
    else:
        if table is None:
            raise TrtpipeError(f"--precision {precision} needs --cache CACHE; make one with 'trtpipe calibrate'")
        if unquantized not in UNQUANTIZED:
            raise TrtpipeError(f"--unquantized {unquantized}: use one of {', '.join(UNQUANTIZED)}")
        half = unquantized == "fp16"
        if half:  # FP16 Q/DQ scales need opset 19
            model = onnxio.with_opset(model, 19)
        typed, _ = insert_qdq(model, table, precision, exclude, scales_fit_fp16=half, only=only)
        if half:
            typed = to_half(typed, Precision.FP16)
    return typed
