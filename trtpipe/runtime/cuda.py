"""The CUDA context the runtime works in: explicit, never `pycuda.autoinit`.

By default the device's primary context is retained, the one PyTorch and CuPy use, so pointers
from their tensors are valid here (zero-copy) and nothing competes for a second context.
"""

from __future__ import annotations

import threading

from trtpipe.errors import TrtpipeError, require
from trtpipe.runtime import driver_api


def driver():
    """Return pycuda.driver, initialized."""
    cuda = require("pycuda.driver", "gpu", "running engines")
    try:
        cuda.init()
    except cuda.Error as exc:
        raise TrtpipeError(f"no usable CUDA GPU ({exc}); run engines on a machine with an NVIDIA GPU and driver") from None
    return cuda


class CudaContext:
    """A retained primary context of one device, entered with `with ctx:` from any thread."""

    def __init__(self, device: int = 0):
        self.cuda = cuda = driver()
        if not 0 <= device < cuda.Device.count():
            raise TrtpipeError(f"device {device}: this machine has {cuda.Device.count()} CUDA device(s)")
        self.ordinal = device
        self.device = cuda.Device(device)
        self.context = self.device.retain_primary_context()
        self._local = threading.local()
        self._release_lock = threading.Lock()
        with self:
            self.handle = driver_api.current_context()  # the CUcontext, to compare with a thread's current one

    def is_current(self) -> bool:
        """Whether this is already the thread's current CUDA context (in a thread where torch has run, it is):
        then the driver needs no push, only pycuda's own allocations and frees do (they enter it themselves)."""
        return self.context is not None and driver_api.current_context() == self.handle

    @property
    def capability(self) -> tuple[int, int]:
        return self.device.compute_capability()

    @property
    def name(self) -> str:
        return self.device.name()

    def __enter__(self):
        if self.context is None:
            raise TrtpipeError("the CUDA context was released (the engine is closed); open the engine again")
        depth = getattr(self._local, "depth", 0)
        if depth == 0:
            self.context.push()
        self._local.depth = depth + 1
        return self

    def __exit__(self, *exc) -> None:
        self._local.depth -= 1
        if self._local.depth == 0:
            self.cuda.Context.pop()

    def release(self) -> None:
        """Drop our retain of the primary context (it lives on while others retain it), from any thread,
        outside `with self`.

        pycuda's `detach()` of a primary context releases nothing when called from another thread
        than the one that retained it, and when it does release, it leaves the context pushed on the
        calling thread's driver stack (both seen on the H200: docs/logs/h200-probe.log). So: push it here,
        which makes pycuda release it from this thread, then pop the driver's stack ourselves.
        """
        with self._release_lock:
            context, self.context = self.context, None
        if context is None:
            return
        below = self.cuda.Context.get_current() is not None  # another pycuda context entered in this thread
        context.push()
        context.detach()  # cuDevicePrimaryCtxRelease; pycuda forgets it but leaves the driver's stack as is
        # Our push is still on the driver's stack; when a context was below it, pycuda pushed that one again.
        for _ in range(2 if below else 1):
            driver_api.pop_current()
