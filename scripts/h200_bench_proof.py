"""Proof of `trtpipe bench` and of the runtime's per-call overhead on a real GPU (run on the H200).

TensorRT cannot run there, so the engine's execution context is the stand-in of tests/gpu/standin.py
(a real kernel on the engine's stream); everything else is the runtime's and bench's own code.

1. GPU compute: a kernel that spins a known 2.000 ms of GPU time (globaltimer) must be reported
   within 1% of it, plain and as a CUDA graph.
2. H2D: bench's host-to-device figure for a 64 MiB input must agree within 10% with torch's copy of
   the same size from pinned memory, measured in the same run with CUDA events.
3. Per-call overhead (host time minus GPU time) of Engine.infer on a tiny kernel with device
   tensors, enqueued each call and replayed as a CUDA graph (cuda_graph=True), against torch
   launching an elementwise kernel that computes the same (y = 2x + 1): the ratio must be at most 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "gpu")]


def torch_copy_ms(torch, nbytes: int, repeats: int) -> float:
    src = torch.empty(nbytes // 4, dtype=torch.float32).pin_memory()
    dst = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(repeats + 3):
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def host_and_gpu_us(call, gpu_events, repeats: int) -> tuple[float, float]:
    """Median host time of `call()` (which synchronizes) and median GPU time between `gpu_events`, in µs."""
    host, gpu = [], []
    for i in range(repeats + 50):
        start = time.perf_counter()
        call()
        elapsed = time.perf_counter() - start
        if i >= 50:
            host.append(elapsed * 1e6)
            gpu.append(gpu_events() * 1e3)
    return statistics.median(host), statistics.median(gpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--duration-s", type=float, default=2.0)
    args = parser.parse_args()
    import torch
    from standin import compile_kernel, make_session, standin_engine

    from trtpipe.runtime.bench import BenchSettings, bench_session, summarize
    from trtpipe.runtime.cuda import CudaContext

    torch.zeros(1, device="cuda")
    holder = CudaContext(0)
    kernel = compile_kernel(holder)
    figures: dict = {"gpu": holder.name}
    print(f"GPU: {holder.name}; torch {torch.__version__}")

    # 1. A known 2 ms kernel.
    for graph in (False, True):
        session, _ = make_session(holder, kernel, spin_ns=2_000_000)
        settings = BenchSettings(warmup_ms=200, duration_s=args.duration_s, iterations=100, cuda_graph=graph)
        times, timed, _warmups, wall = bench_session(session, {"x": np.ones((1, 1024), np.float32)}, settings)
        session.free()
        compute = summarize(times["gpu_compute"])
        error = compute.median / 2.0 - 1
        key = "cuda_graph" if graph else "plain"
        figures[f"known_2ms_{key}"] = {"median_ms": compute.median, "p99_ms": compute.percentiles["99"], "cov_percent": compute.cov,
                                       "error_percent": 100 * error, "queries": timed, "throughput_qps": timed / wall}
        print(f"known 2.000 ms kernel ({key}): bench GPU compute median {compute.median:.4f} ms (error {100 * error:+.2f}%), "
              f"p99 {compute.percentiles['99']:.4f} ms, CoV {compute.cov:.2f}%, {timed} queries, {timed / wall:.1f} qps "
              f"-> {'PASS' if abs(error) <= 0.01 else 'FAIL'} (within 1%)")

    # 2. H2D of a known size against torch's copy.
    nbytes = 64 << 20
    session, _ = make_session(holder, kernel)
    times, timed, _, _ = bench_session(session, {"x": np.ones((16, nbytes // 64), np.float32)},
                                       BenchSettings(warmup_ms=100, duration_s=1.0, iterations=30))
    session.free()
    ours = summarize(times["h2d"]).median
    theirs = torch_copy_ms(torch, nbytes, 30)
    ratio = ours / theirs
    figures["h2d_64MiB"] = {"bench_ms": ours, "torch_ms": theirs, "ratio": ratio, "bench_GBps": nbytes / ours / 1e6,
                            "torch_GBps": nbytes / theirs / 1e6}
    print(f"H2D 64 MiB: bench {ours:.4f} ms ({nbytes / ours / 1e6:.1f} GB/s), torch {theirs:.4f} ms "
          f"({nbytes / theirs / 1e6:.1f} GB/s), ratio {ratio:.3f} -> {'PASS' if abs(ratio - 1) <= 0.10 else 'FAIL'} (within 10%)")

    # 3. Per-call overhead on a tiny kernel, the engine's call and torch's measured in this run.
    x = torch.randn(1, 1024, device="cuda")
    y = torch.empty_like(x)
    numpy_in = np.ones((1, 1024), np.float32)
    with holder:
        start, end = holder.cuda.Event(), holder.cuda.Event()
    per_call: dict = {}
    for graph in (False, True):
        engine, _context = standin_engine(CudaContext(0), kernel, cuda_graph=graph)
        session = engine.session
        original = session.execute

        def timed_execute(original=original, session=session):  # events around the kernel (or graph), on the engine's stream
            start.record(session.stream)
            original()
            end.record(session.stream)

        session.execute = timed_execute
        host, gpu = host_and_gpu_us(lambda engine=engine: engine.infer({"x": x}, out={"y": y}), lambda: end.time_since(start), 2000)
        assert torch.equal(y, 2 * x + 1)
        assert (session.graph is not None) == graph, session.graph_refused
        launches = []  # the enqueue alone: the stand-in's kernel launch through pycuda, or the graph's launch
        for _ in range(2000):
            with holder:
                begin = time.perf_counter()
                original()
                launches.append((time.perf_counter() - begin) * 1e6)
            session.stream.synchronize()
        numpy_host, _ = host_and_gpu_us(lambda engine=engine: engine.infer({"x": numpy_in}), lambda: end.time_since(start), 2000)
        engine.close()
        per_call["graph" if graph else "plain"] = {"host": host, "gpu": gpu, "overhead": host - gpu, "numpy_host": numpy_host,
                                                   "enqueue_host": statistics.median(launches)}
    try:
        affine = torch.cuda.jiterator._create_jit_fn("template <typename T> T affine(T x) { return T(2) * x + T(1); }")
        how = "one jiterator kernel, y = 2x + 1"
    except Exception:  # noqa: BLE001 - jiterator needs NVRTC; torch's own kernels then
        def affine(t):
            return torch.add(t, t, alpha=1).add_(1)
        how = "torch.add kernels"
    t_start, t_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def torch_call():
        t_start.record()
        out = affine(x)
        t_end.record()
        torch.cuda.synchronize()
        return out

    torch_host, torch_gpu = host_and_gpu_us(torch_call, lambda: t_start.elapsed_time(t_end), 2000)
    assert torch.equal(torch_call(), 2 * x + 1)
    torch_overhead = torch_host - torch_gpu
    per_call["torch"] = {"host": torch_host, "gpu": torch_gpu, "overhead": torch_overhead, "kernel": how}
    print("per call, tiny kernel (1024 floats), median of 2000, Engine.infer with torch tensors in and out=:")
    for key, label in (("plain", "execute_async_v3 each call"), ("graph", "cuda_graph=True, the graph replayed")):
        m = per_call[key]
        m["ratio_to_torch"] = m["overhead"] / torch_overhead
        print(f"  {label}: host {m['host']:.1f} µs, GPU {m['gpu']:.1f} µs, overhead {m['overhead']:.1f} µs "
              f"(the enqueue alone {m['enqueue_host']:.1f} µs); numpy in/out: host {m['numpy_host']:.1f} µs; "
              f"Engine/torch overhead ratio {m['ratio_to_torch']:.2f} -> {'PASS' if m['ratio_to_torch'] <= 1 else 'FAIL'} (at most 1)")
    print(f"  torch ({how}) + synchronize: host {torch_host:.1f} µs, GPU {torch_gpu:.1f} µs, overhead {torch_overhead:.1f} µs")
    figures["per_call_us"] = per_call
    holder.release()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
