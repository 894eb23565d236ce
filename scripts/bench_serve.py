"""Benchmark: `trtpipe serve` on both stacks against the same model in-process and against a floor server, in one run.

Two models: a tiny one (tests/models.py's 16-32-8 MLP, where the serving stack is all there is to
measure) and a compute-bound one (a shipped model's FP32 ONNX, EfficientNet-lite0 by default). Each
is served by `trtpipe serve --stack direct` (the runner in the fronts' process) and by `trtpipe
serve --stack triton` (Triton and its Python stub), with their defaults, and a floor server stands
beside them: the same bundled Triton, the same repository writer and config (batching, delay,
instances), but a Python-backend model that reads its input and answers zeros of the output's
shape, computing nothing. So per model and stack:

- served - in-process is what serving adds, floor - zero is what Triton's stack costs whatever the
  model, and triton - floor - in-process is trtpipe's own share on that stack; the gRPC round trips
  alone (is_server_live, to direct's front and to Triton) are the floor of each protocol stack;
- latency at concurrency 1: in-process, direct, triton and floor calls (gRPC, and HTTP) in blocks of
  10, taking turns until the time is up, so that all see the same load and each call follows one of
  its own kind;
- throughput at concurrency 1, 4, 16: in-process runs of batch C back to back (the runner's own
  batched ceiling at that size), and closed-loop tritonclient gRPC clients keeping C batch-1
  requests in flight on each server (every answer checked: the served against the in-process
  runner, the floor's against zeros), window after window in turn, for --rounds rounds; each ratio
  is the median of the rounds' ratios.

CPU only (ONNX Runtime's CPU provider); the load-test clients share the cores with the servers. The
1-minute load average is printed with every figure: on a shared machine it says how far to trust it.

    python scripts/bench_serve.py [--model efficientnet-lite0] [--window-s 3] [--latency-s 4] [-o build/serve-bench]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from serve_process import Server, bundled_triton, start_server

LEVELS = (1, 4, 16)
BLOCK = 10  # latency calls of one path in a row, so each follows a call of its own kind

# The floor: reads each request's first input, as a model must, and answers zeros of every output's shape.
FLOOR_MODEL = '''import json

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.input = config["input"][0]["name"]
        self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"]), [max(int(d), 1) for d in o["dims"]])
                        for o in config["output"]]

    def execute(self, requests):
        answers = []
        for request in requests:
            batch = len(pb_utils.get_input_tensor_by_name(request, self.input).as_numpy())
            answers.append(pb_utils.InferenceResponse([pb_utils.Tensor(name, np.zeros([batch, *dims], dtype))
                                                       for name, dtype, dims in self.outputs]))
        return answers
'''


@dataclass
class Subject:
    """One model under test: its runner here, its name on both servers, its samples and their answers."""

    label: str
    path: Path
    runner: object
    name: str
    samples: list
    expected: list
    outputs: list


def load() -> float:
    """Return the 1-minute load average."""
    return os.getloadavg()[0]


def _median(values: list[float]) -> float:
    """Return the median of `values` as a float."""
    return float(np.median(values))


def cpu_seconds(pid: int) -> float:
    """Return the CPU time (user + system) that a process and all its descendants have used so far, in seconds."""
    total, todo, tick = 0.0, [pid], os.sysconf("SC_CLK_TCK")
    while todo:
        process = todo.pop()
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in Path(f"/proc/{process}/task").iterdir():
                todo += map(int, (task / "children").read_text().split())
        except OSError:
            pass  # it exited meanwhile
    return total


def in_process_throughput(runner, samples: list[dict], batch: int, seconds: float) -> tuple[float, float]:
    """Return samples/s of the runner on batches of `batch` samples called back to back for `seconds`,
    and the CPU milliseconds it took per sample."""
    payload = {name: np.concatenate([samples[i % len(samples)][name] for i in range(batch)]) for name in samples[0]}
    runner(payload)
    count, began, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - began < seconds:
        runner(payload)
        count += batch
    return count / (time.perf_counter() - began), (time.process_time() - cpu) * 1e3 / count


def served_throughput(server: Server, subject: Subject, level: int, seconds: float, expected: list) -> tuple:
    """Return the load test's Level on `server`, and the CPU milliseconds per sample of the server and the clients."""
    from trtpipe.serve.loadtest import LoadOptions, run_level

    cpu = cpu_seconds(server.process.pid) + time.process_time()
    got = run_level(LoadOptions(f"grpc://127.0.0.1:{server.grpc}", subject.name, (level,), seconds),
                    level, subject.samples, expected, subject.outputs)
    cpu = cpu_seconds(server.process.pid) + time.process_time() - cpu
    return got, cpu * 1e3 / max(got.samples, 1)


def latencies(calls: dict, seconds: float) -> dict[str, dict]:
    """Time each path's batch-1 calls, blocks of BLOCK in turn for `seconds`; return p50/p99 (ms) and the count."""
    times = {name: [] for name in calls}
    for call in calls.values():  # warm-up: connections made, first runs done
        for _ in range(3):
            call()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or min(map(len, times.values())) < 2 * BLOCK:
        for name, call in calls.items():
            for _ in range(BLOCK):
                began = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - began) * 1e3)
    return {name: {"p50_ms": float(np.percentile(t, 50)), "p99_ms": float(np.percentile(t, 99)), "calls": len(t)}
            for name, t in times.items()}


STACKS = ("direct", "triton")  # `trtpipe serve --stack`, each measured against in-process and the floor
SERVERS = (*STACKS, "floor")


def measure(subject: Subject, servers: dict[str, Server], window_s: float, rounds_count: int, latency_s: float) -> dict:
    """Return the latency and throughput figures of one model on every server, printing each as it comes."""
    from trtpipe.serve.loadtest import Client

    clients = {(role, protocol): Client(protocol, f"127.0.0.1:{getattr(server, protocol)}")
               for role, server in servers.items() for protocol in ("grpc", "http")}
    sample = subject.samples[0]

    def call(role, protocol="grpc"):
        return lambda: clients[role, protocol].infer(subject.name, sample, subject.outputs)

    paths = {"in-process": lambda: subject.runner(sample)}
    for role in SERVERS:
        paths[role] = call(role)
    for role in SERVERS:
        paths[f"{role} over HTTP"] = call(role, "http")
    paths["a gRPC round trip to direct's front (is_server_live)"] = clients["direct", "grpc"].client.is_server_live
    paths["a gRPC round trip to Triton (is_server_live)"] = clients["floor", "grpc"].client.is_server_live
    try:
        lat = latencies(paths, latency_s)
    finally:
        for client in clients.values():
            client.close()
    lat["load"] = load()
    base = lat["in-process"]["p50_ms"]
    print(f"{subject.label}, batch 1 at concurrency 1 (load {lat['load']:.1f}, {lat['direct']['calls']} calls each):")
    for name in paths:
        print(f"  {name:52s} p50 {lat[name]['p50_ms']:8.3f} ms  p99 {lat[name]['p99_ms']:8.3f} ms")
    print(f"  added at p50 over gRPC: direct {lat['direct']['p50_ms'] - base:.3f} ms, triton {lat['triton']['p50_ms'] - base:.3f} ms; "
          f"the floor answers in {lat['floor']['p50_ms']:.3f} ms; triton's own share (triton - floor - in-process) "
          f"{lat['triton']['p50_ms'] - lat['floor']['p50_ms'] - base:.3f} ms", flush=True)
    # The floor's answers are checked too (zeros), so that its clients do the same work as the served ones'.
    zeros = [{name: np.zeros_like(value) for name, value in answer.items()} for answer in subject.expected]
    rows = []
    for level in LEVELS:
        rounds = []
        for _ in range(rounds_count):  # every path in turn, round after round: each round's ratios see one load
            in_process, in_process_cpu = in_process_throughput(subject.runner, subject.samples, level, window_s)
            got, cpu = {"in_process": in_process}, {"in_process": in_process_cpu}
            errors = wrong = 0
            for role in SERVERS:
                result, cpu[role] = served_throughput(servers[role], subject, level, window_s,
                                                      zeros if role == "floor" else subject.expected)
                got[role], errors, wrong = result.throughput, errors + result.errors, wrong + result.wrong
                got[f"{role}_p99_ms"] = result.p99_ms
            rounds.append({**got, "cpu_ms_per_sample": cpu, "errors": errors, "wrong": wrong, "load": load()})
        row = {"concurrency": level, "rounds": rounds,
               **{key: _median([r[key] for r in rounds]) for key in ("in_process", *SERVERS, "load")},
               **{f"{role}_over_in_process": _median([r[role] / r["in_process"] for r in rounds]) for role in STACKS},
               **{f"{role}_over_floor": _median([r[role] / r["floor"] for r in rounds]) for role in STACKS},
               "cpu_ms_per_sample": {key: _median([r["cpu_ms_per_sample"][key] for r in rounds])
                                     for key in ("in_process", *SERVERS)},
               "errors": sum(r["errors"] for r in rounds), "wrong": sum(r["wrong"] for r in rounds)}
        rows.append(row)
        cpu = row["cpu_ms_per_sample"]
        spread = {role: ", ".join(f"{r[role] / r['in_process']:.0%}" for r in rounds) for role in STACKS}
        print(f"  concurrency {level:2d}: in-process batch {level:2d} {row['in_process']:9.1f}/s, "
              + ", ".join(f"{role} {row[role]:7.1f}/s" for role in SERVERS) + "; "
              + ", ".join(f"{role} / in-process {row[f'{role}_over_in_process']:5.1%} ({spread[role]})" for role in STACKS)
              + "; " + ", ".join(f"{role} / floor {row[f'{role}_over_floor']:4.0%}" for role in STACKS)
              + "; CPU ms per sample " + ", ".join(f"{key} {cpu[key]:.3f}" for key in ("in_process", *SERVERS))
              + f"; errors {row['errors']}, wrong {row['wrong']} (load {row['load']:.1f})", flush=True)
    return {"model": subject.label, "file": subject.path.name, "latency": lat, "throughput": rows}


def floor_repository(root: Path, subjects: list[Subject], serve_args: list[str]) -> Path:
    """Write the floor's repository: each model as `trtpipe serve` writes it, with the floor's model.py."""
    from trtpipe.serve.models import describe_runner
    from trtpipe.serve.server import ServerOptions, write_served

    options = ServerOptions(max_queue_delay_us=int(_option(serve_args, "--max-queue-delay-us", ServerOptions.max_queue_delay_us)),
                            instances=int(_option(serve_args, "--instances", ServerOptions.instances)))
    repository = write_served(root, [describe_runner(s.path, s.runner, None, s.name) for s in subjects], options)
    for subject in subjects:
        (repository / subject.name / "1" / "model.py").write_text(FLOOR_MODEL)
        (repository / subject.name / "1" / "model.onnx").unlink()
    return repository


def _option(args: list[str], flag: str, default):
    """Return the value given to `flag` in `args`, else `default`."""
    return args[args.index(flag) + 1] if flag in args else default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="efficientnet-lite0", help="the compute-bound model: a shipped model with build/M/M.onnx")
    parser.add_argument("--window-s", type=float, default=1.5, help="seconds per throughput window (each path, each level)")
    parser.add_argument("--rounds", type=int, default=3, help="throughput windows per path and level, in turn (median)")
    parser.add_argument("--latency-s", type=float, default=4.0, help="seconds of batch-1 calls per model (every path)")
    parser.add_argument("--serve-args", default="", help="options for every `trtpipe serve` and the floor, e.g. '--instances 2'")
    parser.add_argument("--reference-threads", type=int, default=None,
                        help="ONNX Runtime threads of the in-process runner; default: an instance's, as served "
                             "(give the cores to hold a server of many one-thread instances against the default runner)")
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "build" / "serve-bench")
    args = parser.parse_args()
    serve_args = args.serve_args.split()

    from trtpipe import data
    from trtpipe.files import write_json
    from trtpipe.runtime import OnnxRunner
    from trtpipe.serve.models import model_name
    from trtpipe.serve.server import default_threads
    from trtpipe.spec import load_spec

    spec = importlib.util.spec_from_file_location("test_models", ROOT / "tests" / "models.py")  # not models/, the zoo
    test_models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(test_models)
    compute_path = ROOT / "build" / args.model / f"{args.model}.onnx"
    model_spec = load_spec(ROOT / "models" / args.model / "model.toml")
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tiny_path = tmp / "mlp.onnx"
        test_models.save(test_models.mlp(batch="N"), tiny_path)
        rng = np.random.default_rng(0)
        plans = [("tiny MLP 16-32-8", tiny_path, [{"x": rng.random((1, 16), dtype=np.float32)} for _ in range(64)]),
                 (f"{args.model} FP32", compute_path,
                  [b.arrays for b in data.iter_batches(model_spec, model_spec.validation, 1, limit=32)])]
        # The runner here as `trtpipe serve` opens it in each instance: its threads, not spinning.
        threads = args.reference_threads or int(_option(serve_args, "--threads",
                                                        default_threads(int(_option(serve_args, "--instances", 1)), 1)))
        subjects = []
        for label, path, samples in plans:
            runner = OnnxRunner(path, threads=threads, spin=False)
            subjects.append(Subject(label, path, runner, model_name(path), samples, [runner(s) for s in samples],
                                    [o.name for o in runner.outputs]))
        servers, triton = [], None
        try:
            for subject in subjects:  # one `trtpipe serve` per model and stack, as a user would run it
                servers.append({stack: start_server([subject.path, "--stack", stack, *serve_args],
                                                    tmp / f"{subject.name}.{stack}.log") for stack in STACKS})
            triton, floor_http, floor_grpc, _metrics = bundled_triton(tmp, floor_repository(tmp / "floor", subjects, serve_args),
                                                                      tmp / "floor.log")
            floor = Server(triton, tmp / "floor.log", floor_http, floor_grpc, _metrics)
            print(f"servers ready in {time.monotonic() - began:.0f} s: trtpipe serve {' '.join(serve_args) or '(defaults)'}; "
                  f"{os.cpu_count()} CPU cores, ONNX Runtime CPUExecutionProvider, {threads} threads", flush=True)
            results = [measure(s, {**stacks, "floor": floor}, args.window_s, args.rounds, args.latency_s)
                       for s, stacks in zip(subjects, servers)]
        finally:
            codes = [server.terminate() for stacks in servers for server in stacks.values()]
            if triton is not None:
                os.killpg(triton.pid, signal.SIGINT)
                triton.wait(timeout=90)
    result = {"command": shlex.join(["python", "scripts/bench_serve.py", *sys.argv[1:]]),
              "device": f"CPU ({os.cpu_count()} cores), ONNX Runtime CPUExecutionProvider", "threads": threads,
              "serve_args": serve_args, "window_s": args.window_s, "rounds": args.rounds, "latency_s": args.latency_s,
              "models": results, "server_exit_codes": codes, "seconds": time.monotonic() - began}
    args.output.mkdir(parents=True, exist_ok=True)
    write_json(args.output / "serve-bench.json", result)
    summary(results)
    print(f"done in {result['seconds']:.0f} s; server exit codes {codes}; wrote {args.output / 'serve-bench.json'}")


def summary(results: list[dict]) -> None:
    """Print per model and stack what serving adds at concurrency 1, and throughput as ratios (issue 27's figures)."""
    print("summary (p50/p99 at concurrency 1 minus in-process's p50; throughput at c=1, 4, 16 as served / in-process "
          "batched and served / floor):")
    for model in results:
        lat, base = model["latency"], model["latency"]["in-process"]["p50_ms"]
        for stack in STACKS:
            ratios = ", ".join(f"c={row['concurrency']} {row[f'{stack}_over_in_process']:.0%} / {row[f'{stack}_over_floor']:.0%}"
                               for row in model["throughput"])
            print(f"  {model['model']}, {stack}: adds {lat[stack]['p50_ms'] - base:.2f} ms at p50 (p99 {lat[stack]['p99_ms']:.2f} ms; "
                  f"floor {lat['floor']['p50_ms']:.2f} ms); {ratios} (load {lat['load']:.1f} .. "
                  f"{max(row['load'] for row in model['throughput']):.1f})")


if __name__ == "__main__":
    main()
