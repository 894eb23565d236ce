"""The ONNX Runtime runner: the FP32 baseline, and the simulator of a typed ONNX on a CPU."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError, require
from trtpipe.graph.sessions import ort_reason
from trtpipe.runtime.runner import IOSpec, Runner


def _dtype(ort_type: str) -> str:
    name = ort_type.removeprefix("tensor(").removesuffix(")")
    return {"float": "float32", "double": "float64"}.get(name, name)


def _run_errors() -> tuple[type[BaseException], ...]:
    """Return what ONNX Runtime raises for a run it cannot do (its own types, with no common base)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    names = ("Fail", "InvalidArgument", "RuntimeException", "NotImplemented", "InvalidGraph", "EPFail")
    return (MemoryError, *(getattr(state, n) for n in names if hasattr(state, n)))


class OnnxRunner(Runner):
    """Runs an ONNX model in ONNX Runtime: the CUDA provider when present, else the CPU.

    Any ONNX it runs stands in for an engine, so `measured` is False whatever the precision (an FP32
    candidate, a smoothed graph say, is simulated too); the FP32 baseline is labelled by validation.
    BF16 graphs run through trtpipe.graph.simulate on the CPU provider.
    """

    tf32 = False  # FP32 means FP32 on the CUDA provider too (scripts/baseline_providers.py measures TF32)

    def __init__(self, path: str | os.PathLike, providers: list[str] | None = None, threads: int | None = None,
                 model=None, spin: bool = True):
        """Run the ONNX at `path`, or `model` (a ModelProto) named by `path` when given.

        `spin=False` lets ONNX Runtime's intra-op threads sleep between runs instead of spin-waiting
        for the next one: where other busy threads share the cores (a server's, its clients'), a
        spinning pool takes the time they need."""
        ort = require("onnxruntime", "pipeline", "running ONNX models")
        from trtpipe.graph import onnxio, simulate
        from trtpipe.graph.sessions import session

        self.path = Path(path)
        self.name = self.path.name
        model = model if model is not None else onnxio.load(self.path)
        self.precision = onnxio.typed_precision(model)
        self.measured = False  # no engine ran: ONNX Runtime stands in for it
        ort.set_default_logger_severity(3)  # a CUDA provider that cannot load is not an error here
        cuda_possible = "CUDAExecutionProvider" in ort.get_available_providers() and shutil.which("nvidia-smi")
        if providers is None:
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if cuda_possible else ["CPUExecutionProvider"]
        # A typed graph runs as written: ONNX Runtime's rewrites of Q/DQ graphs compute something else
        # than TensorRT builds. Extended fusions make QGemm, which has no float8 kernel; basic ones
        # moved EfficientNet's FP16 Q/DQ logits to cosine 0.925 from its FP32 twin (0.999 unrewritten).
        optimization = "basic" if self.precision == "fp32" else "none"
        self.session = None
        if "CUDAExecutionProvider" in providers:
            try:
                self.session = session(model, providers, optimization=optimization, threads=threads, name=str(self.path),
                                       tf32=self.tf32, spin=spin)
            except TrtpipeError:
                self.session = None  # no CUDA kernel for some type: simulate on the CPU below
        if self.session is None or self.session.get_providers()[0] != "CUDAExecutionProvider":
            self.session = session(simulate.for_cpu(model), optimization=optimization, threads=threads, name=str(self.path),
                                   spin=spin)
        unranked = {v.name for v in model.graph.input if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape")}
        self.inputs = [IOSpec(i.name, _dtype(i.type), tuple(d if isinstance(d, int) else -1 for d in i.shape),
                              i.name not in unranked) for i in self.session.get_inputs()]
        self.outputs = [IOSpec(o.name, _dtype(o.type), tuple(d if isinstance(d, int) else -1 for d in o.shape))
                        for o in self.session.get_outputs()]
        self.provider = self.session.get_providers()[0]

    def infer(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Return {output: array} for one run on `feeds`; a run ONNX Runtime refuses is one line naming the model."""
        if self.session is None:
            raise TrtpipeError(f"{self.path}: the runner was closed; open a new OnnxRunner to run it again")
        names = [o.name for o in self.outputs]
        try:
            values = self.session.run(names, {k: np.asarray(v) for k, v in feeds.items()})
        except _run_errors() as exc:
            raise TrtpipeError(f"{self.path}: ONNX Runtime failed to run the model ({ort_reason(exc)}); check the inputs' "
                               "shapes and dtypes against 'trtpipe inspect'") from None
        return dict(zip(names, values))

    def close(self) -> None:
        self.session = None

