"""IInt8EntropyCalibrator2 for TensorRT 10's implicit INT8 path (`--calibration implicit`).

TensorRT drives it: get_batch() is called until it returns None, each time with the input names,
and expects device pointers. Batches come from the same loader as `trtpipe calibrate`, copied into
pycuda device buffers. The cache is the same file and format as ours; when it is handed to
TensorRT its header is rewritten to this TensorRT's version and algorithm, which TensorRT checks,
so a cache from either path feeds the other.

This class cannot run where trtpipe is developed (it needs TensorRT 10 and a GPU; TensorRT 11 and
TensorRT-RTX have no calibrator classes). It is written to TensorRT 10's documented Python API.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from calibrators.cache import CacheError, parse, render, write_cache


def tensorrt_version_number(version: str) -> int:
    """Return the number TensorRT writes in cache headers: 10.13.0 -> 101300, 8.6.1 -> 8601."""
    major, minor, patch = (int(p) for p in (version.split(".") + ["0", "0"])[:3])
    return major * 10000 + minor * 100 + patch if major >= 10 else major * 1000 + minor * 100 + patch


def make_calibrator(trt, cache: str | os.PathLike | None, batches: Iterable[Mapping[str, np.ndarray]], batch_size: int):
    """Return an instance of a trt.IInt8EntropyCalibrator2 subclass bound to `trt` (TensorRT 10).

    Its buffers live in GPU 0's primary context, the one TensorRT builds in; call `free()` after the build.
    """
    from trtpipe.runtime.cuda import CudaContext

    ctx = CudaContext(0)
    cuda = ctx.cuda

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.cache = Path(cache) if cache is not None else None
            self.batches = iter(batches)
            self.size = batch_size
            self.device: dict[str, object] = {}
            self.header = f"TRT-{tensorrt_version_number(trt.__version__)}-EntropyCalibration2"

        def get_batch_size(self) -> int:
            return self.size

        def get_batch(self, names):
            batch = next(self.batches, None)
            # TensorRT reads a full batch of the calibration profile's shape: a short last batch ends it.
            if batch is None or len(next(iter(batch.values()))) != self.size:
                return None
            pointers = []
            with ctx:
                for name in names:
                    array = np.ascontiguousarray(batch[name])
                    if name not in self.device or self.device[name][1] < array.nbytes:
                        if name in self.device:
                            self.device[name][0].free()
                        self.device[name] = (cuda.mem_alloc(array.nbytes), array.nbytes)
                    cuda.memcpy_htod(self.device[name][0], array)
                    pointers.append(int(self.device[name][0]))
            return pointers

        def free(self) -> None:
            with ctx:
                for allocation, _ in self.device.values():
                    allocation.free()
            self.device.clear()
            ctx.release()

        def read_calibration_cache(self):
            if self.cache is None or not self.cache.is_file():
                return None
            try:
                table = parse(self.cache.read_text(), str(self.cache))
            except CacheError:
                return None  # TensorRT then calibrates from the data
            return render(table, header=self.header).encode()

        def write_calibration_cache(self, data) -> None:
            if self.cache is None:
                return
            write_cache(parse(bytes(data).decode(), "TensorRT"), self.cache)

    return EntropyCalibrator()
