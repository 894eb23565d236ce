"""Benchmark: serving on Triton (trtpipe serve) against the same runner in-process, in one run.

The ceiling is the runner's own batched throughput in this process: OnnxRunner on the same file,
with the same threads, on batches of the size Triton forms at concurrency 16. The served figures come
from `trtpipe serve` (a subprocess: PyTriton, Triton, its Python stub) measured by trtpipe's load test
(closed-loop tritonclient gRPC clients, batch 1 per request, every answer checked against the
in-process runner). The ceiling is measured before and after the served run and averaged, because
this machine is shared. The batch-1 overhead of serving is served p50 at concurrency 1 minus
in-process p50 at batch 1. CPU only: ONNX Runtime's CPU provider; the clients share the cores.

    python scripts/bench_serve.py [--model efficientnet-lite0] [--duration-s 10] [-o build/serve-bench]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "serve"))


def in_process(path: Path, payload1: dict, payload_batch: dict, threads: int, seconds: float) -> dict:
    """Return batched samples/s and batch-1 p50 ms of the runner in this process."""
    import numpy as np

    from trtpipe.runtime import OnnxRunner

    with OnnxRunner(path, threads=threads) as runner:
        batch = len(next(iter(payload_batch.values())))
        runner(payload_batch)  # warm up
        count, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            runner(payload_batch)
            count += batch
        batched = count / (time.perf_counter() - began)
        latencies, began = [], time.perf_counter()
        while time.perf_counter() - began < seconds:
            start = time.perf_counter()
            runner(payload1)
            latencies.append(time.perf_counter() - start)
    return {"batched_samples_per_s": batched, "batch": batch, "batch1_p50_ms": float(np.percentile(latencies, 50) * 1e3)}


def peak_rss_mb(pid: int) -> float:
    """Return the peak RSS (VmHWM) of a process and its children, in MB, while they run."""
    total = 0
    for child in [pid, *map(int, subprocess.run(["pgrep", "-g", str(pid)], capture_output=True, text=True,
                                                check=False).stdout.split())]:
        try:
            for line in Path(f"/proc/{child}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="efficientnet-lite0", help="a shipped model with build/M/M.onnx")
    parser.add_argument("--duration-s", type=float, default=10.0, help="seconds per measurement")
    parser.add_argument("--concurrency", default="1,4,16,64", help="served levels; 16 is the one compared")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="ONNX Runtime threads, both sides")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "build" / "serve-bench")
    args = parser.parse_args()

    from serve_helpers import start_server

    from trtpipe import data
    from trtpipe.config import load_spec
    from trtpipe.files import write_json
    from trtpipe.serve.loadtest import LoadOptions, LoadReport, format_table, parse_levels, plot_levels, run_level
    from trtpipe.serve.models import model_name

    model = ROOT / "build" / args.model / f"{args.model}.onnx"
    spec = load_spec(ROOT / "models" / args.model / "model.toml")
    levels = parse_levels(args.concurrency)
    samples = [b.arrays for b in data.iter_batches(spec, spec.validation, 1, limit=64)]
    batch16 = next(data.iter_batches(spec, spec.validation, 16, limit=16)).arrays
    before = in_process(model, samples[0], batch16, args.threads, args.duration_s)
    print(f"in-process before: {before}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        server = start_server([model, "--threads", args.threads, "--max-batch", 32, "--max-queue-delay-us", 2000],
                              Path(tmp) / "serve.log")
        try:
            options = LoadOptions(f"grpc://127.0.0.1:{server.grpc}", model_name(model), levels, args.duration_s)
            from trtpipe.runtime import OnnxRunner

            with OnnxRunner(model, threads=args.threads) as runner:
                expected = [runner(s) for s in samples]
            outputs = [o.name for o in runner.outputs]
            report = LoadReport(options.url, options.model, "grpc", 1, str(model))
            for level in levels:
                report.levels.append(run_level(options, level, samples, expected, outputs))
                print(format_table(report).splitlines()[-1], flush=True)
            rss = peak_rss_mb(server.process.pid)
        finally:
            code = server.terminate()
    after = in_process(model, samples[0], batch16, args.threads, args.duration_s)
    print(f"in-process after:  {after}", flush=True)

    ceiling = (before["batched_samples_per_s"] + after["batched_samples_per_s"]) / 2
    inproc_p50 = (before["batch1_p50_ms"] + after["batch1_p50_ms"]) / 2
    at16 = next((lv for lv in report.levels if lv.concurrency == 16), None)
    at1 = next((lv for lv in report.levels if lv.concurrency == 1), None)
    result = {
        "model": args.model, "device": f"CPU ({os.cpu_count()} cores, ONNX Runtime CPUExecutionProvider, {args.threads} threads)",
        "in_process": {"before": before, "after": after, "ceiling_samples_per_s": ceiling, "batch1_p50_ms": inproc_p50},
        "served": report.to_json(), "server_exit_code": code, "server_peak_rss_mb": rss,
        "served_over_ceiling_at_16": at16.throughput / ceiling if at16 else None,
        "batch1_overhead_ms": at1.p50_ms - inproc_p50 if at1 else None,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    write_json(args.output / f"{args.model}.json", result)
    plot(report, ceiling, args.output / f"{args.model}.png")
    plot_levels(report, args.output / f"{args.model}.loadtest.png")
    print(format_table(report))
    if at16:
        print(f"served at concurrency 16: {at16.throughput:.1f} samples/s = {result['served_over_ceiling_at_16']:.0%} of "
              f"in-process batched {ceiling:.1f} samples/s (batch {before['batch']}; before {before['batched_samples_per_s']:.1f}, "
              f"after {after['batched_samples_per_s']:.1f})")
    if at1:
        print(f"batch-1 p50: served {at1.p50_ms:.2f} ms, in-process {inproc_p50:.2f} ms: overhead {result['batch1_overhead_ms']:.2f} ms")
    print(f"server (trtpipe serve + Triton + stub) peak RSS {rss:.0f} MB; CPU only; wrote {args.output / (args.model + '.json')}")


def plot(report, ceiling: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [lv.concurrency for lv in report.levels]
    fig, left = plt.subplots(figsize=(6.5, 4))
    left.plot(x, [lv.throughput for lv in report.levels], "o-", color="tab:blue", label="served (Triton, gRPC, batch-1 requests)")
    left.axhline(ceiling, color="tab:green", linestyle=":", label="in-process batched (ceiling)")
    left.axhline(0.7 * ceiling, color="tab:gray", linestyle="--", linewidth=0.8, label="70% of the ceiling")
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrency (requests in flight)")
    left.set_ylabel("samples/s")
    left.legend(loc="lower right", fontsize=8)
    right = left.twinx()
    right.plot(x, [lv.p99_ms for lv in report.levels], "s--", color="tab:red")
    right.set_ylabel("served p99 latency (ms)", color="tab:red")
    left.set_title(f"{report.model}: served vs in-process, CPU (ONNX Runtime)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
