"""The engine's guards that need no GPU: a failed result read twice, device arrays TensorRT would reject."""

import threading

import numpy as np
import pytest

from trtpipe.errors import TrtpipeError


class _FailingDone:
    def synchronize(self):
        raise RuntimeError("an illegal memory access was encountered")


class _Session:
    """The parts of ExecutionSession a PendingResult touches: its lock, its done event, its context."""

    def __init__(self):
        import contextlib

        self.lock, self.done, self.ctx, self.pending = threading.Lock(), _FailingDone(), contextlib.nullcontext(), None

    def finished(self, pending):
        self.pending = None
        self.lock.release()


def test_a_failed_result_read_twice_never_releases_another_callers_lock():
    from trtpipe.runtime.engine import PendingResult

    session = _Session()
    session.lock.acquire()  # as run_async leaves it
    pending = PendingResult(session, {}, keep=("inputs",))
    with pytest.raises(RuntimeError, match="illegal memory access"):
        pending.result()
    assert pending.keep is None
    session.lock.acquire()  # the next caller's call is now running
    with pytest.raises(RuntimeError, match="illegal memory access"):
        pending.result()
    assert session.lock.locked()


class _CudaArray:
    def __init__(self, pointer, shape, typestr="<f4", strides=None, stream=None):
        self.__cuda_array_interface__ = {"data": (pointer, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3, "stream": stream}


def test_device_arrays_of_the_wrong_dtype_empty_or_unaligned_are_refused():
    from trtpipe.runtime.buffers import device_array
    from trtpipe.runtime.engine import check_device_array

    def check(array):
        check_device_array("m", "output buffer 'y'", device_array(array), np.dtype("float32"), 0)

    with pytest.raises(TrtpipeError, match="'y' is float16, the engine's is float32"):
        check(_CudaArray(1 << 20, (8, 8), "<f2"))
    with pytest.raises(TrtpipeError, match="'y' is empty"):
        check(_CudaArray(0, (0, 8)))
    with pytest.raises(TrtpipeError, match="not aligned to 256 bytes"):
        check(_CudaArray((1 << 20) + 32, (8, 8)))
    with pytest.raises(TrtpipeError, match="not contiguous"):
        device_array(_CudaArray(1 << 20, (8, 8), strides=(4, 32)))
    assert device_array(_CudaArray(1 << 20, (8, 1), strides=(4, 99), stream=7)).stream == 7  # size-1 strides are free
