"""Benchmark: the runtime's host<->device copies against PyTorch's on the same GPU, in the same run.

Two paths each way: pinned memory (the transfer itself) and ordinary numpy memory (what a service
hands the runtime, staged through its pinned buffer). Each copy is timed with a host clock around
the copy and a synchronize, the median of many; the ratio is trtpipe's GB/s over torch's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def median_seconds(fn, sync, repeats: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    import torch

    from trtpipe.runtime.buffers import TensorBuffer
    from trtpipe.runtime.cuda import CudaContext

    n = args.mib << 20 >> 2
    gb = n * 4 / 1e9
    ctx = CudaContext(0)
    torch.cuda.init()
    with ctx:
        cuda = ctx.cuda
        stream = cuda.Stream()
        buffer = TensorBuffer(np.float32, ctx)
        buffer.ensure((n,))
        pageable = np.random.default_rng(0).random(n, dtype=np.float32)
        buffer.host[:] = pageable
        r = args.repeats
        ours = {
            "host->device, pinned": median_seconds(lambda: cuda.memcpy_htod_async(buffer.device, buffer.host, stream), stream.synchronize, r),
            "device->host, pinned": median_seconds(lambda: cuda.memcpy_dtoh_async(buffer.host, buffer.device, stream), stream.synchronize, r),
            "host->device, from numpy": median_seconds(lambda: buffer.upload(pageable, stream), stream.synchronize, r),
            "device->host, to numpy": median_seconds(lambda: (buffer.download((n,), stream), stream.synchronize(),
                                                              np.array(buffer.host)), stream.synchronize, r),
        }
        t_pinned = torch.empty(n, dtype=torch.float32).pin_memory()
        t_dev = torch.empty(n, dtype=torch.float32, device="cuda")
        t_src = torch.from_numpy(pageable)
        sync = torch.cuda.synchronize
        theirs = {
            "host->device, pinned": median_seconds(lambda: t_dev.copy_(t_pinned, non_blocking=True), sync, r),
            "device->host, pinned": median_seconds(lambda: t_pinned.copy_(t_dev, non_blocking=True), sync, r),
            "host->device, from numpy": median_seconds(lambda: t_dev.copy_(t_src), sync, r),
            "device->host, to numpy": median_seconds(lambda: t_dev.cpu().numpy(), sync, r),
        }
        buffer.free()
    print(f"GPU: {ctx.name}; {args.mib} MiB per copy; median of {args.repeats}")
    print(f"{'path':26} {'trtpipe GB/s':>13} {'torch GB/s':>11} {'ratio':>6}")
    for path, seconds in ours.items():
        print(f"{path:26} {gb / seconds:13.1f} {gb / theirs[path]:11.1f} {theirs[path] / seconds:6.2f}")
    ctx.release()


if __name__ == "__main__":
    main()
