"""Pinned host and device buffers that grow only when a larger shape arrives, and the copies
between them on one stream. Everything here is freed by `free()`, not left to the collector."""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.runtime import driver_api
from trtpipe.runtime.cuda import driver


class TensorBuffer:
    """A device allocation and a pinned host staging array for one I/O tensor."""

    def __init__(self, dtype, ctx):
        self.cuda = driver()
        self.ctx = ctx  # pycuda allocates and frees only in a context it entered itself
        self.dtype = np.dtype(dtype)
        self.capacity = 0  # bytes
        self.device = None
        self.host = None
        self.pointer = 0  # the device allocation's address
        self.host_pointer = 0
        self.grown = 0  # how many times it was (re)allocated: tests and diagnostics read it
        self.staged = 0  # bytes of the last upload in the pinned buffer, for push()

    def ensure(self, shape) -> None:
        """Make room for an array of `shape`, reallocating only when it does not fit."""
        nbytes = max(1, math.prod(shape)) * self.dtype.itemsize
        if nbytes <= self.capacity:
            return
        with self.ctx:
            self.free()
            self.device = self.cuda.mem_alloc(nbytes)
            self.host = self.cuda.pagelocked_empty(nbytes // self.dtype.itemsize, self.dtype)
        self.pointer, self.host_pointer = int(self.device), self.host.ctypes.data
        self.capacity = nbytes
        self.grown += 1

    def upload(self, array: np.ndarray, stream) -> None:
        """Copy `array` to the device on `stream` through the pinned staging buffer."""
        self.ensure(array.shape)
        np.copyto(self.host[: array.size].reshape(array.shape), array, casting="no")
        self.staged = array.nbytes
        self.push(stream)

    def push(self, stream) -> None:
        """Copy the staged host data to the device again (the copy alone: what `bench` times as H2D)."""
        driver_api.copy_to_device(self.pointer, self.host_pointer, self.staged, stream.handle)

    def download(self, shape, stream) -> np.ndarray:
        """Queue the copy of the device data into pinned memory; return the view it lands in."""
        size = math.prod(shape)
        driver_api.copy_to_host(self.host_pointer, self.pointer, max(1, size) * self.dtype.itemsize, stream.handle)
        return self.host[:size].reshape(shape)

    def free(self) -> None:
        """Free both allocations; the caller has entered the context."""
        if self.device is not None:
            self.device.free()
            self.device = None
        if self.host is not None:
            self.host.base.free()
            self.host = None
        self.capacity = self.pointer = self.host_pointer = 0


# TensorRT requires every tensor address to be aligned to 256 bytes (IExecutionContext::setTensorAddress).
ALIGNMENT = 256
CU_STREAM_LEGACY = 1  # CUDA's legacy default stream, as the CUDA Array Interface v3 names it


class DeviceArray(NamedTuple):
    """What the runtime reads of a caller's device array: where, what, and the stream that wrote it
    (a tuple: made on every call, in a third of a dataclass's time)."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype
    stream: int | None  # the producer's stream to wait for; None: ready now
    device: int | None = None  # CUDA device ordinal, when the array says (torch does)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def is_device_array(value) -> bool:
    """Whether `value` is GPU memory: a CUDA torch tensor, or anything with `__cuda_array_interface__`
    (asked of torch, that property builds the whole interface, so torch is asked `.is_cuda`)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return value.is_cuda
    return hasattr(value, "__cuda_array_interface__")


def as_device_array(value) -> DeviceArray | None:
    """Return `value` as a DeviceArray when it is GPU memory, None when it is host data (is_device_array and
    device_array in one look, for the call path)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _torch_array(value, torch) if value.is_cuda else None
    return device_array(value) if hasattr(value, "__cuda_array_interface__") else None


def device_array(value) -> DeviceArray:
    """Return a contiguous device array (torch, cupy, numba: `__cuda_array_interface__`) as a DeviceArray."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return _torch_array(value, torch)
    face = value.__cuda_array_interface__
    shape = tuple(face["shape"])
    dtype = np.dtype(face["typestr"])
    strides = face.get("strides")
    if strides is not None and not _contiguous(shape, strides, dtype.itemsize):
        raise TrtpipeError("a device array passed to the engine is not contiguous; call .contiguous() first")
    return DeviceArray(int(face["data"][0]), shape, dtype, face.get("stream"))  # v3: the consumer waits for `stream`


def _torch_array(tensor, torch) -> DeviceArray:
    """A torch tensor read directly: its `__cuda_array_interface__` costs tens of µs a call, and (version 2)
    names no stream; torch's own contract is that a tensor may be used on the current stream."""
    if not tensor.is_cuda:
        raise TrtpipeError("a torch tensor passed to the engine as device memory is on the CPU; pass tensor.cuda() or numpy")
    if not tensor.is_contiguous():
        raise TrtpipeError("a device array passed to the engine is not contiguous; call .contiguous() first")
    device = tensor.get_device()
    stream = (_raw_stream or _current_stream(torch))(device) or CU_STREAM_LEGACY
    return DeviceArray(tensor.data_ptr(), tuple(tensor.shape), _numpy_dtype(tensor.dtype), stream, device)


_NUMPY_DTYPES: dict = {}  # torch dtype -> numpy dtype


def _numpy_dtype(torch_dtype) -> np.dtype:
    """Return the numpy dtype of a torch dtype, from a table after the first time (str() and np.dtype() cost µs)."""
    dtype = _NUMPY_DTYPES.get(torch_dtype)
    if dtype is None:
        name = str(torch_dtype).removeprefix("torch.")
        if name in ("bfloat16", "float8_e4m3fn"):
            import ml_dtypes  # noqa: F401 - gives numpy these dtypes
        dtype = _NUMPY_DTYPES[torch_dtype] = np.dtype(name)
    return dtype


_raw_stream = None  # torch's raw current-stream getter, once found


def _current_stream(torch):
    """Return a function of a device ordinal giving torch's current stream there as a raw handle (0: the
    legacy default stream). torch.cuda.current_stream() builds a Stream object, several µs a call; the raw
    getter (torch 2.0 on, what torch's own compiled code calls) returns the handle alone."""
    global _raw_stream
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        _raw_stream = raw
        return raw
    return lambda device: torch.cuda.current_stream(device).cuda_stream


def _contiguous(shape, strides, itemsize) -> bool:
    """Row-major and dense; the stride of a dimension of size 1 does not matter (torch sets it freely)."""
    step = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim != 1 and stride != step:
            return False
        step *= dim
    return True
