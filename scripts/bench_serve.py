"""Benchmark: serving on Triton (trtpipe serve) against the same runner in-process, in one run.

The ceiling is the runner's own batched throughput in this process: OnnxRunner on the same file,
with the same threads, on batches of 16, the size Triton forms at concurrency 16. The served figures
come from `trtpipe serve` (a subprocess: PyTriton, Triton, its Python stub) measured by trtpipe's load
test (closed-loop tritonclient gRPC clients, batch 1 per request, every answer checked against the
in-process runner). This machine is shared, so the two are measured round by round, each in the same
window length, and the ratio is the median over rounds; the batch-1 overhead is the median of paired
differences, one in-process call then one served call, alternating. Then a sweep of concurrency for
the plot. CPU only: ONNX Runtime's CPU provider; the load-test clients share the cores with the server.

    python scripts/bench_serve.py [--model efficientnet-lite0] [--window-s 10] [-o build/serve-bench]

`--floor` measures instead where a tiny model's served milliseconds go at concurrency 1: the same
MLP in-process, served by `trtpipe serve`, and two floors that compute nothing, a Python-backend
model returning its input on the same Triton and a PyTriton callable returning its input (the
stack `trtpipe serve` ran on before), every call timed in turn so that all see the same load.

    python scripts/bench_serve.py --floor [--pairs 2000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "serve"))


def batched(runner, payload: dict, seconds: float) -> float:
    """Return samples/s of the runner on `payload` (one batch) called back to back for `seconds`."""
    batch = len(next(iter(payload.values())))
    count, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        runner(payload)
        count += batch
    return count / (time.perf_counter() - began)


def paired_latency(runner, client, model: str, samples: list[dict], outputs: list[str], pairs: int) -> dict:
    """Time batch-1 calls in-process and served alternately, so both see the same load; return medians (ms)."""
    import numpy as np

    local, served = [], []
    for i in range(pairs):
        sample = samples[i % len(samples)]
        began = time.perf_counter()
        runner(sample)
        local.append(time.perf_counter() - began)
        began = time.perf_counter()
        client.infer(model, sample, outputs)
        served.append(time.perf_counter() - began)
    local, served = np.asarray(local) * 1e3, np.asarray(served) * 1e3
    return {"pairs": pairs, "in_process_p50_ms": float(np.median(local)), "served_p50_ms": float(np.median(served)),
            "overhead_p50_ms": float(np.median(served - local))}


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


FLOOR_MODEL = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("probs", pb_utils.get_input_tensor_by_name(r, "x").as_numpy())])
                for r in requests]
"""
FLOOR_CONFIG = """name: "floor"
backend: "python"
max_batch_size: 32
input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "probs" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
dynamic_batching { max_queue_delay_microseconds: DELAY }
"""


def floor(pairs: int, delay_us: int, output: Path) -> None:
    """Time one batch-1 gRPC call to each server in turn, and the in-process call; print p50/p99 of each."""
    import importlib.util

    import numpy as np
    from serve_helpers import bundled_triton, start_server

    from trtpipe.files import write_json
    from trtpipe.runtime import OnnxRunner
    from trtpipe.serve.environment import free_port, prepare_environment

    spec = importlib.util.spec_from_file_location("test_models", ROOT / "tests" / "models.py")  # not models/, the zoo
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models.save(models.mlp(batch="N"), tmp / "mlp.onnx")
        floors = {"floor": FLOOR_CONFIG.replace("DELAY", str(delay_us)), "floor_100us": FLOOR_CONFIG.replace("DELAY", "100"),
                  "floor_unbatched": FLOOR_CONFIG.split("dynamic_batching")[0]}
        for name, config in floors.items():
            (tmp / "repo" / name / "1").mkdir(parents=True)
            (tmp / "repo" / name / "1" / "model.py").write_text(FLOOR_MODEL)
            (tmp / "repo" / name / "config.pbtxt").write_text(config.replace('name: "floor"', f'name: "{name}"'))
        served = start_server([tmp / "mlp.onnx", "--threads", 1, "--max-queue-delay-us", delay_us], tmp / "serve.log")
        triton, http_floor, grpc_floor, _metrics = bundled_triton(tmp, tmp / "repo", tmp / "floor.log")
        from trtpipe.serve.guard import Guard
        from trtpipe.serve.limits import request_limits

        guard = Guard("127.0.0.1", free_port(), http_floor, {"floor": request_limits("floor", [("x", "float32", (-1, 16))], 32)})
        threading.Thread(target=guard.serve_forever, daemon=True).start()
        prepare_environment()
        from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
        from pytriton.triton import Triton, TritonConfig

        ports = [free_port() for _ in range(3)]
        pytriton = Triton(config=TritonConfig(http_address="127.0.0.1", http_port=ports[0], grpc_address="127.0.0.1",
                                              grpc_port=ports[1], metrics_port=ports[2], allow_gpu_metrics=False))
        try:
            from pytriton.decorators import batch

            pytriton.bind(model_name="floor", infer_func=batch(lambda x: {"probs": x}),
                          inputs=[Tensor(name="x", dtype=np.float32, shape=(16,))],
                          outputs=[Tensor(name="probs", dtype=np.float32, shape=(16,))],
                          config=ModelConfig(max_batch_size=32,
                                             batcher=DynamicBatcher(max_queue_delay_microseconds=delay_us)))
            pytriton.run()
            sample = {"x": np.random.default_rng(0).random((1, 16), dtype=np.float32)}
            with OnnxRunner(tmp / "mlp.onnx", threads=1) as runner:
                paths = {"in-process (OnnxRunner)": lambda: runner(sample),
                         "trtpipe serve (gRPC)": _caller(served.grpc, "mlp", sample),
                         "floor: Python backend returning its input": _caller(grpc_floor, "floor", sample),
                         "  over HTTP, to Triton": _caller(http_floor, "floor", sample, "http"),
                         "  over HTTP, through trtpipe serve's guard": _caller(guard.server_address[1], "floor", sample, "http"),
                         "  the same, the batcher holding requests 100 us": _caller(grpc_floor, "floor_100us", sample),
                         "  the same without the dynamic batcher": _caller(grpc_floor, "floor_unbatched", sample),
                         "  a gRPC round trip alone (is_server_live)": _live(grpc_floor),
                         "floor: PyTriton callable returning its input": _caller(ports[1], "floor", sample)}
                times = {name: [] for name in paths}
                for _ in range(50):  # warm-up: connections made, models loaded
                    for call in paths.values():
                        call()
                for _ in range(pairs):
                    for name, call in paths.items():
                        began = time.perf_counter()
                        call()
                        times[name].append((time.perf_counter() - began) * 1e3)
        finally:
            for client in CLIENTS:
                client.close()  # Triton waits out its exit timeout while an HTTP connection is open
            guard.drain()
            guard.shutdown()
            pytriton.stop()
            served.terminate()
            os.killpg(triton.pid, signal.SIGINT)
            triton.wait(timeout=60)
    result = {name.strip(): {"p50_ms": float(np.percentile(t, 50)), "p99_ms": float(np.percentile(t, 99))}
              for name, t in times.items()}
    result["calls_each"], result["max_queue_delay_us"] = pairs, delay_us
    result["load_average"] = os.getloadavg()
    output.mkdir(parents=True, exist_ok=True)
    write_json(output / "floor.json", result)
    base = result["in-process (OnnxRunner)"]["p50_ms"]
    print(f"batch-1 gRPC calls at concurrency 1, {pairs} of each in turn (MLP 16->32->8, ONNX Runtime 1 thread, CPU), "
          f"the dynamic batcher holding requests {delay_us} us:")
    for name in paths:
        row = result[name.strip()]
        print(f"  {name:46s} p50 {row['p50_ms']:7.3f} ms  p99 {row['p99_ms']:7.3f} ms  p50 - in-process {row['p50_ms'] - base:7.3f} ms")
    print(f"load average {os.getloadavg()[0]:.1f}; wrote {output / 'floor.json'}")


CLIENTS = []  # every client the floor opens, closed before its servers stop


def _caller(port: int, model: str, sample: dict, protocol: str = "grpc"):
    from trtpipe.serve.loadtest import Client

    client = Client(protocol, f"127.0.0.1:{port}")
    CLIENTS.append(client)
    return lambda: client.infer(model, sample, ["probs"])


def _live(port: int):
    from trtpipe.serve.loadtest import Client

    client = Client("grpc", f"127.0.0.1:{port}")
    CLIENTS.append(client)
    return client.client.is_server_live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="efficientnet-lite0", help="a shipped model with build/M/M.onnx")
    parser.add_argument("--window-s", type=float, default=10.0, help="seconds per measurement window")
    parser.add_argument("--rounds", type=int, default=3, help="in-process/served rounds for the throughput ratio")
    parser.add_argument("--pairs", type=int, default=200, help="alternating batch-1 calls for the overhead")
    parser.add_argument("--concurrency", default="1,4,16,64", help="served levels; 16 is the one compared")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="ONNX Runtime threads, both sides")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "build" / "serve-bench")
    parser.add_argument("--floor", action="store_true", help="where a tiny model's milliseconds go, against floor servers")
    parser.add_argument("--delay-us", type=int, default=0, help="--floor: the dynamic batcher's delay, served and floors")
    args = parser.parse_args()
    if args.floor:
        floor(args.pairs, args.delay_us, args.output)
        return

    from serve_helpers import start_server

    from trtpipe import data
    from trtpipe.config import load_spec
    from trtpipe.files import write_json
    from trtpipe.runtime import OnnxRunner
    from trtpipe.serve.loadtest import Client, LoadOptions, LoadReport, format_table, parse_levels, run_level
    from trtpipe.serve.models import model_name

    model = ROOT / "build" / args.model / f"{args.model}.onnx"
    spec = load_spec(ROOT / "models" / args.model / "model.toml")
    levels = parse_levels(args.concurrency)
    samples = [b.arrays for b in data.iter_batches(spec, spec.validation, 1, limit=64)]
    batch16 = next(data.iter_batches(spec, spec.validation, 16, limit=16)).arrays

    with tempfile.TemporaryDirectory() as tmp, OnnxRunner(model, threads=args.threads) as runner:
        server = start_server([model, "--threads", args.threads, "--max-batch", 32, "--max-queue-delay-us", 2000],
                              Path(tmp) / "serve.log")
        try:
            options = LoadOptions(f"grpc://127.0.0.1:{server.grpc}", model_name(model), levels, args.window_s)
            expected = [runner(s) for s in samples]
            outputs = [o.name for o in runner.outputs]
            client = Client("grpc", f"127.0.0.1:{server.grpc}")
            # Round by round, the ceiling and the served throughput at 16 each get the same window.
            rounds = []
            for r in range(args.rounds):
                ceiling = batched(runner, batch16, args.window_s)
                at16 = run_level(options, 16, samples, expected, outputs)
                rounds.append({"in_process_batched": ceiling, "served_16": at16.throughput, "ratio": at16.throughput / ceiling,
                               "errors": at16.errors, "wrong": at16.wrong})
                print(f"round {r + 1}: in-process batch 16 {ceiling:.1f} samples/s, served at 16 {at16.throughput:.1f}: "
                      f"{at16.throughput / ceiling:.0%}", flush=True)
            latency = paired_latency(runner, client, options.model, samples, outputs, args.pairs)
            client.close()
            print(f"batch 1, {args.pairs} alternating pairs: {latency}", flush=True)
            report = LoadReport(options.url, options.model, "grpc", 1, str(model))
            for level in levels:
                report.levels.append(run_level(options, level, samples, expected, outputs))
                print(format_table(report).splitlines()[-1], flush=True)
            rss = peak_rss_mb(server.process.pid)
        finally:
            code = server.terminate()

    ratios = sorted(r["ratio"] for r in rounds)
    ceiling = sorted(r["in_process_batched"] for r in rounds)[len(rounds) // 2]
    result = {
        "model": args.model, "device": f"CPU ({os.cpu_count()} cores, ONNX Runtime CPUExecutionProvider, {args.threads} threads)",
        "load_average": os.getloadavg(), "rounds": rounds, "served_over_ceiling_at_16_median": ratios[len(ratios) // 2],
        "batch1": latency, "sweep": report.to_json(), "server_exit_code": code, "server_peak_rss_mb": rss,
    }
    args.output.mkdir(parents=True, exist_ok=True)
    write_json(args.output / f"{args.model}.json", result)
    plot(report, ceiling, args.output / f"{args.model}.png")
    print(format_table(report))
    print(f"served at concurrency 16 / in-process batched (batch 16), median of {args.rounds} rounds: "
          f"{result['served_over_ceiling_at_16_median']:.0%} (rounds: {', '.join(f'{r:.0%}' for r in ratios)})")
    print(f"batch-1 p50: served {latency['served_p50_ms']:.2f} ms, in-process {latency['in_process_p50_ms']:.2f} ms; "
          f"median paired overhead {latency['overhead_p50_ms']:.2f} ms")
    print(f"server (trtpipe serve + Triton + stub) peak RSS {rss:.0f} MB; load average {os.getloadavg()[0]:.1f}; "
          f"CPU only; wrote {args.output / (args.model + '.json')} and .png")


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
    left.set_ylim(bottom=0)
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
