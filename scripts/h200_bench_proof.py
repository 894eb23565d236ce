"""Proof of `trtpipe bench` and of the runtime's per-call overhead on a real GPU (run on the H200).

TensorRT cannot run there, so the engine's execution context is the stand-in of scripts/gpu_standin.py
(a real kernel on the engine's stream); everything else is the runtime's and bench's own code.

1. GPU compute: a kernel that spins a known 2.000 ms of GPU time (globaltimer) must be reported
   within 1% of it, plain and as a CUDA graph.
2. H2D: bench's host-to-device figure for a 64 MiB input must agree within 10% with torch's copy of
   the same size from pinned memory, measured in the same run with CUDA events.
3. Per-call overhead (host time less the kernel's own GPU time) of Engine.infer on a tiny kernel
   with device tensors, enqueued each call and replayed as a CUDA graph (cuda_graph=True), against
   torch launching an elementwise kernel that computes the same (y = 2x + 1), taking turns in one
   run: the ratio must be at most 1.
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
sys.path.insert(0, str(ROOT))


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


def take_turns(calls: dict, rounds: int = 20, per_round: int = 100) -> dict:
    """Median host µs of each call (each synchronizes). The calls take turns in blocks of `per_round`,
    after one warm-up block each, so that the machine's drift falls on all of them alike."""
    host = {name: [] for name in calls}
    for round_ in range(rounds + 1):
        for name, call in calls.items():
            for _ in range(per_round):
                start = time.perf_counter()
                call()
                elapsed = time.perf_counter() - start
                if round_:
                    host[name].append(elapsed * 1e6)
    return {name: statistics.median(times) for name, times in host.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--duration-s", type=float, default=2.0)
    args = parser.parse_args()
    import torch
    from gpu_standin import compile_kernel, make_session, standin_engine

    from trtpipe.runtime.bench import BenchSettings, bench_session, summarize
    from trtpipe.runtime.cuda import CudaContext
    from trtpipe.runtime.cuda_graph import CapturedGraph

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

    # 3. Per-call overhead on a tiny kernel: host time per call, the engine's calls and torch's taking turns
    # in this run, less the kernel's own GPU time (from 100 launches of it replayed back to back in one CUDA
    # graph between two events: GPU time between events around a single call would count the host's launch,
    # which the GPU waits for, as GPU time).
    x = torch.randn(1, 1024, device="cuda")
    y = torch.empty_like(x)
    numpy_in = np.ones((1, 1024), np.float32)
    try:
        affine = torch.cuda.jiterator._create_jit_fn("template <typename T> T affine(T x) { return T(2) * x + T(1); }")
        how = "one jiterator kernel, y = 2x + 1"
    except Exception:  # noqa: BLE001 - jiterator needs NVRTC; torch's own kernels then
        def affine(t):
            return torch.add(t, t, alpha=1).add_(1)
        how = "torch.add kernels"
    engines = {}  # one engine per way of calling it, so that each keeps its bindings (and graph) across turns
    calls = {}
    for graph in (False, True):
        mode = "graph" if graph else "plain"
        for feed in ("torch", "numpy"):
            engine = engines[f"{mode}_{feed}"] = standin_engine(CudaContext(0), kernel, cuda_graph=graph)[0]
            calls[f"{mode}_{feed}"] = ((lambda e=engine: e.infer({"x": x}, out={"y": y})) if feed == "torch"
                                       else (lambda e=engine: e.infer({"x": numpy_in})))

    def torch_call():
        out = affine(x)
        torch.cuda.synchronize()
        return out

    calls["torch"] = torch_call
    host = take_turns(calls)
    assert torch.equal(y, 2 * x + 1) and torch.equal(torch_call(), 2 * x + 1)
    for name in ("graph_torch", "graph_numpy"):
        assert engines[name].session.graph is not None, engines[name].session.graph_refused

    session = engines["plain_torch"].session  # bound to x and y by the calls above
    with holder:
        start, end = holder.cuda.Event(), holder.cuda.Event()
        hundred = CapturedGraph(session.stream_handle, lambda: [session.enqueue() for _ in range(100)])
        ours = []
        for _ in range(20):
            start.record(session.stream)
            hundred.launch()
            end.record(session.stream)
            end.synchronize()
            ours.append(end.time_since(start) * 10)  # ms per 100 -> µs each
        hundred.destroy()
    torch_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(torch_graph):
        for _ in range(100):
            affine(x)
    t_start, t_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    theirs = []
    for _ in range(20):
        t_start.record()
        torch_graph.replay()
        t_end.record()
        t_end.synchronize()
        theirs.append(t_start.elapsed_time(t_end) * 10)
    kernel_us = {"standin": statistics.median(ours), "torch": statistics.median(theirs)}

    enqueue = {}  # the enqueue alone: the stand-in's kernel launch through pycuda, or the graph's launch
    for name, launch in (("plain_torch", engines["plain_torch"].session.enqueue),
                         ("graph_torch", engines["graph_torch"].session.graph.launch)):
        times = []
        for _ in range(2000):
            with holder:
                begin = time.perf_counter()
                launch()
                times.append((time.perf_counter() - begin) * 1e6)
            engines[name].session.stream.synchronize()
        enqueue[name] = statistics.median(times)
    for engine in engines.values():
        engine.close()
    torch_overhead = host["torch"] - kernel_us["torch"]
    per_call: dict = {"torch": {"host": host["torch"], "kernel": kernel_us["torch"], "overhead": torch_overhead, "how": how}}
    print("per call, tiny kernel (1024 floats), host time the median of 2000 calls taking turns; overhead = host time "
          "less the kernel's own GPU time (100 of it back to back in a CUDA graph):")
    print(f"  kernel GPU time: the stand-in's {kernel_us['standin']:.2f} µs, torch's {kernel_us['torch']:.2f} µs")
    for mode, label in (("plain", "execute_async_v3 each call"), ("graph", "cuda_graph=True, the graph replayed")):
        name = f"{mode}_torch"
        m = per_call[mode] = {"host": host[name], "kernel": kernel_us["standin"], "overhead": host[name] - kernel_us["standin"],
                              "numpy_host": host[f"{mode}_numpy"], "enqueue_host": enqueue[name]}
        m["ratio_to_torch"] = m["overhead"] / torch_overhead
        m["without_enqueue_ratio_to_torch"] = (m["overhead"] - m["enqueue_host"]) / torch_overhead
        print(f"  Engine.infer, {label}, torch tensors in and out=: host {m['host']:.1f} µs, overhead {m['overhead']:.1f} µs, "
              f"of which the enqueue alone {m['enqueue_host']:.1f} µs; numpy in and out: host {m['numpy_host']:.1f} µs")
        print(f"    Engine/torch overhead {m['ratio_to_torch']:.2f} -> {'PASS' if m['ratio_to_torch'] <= 1 else 'FAIL'} "
              f"(at most 1); without the enqueue {m['without_enqueue_ratio_to_torch']:.2f}")
    print(f"  torch ({how}) + synchronize: host {host['torch']:.1f} µs, overhead {torch_overhead:.1f} µs")
    figures["per_call_us"] = per_call
    holder.release()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
