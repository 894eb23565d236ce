"""IInt8EntropyCalibrator2 for TensorRT 10's implicit INT8 path (`--calibration implicit`).

TensorRT drives it: get_batch() is called until it returns None, each time with the input names,
and expects device pointers. Batches come from the same loader as `trtpipe calibrate`, copied into
pycuda device buffers. The cache is the same file and format as ours; when it is handed to
TensorRT its header is rewritten to this TensorRT's version and algorithm, which TensorRT checks,
so a cache from either path feeds the other.

What needs neither TensorRT nor a GPU lives in `CalibrationFeed`, tested on its own: the batches
checked against the shapes TensorRT calibrates at, the cache, and the first error. TensorRT
swallows an exception raised in its callbacks and builds anyway, so the feed keeps the error and
the build raises it after TensorRT returns, before any file is written.

The TensorRT class cannot run where trtpipe is developed (it needs TensorRT 10 and a GPU;
TensorRT 11 and TensorRT-RTX have no calibrator classes). It is written to TensorRT 10's API.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from trtpipe.calibrators.cache import CacheError, parse, render, write_cache
from trtpipe.errors import TrtpipeError


def tensorrt_version_number(version: str) -> int:
    """Return the number TensorRT writes in cache headers: 10.13.0 -> 101300, 8.6.1 -> 8601."""
    major, minor, patch = (int(p) for p in (version.split(".") + ["0", "0"])[:3])
    return major * 10000 + minor * 100 + patch if major >= 10 else major * 1000 + minor * 100 + patch


class CalibrationFeed:
    """Host batches for TensorRT's calibrator, at exactly the shapes it calibrates at.

    `shapes`: input name -> the shape TensorRT reads per batch (the calibration profile's OPT shape
    for a dynamic input, the network's shape for a static one). `reuse_cache`: hand TensorRT the
    cache when it exists; False when data was given, so TensorRT calibrates from it and rewrites it.
    """

    def __init__(self, batches: Iterable[Mapping[str, np.ndarray]], shapes: Mapping[str, Sequence[int]],
                 cache: str | os.PathLike | None, header: str, reuse_cache: bool = True):
        self.batches = iter(batches)
        self.shapes = {name: tuple(shape) for name, shape in shapes.items()}
        self.cache = Path(cache) if cache is not None else None
        self.header = header
        self.reuse_cache = reuse_cache
        self.batch_size = next(iter(self.shapes.values()))[0] if self.shapes else 1
        self.batches_read = 0
        self.error: BaseException | None = None

    def next_batch(self, names: Sequence[str]) -> dict[str, np.ndarray] | None:
        """Return the next batch as {name: contiguous array}, or None when calibration is over."""
        batch = next(self.batches, None)
        if batch is None:
            return None
        arrays = {}
        for name in names:
            if name not in batch:
                raise TrtpipeError(f"--data: the samples have no input '{name}' (they have {', '.join(sorted(batch))})")
            array = np.ascontiguousarray(batch[name])
            want = self.shapes.get(name)
            if want is not None and array.shape != want:
                if array.shape[1:] == want[1:] and array.shape[0] < want[0]:
                    return None  # a short last batch: TensorRT reads whole batches only, so calibration ends here
                raise TrtpipeError(
                    f"--data: input '{name}' comes in batches of shape {list(array.shape)}, but TensorRT calibrates at "
                    f"{list(want)} (the calibration profile's OPT shape, or the network's own); fix --shapes or the data"
                )
            arrays[name] = array
        self.batches_read += 1
        return arrays

    def read_cache(self) -> bytes | None:
        """Return the cache for TensorRT (header rewritten to its version), or None to calibrate from data."""
        if not self.reuse_cache or self.cache is None or not self.cache.is_file():
            return None
        try:
            table = parse(self.cache.read_text(), str(self.cache))
        except CacheError:
            return None  # TensorRT then calibrates from the data
        return render(table, header=self.header).encode()

    def write_cache(self, data) -> None:
        if self.cache is not None:
            write_cache(parse(bytes(data).decode(), "TensorRT"), self.cache)

    def guard(self, call, default):
        """Run `call()`; on an exception keep the first one and return `default` (TensorRT would swallow it)."""
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - kept and raised by raise_error() after the build
            if self.error is None:
                self.error = exc
            return default

    def raise_error(self) -> None:
        """Raise what went wrong inside TensorRT's callbacks, if anything did."""
        if self.error is None:
            return
        if isinstance(self.error, TrtpipeError):
            raise self.error
        raise TrtpipeError(f"implicit INT8 calibration failed inside TensorRT's calibrator: "
                           f"{self.error.__class__.__name__}: {self.error}") from None


def make_calibrator(trt, feed: CalibrationFeed):
    """Return an instance of a trt.IInt8EntropyCalibrator2 subclass bound to `trt` (TensorRT 10) and `feed`.

    Its buffers live in GPU 0's primary context, the one TensorRT builds in; call `free()` after the build.
    """
    from trtpipe.runtime.cuda import CudaContext

    ctx = CudaContext(0)
    cuda = ctx.cuda

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):
        def __init__(self):
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.feed = feed
            self.device: dict[str, object] = {}

        def get_batch_size(self) -> int:
            return feed.batch_size

        def get_batch(self, names):
            return feed.guard(lambda: self._upload(feed.next_batch(names), names), None)

        def _upload(self, batch, names):
            if batch is None:
                return None
            pointers = []
            with ctx:
                for name in names:
                    array = batch[name]
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
            return feed.guard(feed.read_cache, None)

        def write_calibration_cache(self, data) -> None:
            feed.guard(lambda: feed.write_cache(data), None)

    return EntropyCalibrator()
