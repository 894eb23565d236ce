"""Engine: a TensorRT or TensorRT-RTX engine run on pycuda, behind the Runner interface.

    with Engine("model.int8.sm89.engine") as engine:
        outputs = engine({"input": batch})          # numpy in, numpy out
        engine({"input": torch_cuda_tensor})        # device memory in: no host copy

The sidecar is checked before TensorRT reads the file: the engine's sha256, its backend, and that
this GPU is the engine's target. One engine serves many threads, one call at a time (a lock around
its single execution context); services wanting parallel calls open one Engine per worker.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError, require
from trtpipe.files import sha256
from trtpipe.runtime.buffers import TensorBuffer, device_pointer
from trtpipe.runtime.cuda import CudaContext
from trtpipe.runtime.runner import IOSpec, Runner, check_shape
from trtpipe.runtime.sidecar import EngineInfo, read_sidecar

BACKEND_MODULES = {"tensorrt": ("tensorrt", "tensorrt"), "tensorrt-rtx": ("tensorrt_rtx", "rtx")}


def check_engine_file(path: Path, info: EngineInfo) -> None:
    """Raise if the engine file is missing or not the one its sidecar describes (truncated, replaced)."""
    if not path.is_file():
        raise TrtpipeError(f"{path}: no such engine; build it with 'trtpipe build'")
    if sha256(path) != info.engine_sha256:
        raise TrtpipeError(f"{path}: the file does not match its sidecar's sha256 (truncated or replaced); rebuild the engine")


def check_capability(path: Path, info: EngineInfo, capability: tuple[int, int]) -> None:
    """Raise if the engine was built for another GPU than one of compute capability `capability`."""
    if tuple(capability) != info.capability:
        raise TrtpipeError(
            f"{path}: built for {info.target} (compute capability {info.compute_capability}) but this GPU is "
            f"{capability[0]}.{capability[1]}; build with --target sm_{capability[0]}{capability[1]}"
        )


def copy_out(views: dict) -> dict:
    """Return finished outputs: numpy views copied out of the pinned buffers the next call reuses,
    device arrays the caller passed in `out` as they are."""
    return {k: (np.array(v) if isinstance(v, np.ndarray) else v) for k, v in views.items()}


class ExecutionSession:
    """Binds inputs and outputs to an execution context and runs it on one stream.

    `context` needs TensorRT's IExecutionContext methods set_input_shape, get_tensor_shape,
    set_tensor_address and execute_async_v3; the GPU tests pass a stand-in that launches a kernel.
    """

    def __init__(self, context, inputs: list[IOSpec], outputs: list[IOSpec], cuda_context: CudaContext, name: str):
        self.context = context
        self.inputs, self.outputs = inputs, outputs
        self.ctx = cuda_context
        self.name = name
        self.cuda = cuda_context.cuda
        with self.ctx:
            self.stream = self.cuda.Stream()
            self.done = self.cuda.Event()
        self.buffers = {spec.name: TensorBuffer(spec.dtype) for spec in inputs + outputs}
        self.lock = threading.Lock()

    def launch(self, feeds: Mapping, out: Mapping | None = None) -> dict:
        """Queue copies and execution; return {output: pinned view or device array}. Caller holds the lock."""
        with self.ctx:
            for spec in self.inputs:
                value = feeds[spec.name]
                if hasattr(value, "__cuda_array_interface__"):
                    pointer, shape, dtype = device_pointer(value)
                    check_shape(self.name, spec, shape)
                    if dtype != np.dtype(spec.dtype):
                        raise TrtpipeError(f"{self.name}: input '{spec.name}' is {dtype}, the engine takes {spec.dtype}")
                else:
                    value = np.ascontiguousarray(value)
                    shape = value.shape
                    buffer = self.buffers[spec.name]
                    buffer.upload(value, self.stream)
                    pointer = buffer.pointer
                if not self.context.set_input_shape(spec.name, tuple(shape)):
                    raise TrtpipeError(f"{self.name}: input '{spec.name}' shape {list(shape)} is outside the engine's "
                                       "optimization profile; rebuild with wider --shapes")
                self.context.set_tensor_address(spec.name, pointer)
            results = {}
            pending = []
            for spec in self.outputs:
                shape = tuple(self.context.get_tensor_shape(spec.name))
                if any(d < 0 for d in shape):
                    raise TrtpipeError(f"{self.name}: output '{spec.name}' has a data-dependent shape, which this runtime does not size")
                if out is not None and spec.name in out:
                    pointer, given, _ = device_pointer(out[spec.name])
                    if math.prod(given) < math.prod(shape):
                        raise TrtpipeError(f"{self.name}: output buffer '{spec.name}' holds {list(given)}, needs {list(shape)}")
                    results[spec.name] = out[spec.name]
                else:
                    buffer = self.buffers[spec.name]
                    buffer.ensure(shape)
                    pointer = buffer.pointer
                    pending.append((spec.name, buffer, shape))
                self.context.set_tensor_address(spec.name, pointer)
            if not self.context.execute_async_v3(self.stream.handle):
                raise TrtpipeError(f"{self.name}: execution failed; rerun with the TensorRT logger at VERBOSE")
            for name, buffer, shape in pending:
                results[name] = buffer.download(shape, self.stream)
            self.done.record(self.stream)
        return results

    def run(self, feeds: Mapping, out: Mapping | None = None) -> dict:
        with self.lock:
            views = self.launch(feeds, out)
            self.done.synchronize()
            return copy_out(views)

    def run_async(self, feeds: Mapping, out: Mapping | None = None) -> PendingResult:
        self.lock.acquire()
        try:
            views = self.launch(feeds, out)
        except BaseException:
            self.lock.release()
            raise
        return PendingResult(self, views)

    def free(self) -> None:
        with self.lock, self.ctx:
            self.stream.synchronize()
            for buffer in self.buffers.values():
                buffer.free()


class PendingResult:
    """An inference in flight; the engine takes no other call until `result()` is read."""

    def __init__(self, session: ExecutionSession, views: dict):
        self.session, self.views, self._result = session, views, None

    def done(self) -> bool:
        return self._result is not None or self.session.done.query()

    def result(self) -> dict:
        if self._result is None:
            try:
                self.session.done.synchronize()
                self._result = copy_out(self.views)
            finally:
                self.session.lock.release()
        return self._result


class Engine(Runner):
    """A built engine on this machine's GPU, checked against its sidecar before it is loaded."""

    measured = True

    def __init__(self, path: str | os.PathLike, device: int = 0, verbose: bool = False):
        self.path = Path(path)
        self.name = self.path.name
        self.info = read_sidecar(self.path)
        if self.info.backend not in BACKEND_MODULES:
            raise TrtpipeError(f"{self.path}: built with unknown backend '{self.info.backend}'; rebuild the engine")
        check_engine_file(self.path, self.info)  # before anything needs TensorRT or a GPU
        module, extra = BACKEND_MODULES[self.info.backend]
        trt = require(module, extra, f"running {self.info.backend} engines")
        if getattr(trt, "__version__", None) != self.info.backend_version:
            raise TrtpipeError(f"{self.path}: built with {self.info.backend} {self.info.backend_version}, this machine has "
                               f"{getattr(trt, '__version__', '?')}; rebuild the engine here or install that version")
        self.ctx = CudaContext(device)
        check_capability(self.path, self.info, self.ctx.capability)
        self.trt = trt
        with self.ctx:
            self.logger = trt.Logger(trt.Logger.VERBOSE if verbose else trt.Logger.ERROR)
            self.runtime = trt.Runtime(self.logger)
            self.engine = self.runtime.deserialize_cuda_engine(self.path.read_bytes())
            if self.engine is None:
                raise TrtpipeError(f"{self.path}: {self.info.backend} could not load the engine; rebuild it for this GPU")
            context = self.engine.create_execution_context()
        inputs, outputs = [], []
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            spec = IOSpec(name, np.dtype(trt.nptype(self.engine.get_tensor_dtype(name))).name,
                          tuple(self.engine.get_tensor_shape(name)))
            (inputs if self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT else outputs).append(spec)
        self.inputs, self.outputs = inputs, outputs
        self.session = ExecutionSession(context, inputs, outputs, self.ctx, self.name)

    def infer(self, feeds: Mapping, out: Mapping | None = None) -> dict:
        """Run synchronously; numpy outputs are fresh arrays, device outputs the buffers given in `out`."""
        return self.session.run(feeds, out)

    def infer_async(self, inputs, out: Mapping | None = None) -> PendingResult:
        """Queue a run and return at once; `.result()` waits for it."""
        return self.session.run_async(self.feeds(inputs), out)

    def close(self) -> None:
        if getattr(self, "session", None) is None:
            return
        self.session.free()
        with self.ctx:
            self.session.context = None
            self.session = None
            self.engine = None
            self.runtime = None
        self.ctx.release()
