"""The CUDA context the runtime works in: explicit, never `pycuda.autoinit`.

By default the device's primary context is retained, the one PyTorch and CuPy use, so pointers
from their tensors are valid here (zero-copy) and nothing competes for a second context.
"""

from __future__ import annotations

import threading

from trtpipe.errors import TrtpipeError, require


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
        self.device = cuda.Device(device)
        self.context = self.device.retain_primary_context()
        self._local = threading.local()

    @property
    def capability(self) -> tuple[int, int]:
        return self.device.compute_capability()

    @property
    def name(self) -> str:
        return self.device.name()

    def __enter__(self):
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
        """Drop our hold on the primary context (it lives on while others retain it)."""
        self.context.detach()
