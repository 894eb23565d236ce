"""Engine: a TensorRT or TensorRT-RTX engine run on pycuda, behind the Runner interface.

    with Engine("model.int8.sm89.engine") as engine:
        outputs = engine({"input": batch})          # numpy in, numpy out
        engine({"input": torch_cuda_tensor})        # device memory in: no host copy

The sidecar is checked before TensorRT reads the file: the engine's sha256, its backend, and that
this GPU is the engine's target. One engine serves many threads, one call at a time (a lock around
its single execution context); services wanting parallel calls open one Engine per worker.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError, require
from trtpipe.runtime import driver_api
from trtpipe.runtime.buffers import ALIGNMENT, CU_STREAM_LEGACY, DeviceArray, TensorBuffer, as_device_array, device_array
from trtpipe.runtime.cuda import CudaContext
from trtpipe.runtime.cuda_graph import CapturedGraph
from trtpipe.runtime.dtypes import numpy_dtype
from trtpipe.runtime.logger import shared_logger
from trtpipe.runtime.runner import IOSpec, Runner, check_shape
from trtpipe.runtime.sidecar import EngineInfo, verify_engine

BACKEND_MODULES = {"tensorrt": ("tensorrt", "tensorrt"), "tensorrt-rtx": ("tensorrt_rtx", "rtx")}


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


def check_device_array(session: str, what: str, array: DeviceArray, dtype: np.dtype, device: int) -> None:
    """Raise unless `array` is something TensorRT may read or write as `what`: its dtype, not empty,
    256-byte aligned, on this engine's GPU. TensorRT checks only the alignment, and only by returning
    False from set_tensor_address."""
    if array.dtype != dtype:
        raise TrtpipeError(f"{session}: {what} is {array.dtype}, the engine's is {dtype}; convert it first")
    if array.pointer == 0 or math.prod(array.shape) == 0:
        raise TrtpipeError(f"{session}: {what} is empty (shape {list(array.shape)}); the engine needs at least one element")
    if array.pointer % ALIGNMENT:
        raise TrtpipeError(f"{session}: {what} starts at an address not aligned to {ALIGNMENT} bytes (a view such as x[1:]); "
                           "pass a tensor of its own (.clone())")
    where = array.device if array.device is not None else driver_api.pointer_device(array.pointer)
    if where is not None and where != device:
        raise TrtpipeError(f"{session}: {what} is on CUDA device {where}, the engine runs on device {device}; move it first")


class ExecutionSession:
    """Binds inputs and outputs to an execution context and runs it on one stream.

    `context` needs TensorRT's IExecutionContext methods set_input_shape, get_tensor_shape,
    set_tensor_address and execute_async_v3; the GPU tests pass a stand-in that launches a kernel.
    A call is prepare (bind and upload) + execute + fetch (download); `bench` times each stage.

    The context keeps what it was given: shapes and addresses are set only when they differ from the
    last call's, and output shapes are asked for only when an input shape changed. With `cuda_graph`,
    a call whose bindings are those of a plain enqueue before it (TensorRT has then made what it
    defers) captures the enqueue as a CUDA graph, and later calls with those bindings launch it; any
    rebinding drops it. A capture that fails (an engine whose enqueue synchronizes, say) leaves the
    session on plain enqueues, the reason in `graph_refused`.
    """

    def __init__(self, context, inputs: list[IOSpec], outputs: list[IOSpec], cuda_context: CudaContext, name: str,
                 cuda_graph: bool = False):
        self.context = context
        self.inputs, self.outputs = inputs, outputs
        self.ctx = cuda_context
        self.name = name
        self.cuda = cuda_context.cuda
        self.buffers = {spec.name: TensorBuffer(spec.dtype, cuda_context) for spec in inputs + outputs}
        self.dtypes = {spec.name: np.dtype(spec.dtype) for spec in inputs + outputs}
        self.lock = threading.Lock()
        self.pending: PendingResult | None = None
        self.closed = False
        # What the context holds now (None: not set, or unknown after a refusal).
        self.bound_shapes: list = [None] * len(inputs)
        self.bound_addresses: list = [None] * (len(inputs) + len(outputs))
        self.output_shapes: list | None = None  # asked of the context again after any input shape changes
        self.checked: list = [None] * (len(inputs) + len(outputs))  # the last device array each binding accepted
        self.settled = False  # whether a plain enqueue has run since the last shape or address was set
        self.use_graph = cuda_graph
        self.graph: CapturedGraph | None = None
        self.graph_refused: str | None = None
        with self.ctx:
            self.stream = self.cuda.Stream()
            self.stream_handle = self.stream.handle
            self.done: driver_api.Event | None = driver_api.Event()  # recorded after a call's work; None once freed
            self.ready = driver_api.event_create()  # orders our stream after a producer's

    def _bind(self, index: int, spec: IOSpec, pointer: int) -> None:
        self._rebinding()
        # TensorRT returns False (and keeps the previous call's address bound) for an address it rejects.
        if not self.context.set_tensor_address(spec.name, pointer):
            raise TrtpipeError(f"{self.name}: the engine rejected the address of '{spec.name}' (unaligned or null)")
        self.bound_addresses[index] = pointer

    def _set_shape(self, index: int, spec: IOSpec, shape: tuple) -> None:
        self._rebinding()
        self.bound_shapes[index] = None  # TensorRT's answer to a refused shape leaves its state unsaid
        self.output_shapes = None
        if not self.context.set_input_shape(spec.name, shape):
            raise TrtpipeError(f"{self.name}: input '{spec.name}' shape {list(shape)} is outside the engine's "
                               "optimization profile; rebuild with wider --shapes")
        self.bound_shapes[index] = shape

    def _rebinding(self) -> None:
        """A shape or an address is about to change: a graph captured with the old ones must not run."""
        self.settled = False
        graph = self.graph
        if graph is not None:
            self.graph = None
            graph.destroy()

    def prepare(self, feeds: Mapping, out: Mapping | None = None) -> list:
        """Bind inputs (uploading host arrays) and outputs; return the downloads `fetch` queues. Caller holds the lock."""
        checked = self.checked
        for index, spec in enumerate(self.inputs):
            value = feeds[spec.name]
            array = as_device_array(value)
            if array is not None:
                if array != checked[index]:  # the checks depend on nothing else: an array like the last passed
                    if array.shape != self.bound_shapes[index]:
                        check_shape(self.name, spec, array.shape)
                    check_device_array(self.name, f"input '{spec.name}'", array, self.dtypes[spec.name], self.ctx.ordinal)
                    checked[index] = array
                if array.stream is not None and array.stream != CU_STREAM_LEGACY:
                    # The producer's stream may still be writing it (torch's side streams are non-blocking).
                    # Our stream is a blocking one: CUDA already orders it after the legacy default stream.
                    driver_api.stream_wait(self.stream_handle, array.stream, self.ready)
                shape, pointer = array.shape, array.pointer
            else:
                value = np.ascontiguousarray(value)
                shape = value.shape
                buffer = self.buffers[spec.name]
                buffer.upload(value, self.stream)
                pointer = buffer.pointer
            if self.bound_shapes[index] != shape:
                self._set_shape(index, spec, shape)
            if self.bound_addresses[index] != pointer:
                self._bind(index, spec, pointer)
        if self.output_shapes is None:
            shapes = [tuple(self.context.get_tensor_shape(spec.name)) for spec in self.outputs]
            for spec, shape in zip(self.outputs, shapes):
                if any(d < 0 for d in shape):
                    raise TrtpipeError(f"{self.name}: output '{spec.name}' has a data-dependent shape, which this runtime does not size")
            self.output_shapes = shapes
            checked[len(self.inputs):] = [None] * len(self.outputs)  # an output buffer's size is checked against these
        downloads: list[tuple[str, TensorBuffer | None, object]] = []  # (output, its buffer, shape or destination)
        for index, (spec, shape) in enumerate(zip(self.outputs, self.output_shapes), len(self.inputs)):
            if out is not None and spec.name in out:
                array = device_array(out[spec.name])
                if array != checked[index]:
                    check_device_array(self.name, f"output buffer '{spec.name}'", array, self.dtypes[spec.name], self.ctx.ordinal)
                    need = math.prod(shape) * array.dtype.itemsize
                    if array.nbytes < need:
                        raise TrtpipeError(f"{self.name}: output buffer '{spec.name}' holds {array.nbytes} bytes "
                                           f"({list(array.shape)}), the output needs {need} ({list(shape)})")
                    checked[index] = array
                downloads.append((spec.name, None, out[spec.name]))
                pointer = array.pointer
            else:
                buffer = self.buffers[spec.name]
                buffer.ensure(shape)
                pointer = buffer.pointer
                downloads.append((spec.name, buffer, shape))
            if self.bound_addresses[index] != pointer:
                self._bind(index, spec, pointer)
        return downloads

    def enqueue(self) -> None:
        """Queue the engine's execution itself (TensorRT's execute_async_v3) on the stream."""
        if not self.context.execute_async_v3(self.stream_handle):
            raise TrtpipeError(f"{self.name}: execution failed; rerun with the TensorRT logger at VERBOSE")

    def execute(self) -> None:
        """Queue the execution: the captured graph when the bindings are those it was captured with."""
        if self.graph is not None:
            self.graph.launch()
            return
        if self.use_graph and self.settled and self.graph_refused is None:
            try:
                self.graph = CapturedGraph(self.stream_handle, self.enqueue)
            except Exception as exc:  # noqa: BLE001 - any refusal means: run without a graph
                self.graph_refused = f"{type(exc).__name__}: {exc}"
            else:
                self.graph.launch()
                return
        self.enqueue()
        self.settled = True

    def launch(self, feeds: Mapping, out: Mapping | None = None, wait: bool = False) -> dict:
        """Queue copies and execution, then wait for them (`wait`) or record `done`; return {output: pinned
        view or device array}. Caller holds the lock."""
        if self.closed:
            raise TrtpipeError(f"{self.name}: the engine is closed")
        if self.ctx.is_current():  # pushing and popping it costs more than the rest of a call's bookkeeping
            return self._queue(feeds, out, wait)
        with self.ctx:
            return self._queue(feeds, out, wait)

    def _queue(self, feeds: Mapping, out: Mapping | None, wait: bool) -> dict:
        downloads = self.prepare(feeds, out)
        self.execute()
        views = self.fetch(downloads)
        if wait:
            driver_api.stream_synchronize(self.stream_handle)
        else:
            assert self.done is not None  # freed only after `closed` is set, which the caller checked
            self.done.record(self.stream_handle)
        return views

    def fetch(self, downloads: list) -> dict:
        """Queue the downloads; return {output: pinned view or the caller's device array}."""
        return {name: (buffer.download(target, self.stream) if buffer is not None else target)
                for name, buffer, target in downloads}

    def run(self, feeds: Mapping, out: Mapping | None = None) -> dict:
        with self.lock:
            return copy_out(self.launch(feeds, out, wait=True))

    def run_async(self, feeds: Mapping, out: Mapping | None = None) -> PendingResult:
        self.lock.acquire()
        try:
            views = self.launch(feeds, out)
        except BaseException:
            self.lock.release()
            raise
        # The result keeps the caller's arrays alive until it is read: the GPU reads and writes them until then.
        self.pending = PendingResult(self, views, keep=(feeds, out))
        return self.pending

    def finished(self, pending: PendingResult) -> None:
        """Called once by `pending` when its result is read: the engine takes calls again."""
        self.pending = None
        self.lock.release()

    def free(self) -> None:
        """Wait for the work in flight (reading an unread result), then free every buffer."""
        while True:
            pending = self.pending
            if pending is not None:
                with contextlib.suppress(Exception):  # closing: its reader gets the error
                    pending.result()
            if self.lock.acquire(timeout=0.05):
                break
        try:
            if self.closed:
                return
            self.closed = True
            with self.ctx:
                self.stream.synchronize()
                if self.graph is not None:
                    self.graph.destroy()
                    self.graph = None
                for buffer in self.buffers.values():
                    buffer.free()
                driver_api.event_destroy(self.ready)
                if self.done is not None:
                    self.done.destroy()
                # pycuda destroys a stream or event in the context it was made in, and cannot once that
                # context is released: dropped later, each leaked ~0.5 MiB of device memory (seen on the H200).
                # TensorRT's execution context, too, goes while its CUDA context is current.
                self.context = self.stream = self.done = None
        finally:
            self.lock.release()


class PendingResult:
    """An inference in flight; the engine takes no other call until `result()` is read."""

    def __init__(self, session: ExecutionSession, views: dict, keep=None):
        self.session, self.views, self.keep = session, views, keep
        self._lock = threading.Lock()
        self._finished = False
        self._result: dict | None = None
        self._error: BaseException | None = None

    def done(self) -> bool:
        return self._finished or self.session.done is None or self.session.done.query()

    def result(self) -> dict:
        """Wait for the run and return its outputs; every later call returns (or raises) the same."""
        with self._lock:
            if not self._finished:
                try:
                    with self.session.ctx:
                        done = self.session.done
                        assert done is not None, "the engine was closed"  # raised to every reader, as any error
                        done.synchronize()
                    self._result = copy_out(self.views)
                except BaseException as exc:  # noqa: BLE001 - kept and raised to every reader
                    self._error = exc
                finally:
                    self._finished = True
                    self.keep = None
                    self.session.finished(self)
        if self._error is not None:
            raise self._error
        assert self._result is not None  # finished without an error: copy_out gave the outputs
        return self._result


class Engine(Runner):
    """A built engine on this machine's GPU, checked against its sidecar before it is loaded."""

    measured = True

    def __init__(self, path: str | os.PathLike, device: int = 0, verbose: bool = False, cuda_graph: bool = False):
        """`cuda_graph`: replay the enqueue as a CUDA graph once a call repeats the previous call's shapes and
        addresses (see ExecutionSession). Off by default: while a graph is being captured (once per new
        binding), CUDA fails another thread's use of the legacy default stream (torch's default stream) or a
        device-wide synchronize (torch.cuda.synchronize()), in that thread."""
        self.path = Path(path)
        self.cuda_graph = cuda_graph
        self.name = self.path.name
        self.session: ExecutionSession | None = None
        self.info = verify_engine(self.path)  # the sidecar and the engine's sha256, before TensorRT or a GPU
        if self.info.backend not in BACKEND_MODULES:
            raise TrtpipeError(f"{self.path}: built with unknown backend '{self.info.backend}'; rebuild the engine")
        module, extra = BACKEND_MODULES[self.info.backend]
        trt = require(module, extra, f"running {self.info.backend} engines")
        if getattr(trt, "__version__", None) != self.info.backend_version:
            raise TrtpipeError(f"{self.path}: built with {self.info.backend} {self.info.backend_version}, this machine has "
                               f"{getattr(trt, '__version__', '?')}; rebuild the engine here or install that version")
        self.trt = trt
        self.ctx: CudaContext | None = CudaContext(device)  # None once closed
        try:
            self._load(trt, verbose, self.ctx)
        except BaseException:
            self.close()  # the context retain, and whatever TensorRT made, go back
            raise

    def _load(self, trt, verbose: bool, ctx: CudaContext) -> None:
        check_capability(self.path, self.info, ctx.capability)
        with ctx:
            self.runtime = trt.Runtime(shared_logger(trt, verbose))
            self.engine = self.runtime.deserialize_cuda_engine(self.path.read_bytes())
            if self.engine is None:
                raise TrtpipeError(f"{self.path}: {self.info.backend} could not load the engine; rebuild it for this GPU")
            inputs: list[IOSpec] = []
            outputs: list[IOSpec] = []
            for i in range(self.engine.num_io_tensors):
                name = self.engine.get_tensor_name(i)
                is_input = self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
                if is_input and self.engine.is_shape_inference_io(name):
                    raise TrtpipeError(f"{self.path}: input '{name}' is a shape tensor (TensorRT reads its values on the host), "
                                       "which this runtime does not feed; make it a constant in the ONNX and rebuild")
                kind = "input" if is_input else "output"
                dtype = numpy_dtype(self.engine.get_tensor_dtype(name), f"{self.path}: {kind} '{name}'")
                spec = IOSpec(name, dtype.name, tuple(self.engine.get_tensor_shape(name)))
                (inputs if is_input else outputs).append(spec)
            context = self.engine.create_execution_context()
            if context is None:  # TensorRT returns None when the activation memory cannot be allocated
                raise TrtpipeError(f"{self.path}: TensorRT could not create an execution context (out of GPU memory?); "
                                   "free GPU memory or open fewer engines")
        self.inputs, self.outputs = inputs, outputs
        self.session = ExecutionSession(context, inputs, outputs, ctx, self.name, self.cuda_graph)

    def infer(self, feeds: Mapping, out: Mapping | None = None) -> dict:
        """Run synchronously; numpy outputs are fresh arrays, device outputs the buffers given in `out`."""
        return self._open().run(feeds, out)

    def infer_async(self, inputs, out: Mapping | None = None) -> PendingResult:
        """Queue a run and return at once; `.result()` waits for it. The result holds the inputs until read."""
        return self._open().run_async(self.feeds(inputs), out)

    def _open(self) -> ExecutionSession:
        if self.session is None:
            raise TrtpipeError(f"{self.path}: the engine is closed; open it again")
        return self.session

    def close(self) -> None:
        """Free everything, waiting for (and reading) a result still in flight; safe to call twice."""
        ctx = getattr(self, "ctx", None)
        if ctx is None:
            return
        if self.session is not None:
            self.session.free()
        if ctx.context is not None:
            with ctx:  # TensorRT frees its objects in the context they were made in
                if self.session is not None:
                    self.session.context = None
                self.session = None
                self.engine = None
                self.runtime = None
        ctx.release()
        self.ctx = None
