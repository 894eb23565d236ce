"""Pinned host and device buffers that grow only when a larger shape arrives, and the copies
between them on one stream. Everything here is freed by `free()`, not left to the collector."""

from __future__ import annotations

import math

import numpy as np

from trtpipe.runtime.cuda import driver


class TensorBuffer:
    """A device allocation and a pinned host staging array for one I/O tensor."""

    def __init__(self, dtype):
        self.cuda = driver()
        self.dtype = np.dtype(dtype)
        self.capacity = 0  # bytes
        self.device = None
        self.host = None
        self.grown = 0  # how many times it was (re)allocated: tests and diagnostics read it

    @property
    def pointer(self) -> int:
        return int(self.device)

    def ensure(self, shape) -> None:
        """Make room for an array of `shape`, reallocating only when it does not fit."""
        nbytes = max(1, math.prod(shape)) * self.dtype.itemsize
        if nbytes <= self.capacity:
            return
        self.free()
        self.device = self.cuda.mem_alloc(nbytes)
        self.host = self.cuda.pagelocked_empty(nbytes // self.dtype.itemsize, self.dtype)
        self.capacity = nbytes
        self.grown += 1

    def upload(self, array: np.ndarray, stream) -> None:
        """Copy `array` to the device on `stream` through the pinned staging buffer."""
        self.ensure(array.shape)
        staged = self.host[: array.size]
        np.copyto(staged.reshape(array.shape), array, casting="no")
        self.cuda.memcpy_htod_async(self.device, staged, stream)

    def download(self, shape, stream) -> np.ndarray:
        """Queue the copy of the device data into pinned memory; return the view it lands in."""
        staged = self.host[: max(1, math.prod(shape))]
        self.cuda.memcpy_dtoh_async(staged, self.device, stream)
        return staged[: math.prod(shape)].reshape(shape)

    def free(self) -> None:
        if self.device is not None:
            self.device.free()
            self.device = None
        if self.host is not None:
            self.host.base.free()
            self.host = None
        self.capacity = 0


def device_pointer(value) -> tuple[int, tuple[int, ...], np.dtype]:
    """Return (pointer, shape, dtype) of a contiguous `__cuda_array_interface__` array (torch, cupy)."""
    from trtpipe.errors import TrtpipeError

    face = value.__cuda_array_interface__
    shape = tuple(face["shape"])
    dtype = np.dtype(face["typestr"])
    strides = face.get("strides")
    if strides is not None and tuple(strides) != _contiguous_strides(shape, dtype.itemsize):
        raise TrtpipeError("a device array passed to the engine is not contiguous; call .contiguous() first")
    return int(face["data"][0]), shape, dtype


def _contiguous_strides(shape, itemsize) -> tuple[int, ...]:
    strides, step = [], itemsize
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))
