"""`trtpipe bench`: throughput and latency of an engine, or of an ONNX in ONNX Runtime, by trtexec's
definitions (TensorRT's samples/common/sampleReporting.cpp):

- Throughput: queries divided by the Total Host Walltime, from when the first query after the
  warm-up is enqueued to when the last one is complete.
- Latency: H2D Latency + GPU Compute Time + D2H Latency of one query.
- Enqueue Time: the host time to enqueue a query (execute_async_v3, or the CUDA graph launch).
- Each metric: min, max, mean, median (the mean of the two middle values of an even count) and
  percentiles by trtexec's rule: of N sorted values, the one at index max(N - 1 - int((1 - p/100) N), 0).
- A warning when the GPU Compute Time's coefficient of variation (population standard deviation
  over the mean) exceeds 2.5%, and trtexec's warnings when enqueue or transfers bound the throughput.

An engine is timed with CUDA events on its stream, queries queued back to back with at most four
in flight. An ONNX runs in ONNX Runtime with host-side figures only (latency = the host time of one
`run`), and a typed ONNX (FP16, INT8, FP8 ...) is labelled simulated: it stands in for its engine.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.runtime.cuda_graph import CapturedGraph

PERCENTILES = (90.0, 95.0, 99.0)
UNSTABLE_COV_PERCENT = 2.5  # the team's threshold (trtexec's kUNSTABLE_PERF_REPORTING_THRESHOLD is 1.0)
IN_FLIGHT = 4


# --- trtexec's statistics (pure) ----------------------------------------------------------------

def percentile(ascending: Sequence[float], p: float) -> float:
    """Return trtexec's percentile `p` of ascending `values`: index max(N - 1 - int((1 - p/100) N), 0)."""
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"percentile {p} is not in [0, 100]")
    if not ascending:
        return math.inf
    n = len(ascending)
    # In float32, as trtexec computes it: in doubles (1 - 0.9) * 100 is 9.999..., which truncates to 9, not 10.
    one, hundred = np.float32(1), np.float32(100)
    exclude = int((one - np.float32(p) / hundred) * np.float32(n))
    return ascending[max(n - 1 - exclude, 0)]


def median(ascending: Sequence[float]) -> float:
    """Return the median as trtexec does: the middle value, or the mean of the two middle values."""
    if not ascending:
        return math.inf
    m = len(ascending) // 2
    return ascending[m] if len(ascending) % 2 else (ascending[m - 1] + ascending[m]) / 2


@dataclass(frozen=True)
class Summary:
    """One metric over the timed queries, in milliseconds; `cov` in percent."""

    min: float
    max: float
    mean: float
    median: float
    percentiles: dict[str, float]
    cov: float

    def text(self) -> str:
        ps = ", ".join(f"p{k} = {v:.4g} ms" for k, v in self.percentiles.items())
        return f"min = {self.min:.4g} ms, max = {self.max:.4g} ms, mean = {self.mean:.4g} ms, median = {self.median:.4g} ms, {ps}"


def summarize(values_ms: Sequence[float], percentiles: Sequence[float] = PERCENTILES) -> Summary:
    """Return min, max, mean, median, the percentiles and the coefficient of variation of `values_ms`."""
    ascending = sorted(values_ms)
    mean = sum(ascending) / len(ascending)
    std = math.sqrt(sum((v - mean) ** 2 for v in ascending) / len(ascending))
    return Summary(ascending[0], ascending[-1], mean, median(ascending),
                   {f"{p:g}": percentile(ascending, p) for p in percentiles}, 100.0 * std / mean if mean else 0.0)


def warnings_for(metrics: Mapping[str, Summary]) -> list[str]:
    """Return trtexec's warnings, and ours for an unstable GPU compute time."""
    out: list[str] = []
    compute = metrics.get("gpu_compute")
    if compute is None:
        return out
    if compute.cov > UNSTABLE_COV_PERCENT:
        out.append(f"GPU compute time is unstable, with coefficient of variation {compute.cov:.2f}% "
                   f"(over {UNSTABLE_COV_PERCENT}%): lock the GPU clock or close what else runs on it")
    if "enqueue" in metrics and metrics["enqueue"].median > 0.8 * compute.median:
        out.append("throughput may be bound by enqueue time rather than GPU compute; --cuda-graph may help")
    for name, what in (("h2d", "host-to-device"), ("d2h", "device-to-host")):
        if name in metrics and metrics[name].median >= compute.median:
            out.append(f"throughput may be bound by {what} transfers; --no-transfers times the GPU alone")
    return out


# --- results ------------------------------------------------------------------------------------

@dataclass
class BenchResult:
    """What `trtpipe bench` reports; `measured` False means a typed ONNX simulating its engine."""

    candidate: str
    runner: str  # "engine" or "onnxruntime"
    device: str
    measured: bool
    shapes: dict[str, list[int]]
    transfers: bool
    cuda_graph: bool
    queries: int
    warmup_queries: int
    walltime_s: float
    throughput_qps: float
    metrics: dict[str, Summary] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.runner == "engine":
            return f"TensorRT engine on {self.device}"
        kind = "FP32 baseline" if self.measured else "SIMULATED: a typed ONNX standing in for its engine"
        return f"ONNX Runtime ({self.device}), host-side figures; {kind}"

    def to_json(self) -> dict:
        return {**asdict(self), "label": self.label}

    def render(self) -> str:
        names = {"latency": "Latency", "enqueue": "Enqueue Time", "h2d": "H2D Latency",
                 "gpu_compute": "GPU Compute Time", "d2h": "D2H Latency"}
        shapes = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in self.shapes.items())
        lines = [f"{self.candidate}: {self.label}",
                 f"inputs: {shapes}" + (f"; transfers {'on' if self.transfers else 'off'}; CUDA graph "
                                         f"{'on' if self.cuda_graph else 'off'}" if self.runner == "engine" else ""),
                 (f"Throughput: {self.throughput_qps:.5g} qps ({self.queries} queries over {self.walltime_s:.3f} s "
                 f"host walltime, after {self.warmup_queries} warm-up queries)")]
        lines += [f"{names[k]}: {v.text()}" for k, v in self.metrics.items()]
        if "gpu_compute" in self.metrics:
            total = self.metrics["gpu_compute"].mean * self.queries / 1000
            lines.append(f"Total GPU Compute Time: {total:.4g} s")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclass(frozen=True)
class BenchSettings:
    """trtexec's --warmUp (ms), --duration (s) and --iterations (at least), --noDataTransfers, --useCudaGraph."""

    warmup_ms: float = 200.0
    duration_s: float = 3.0
    iterations: int = 10
    transfers: bool = True
    cuda_graph: bool = False

    def check(self) -> None:
        if not (0 <= self.warmup_ms < math.inf and 0 <= self.duration_s < math.inf):  # nan fails both
            raise TrtpipeError("--warmup-ms and --duration-s must be finite numbers, 0 or more")
        if self.iterations < 1:
            raise TrtpipeError(f"--iterations {self.iterations}: must be at least 1")


class _Clock:
    """Warm-up for `warmup_ms`, then at least `iterations` queries over at least `duration_s`."""

    def __init__(self, settings: BenchSettings):
        self.settings = settings
        self.start = time.perf_counter()
        self.timed_from: float | None = None
        self.warmups = self.timed = 0

    def elapsed(self) -> float:
        """Return the seconds since the first timed query."""
        assert self.timed_from is not None, "no query was timed"  # next() times one before it returns None
        return time.perf_counter() - self.timed_from

    def next(self) -> bool | None:
        """Return True for a timed query, False for a warm-up one, None when done."""
        now = time.perf_counter()
        if self.timed_from is None:
            if now - self.start < self.settings.warmup_ms / 1000:
                self.warmups += 1
                return False
            self.timed_from = now
        if self.timed >= self.settings.iterations and now - self.timed_from >= self.settings.duration_s:
            return None
        self.timed += 1
        return True


# --- an engine ------------------------------------------------------------------------------------

def bench_session(session, feeds: Mapping[str, np.ndarray], settings: BenchSettings) -> tuple[dict, int, int, float]:
    """Time an ExecutionSession on `feeds`; return ({metric: [ms per timed query]}, timed, warm-ups, walltime s)."""
    cuda = session.cuda
    stream = session.stream
    with session.lock, session.ctx:
        downloads = session.prepare(feeds)  # binds every address once and stages the inputs in pinned memory
        staged = [session.buffers[spec.name] for spec in session.inputs]
        session.enqueue()  # TensorRT allocates what it defers on the first run: before any capture
        session.fetch(downloads)
        stream.synchronize()
        graph = CapturedGraph(stream.handle, session.enqueue) if settings.cuda_graph else None
        run = graph.launch if graph is not None else session.enqueue
        ring = [[cuda.Event() for _ in range(4)] for _ in range(IN_FLIGHT)]
        flight: deque = deque()
        times: dict[str, list[float]] = {"h2d": [], "gpu_compute": [], "d2h": [], "enqueue": []}

        def collect():
            events, enqueue_ms, timed = flight.popleft()
            events[3].synchronize()
            if timed:
                times["h2d"].append(events[1].time_since(events[0]))
                times["gpu_compute"].append(events[2].time_since(events[1]))
                times["d2h"].append(events[3].time_since(events[2]))
                times["enqueue"].append(enqueue_ms)

        clock = _Clock(settings)
        try:
            index = 0
            while (timed := clock.next()) is not None:
                if len(flight) == IN_FLIGHT:
                    collect()
                events = ring[index % IN_FLIGHT]
                index += 1
                events[0].record(stream)
                if settings.transfers:
                    for buffer in staged:
                        buffer.push(stream)
                events[1].record(stream)
                start = time.perf_counter()
                run()
                enqueue_ms = (time.perf_counter() - start) * 1000
                events[2].record(stream)
                if settings.transfers:
                    session.fetch(downloads)
                events[3].record(stream)
                flight.append((events, enqueue_ms, timed))
            while flight:
                collect()
            walltime = clock.elapsed()
        finally:
            stream.synchronize()
            if graph is not None:
                graph.destroy()
    if not settings.transfers:
        del times["h2d"], times["d2h"]
    latency = [sum(parts) for parts in zip(*(times[k] for k in ("h2d", "gpu_compute", "d2h") if k in times))]
    return {"latency": latency, **times}, clock.timed, clock.warmups, walltime


def bench_onnx(runner, feeds: Mapping[str, np.ndarray], settings: BenchSettings) -> tuple[dict, int, int, float]:
    """Time an OnnxRunner's `infer` on the host; return ({"latency": [ms]}, timed, warm-ups, walltime s)."""
    latency = []
    clock = _Clock(settings)
    while (timed := clock.next()) is not None:
        start = time.perf_counter()
        runner.infer(feeds)
        if timed:
            latency.append((time.perf_counter() - start) * 1000)
    return {"latency": latency}, clock.timed, clock.warmups, clock.elapsed()


# --- inputs -------------------------------------------------------------------------------------

def shape_entries(values: Iterable[str]) -> list[str]:
    """Return one `NAME:DIMS` entry a shape: a value may hold several joined by commas, as trtexec's
    --shapes=a:1x3,b:1x5 does. A value is split only where every piece is a name and dims, so a name that
    holds a comma (or a colon: TensorFlow's input_1:0) stays whole."""
    entries = []
    for value in values:
        pieces = value.split(",")
        whole = len(pieces) == 1 or not all(
            name and sep and re.fullmatch(r"[0-9x/]+", dims) for name, sep, dims in (p.rpartition(":") for p in pieces))
        entries += [value] if whole else pieces
    return entries


def parse_bench_shapes(values: Sequence[str], flag: str = "--shapes") -> dict[str, tuple[int, ...]]:
    """Return {input: shape} from `name:8x3x224x224` values, several to a value where commas join them
    (trtexec's form)."""
    shapes = {}
    for value in shape_entries(values):
        name, sep, dims = value.rpartition(":")
        if not sep or not name or not re.fullmatch(r"\d+(x\d+)*", dims):
            raise TrtpipeError(f"{flag} {value}: write NAME:DIMS with dims joined by x, e.g. x:8x3x224x224")
        shapes[name] = tuple(int(d) for d in dims.split("x"))
        if 0 in shapes[name]:  # an empty tensor times nothing, and some kernels fail on it
            raise TrtpipeError(f"{flag} {value}: every dim must be at least 1")
    return shapes


def input_shapes(inputs, given: Mapping[str, tuple[int, ...]], batch: int | None, opt: Mapping[str, Sequence[int]]) -> dict:
    """Return the shape each input is benchmarked at: --shapes, else the engine's OPT shape or the static
    shape, with --batch as the first dimension where that one is dynamic."""
    unknown = set(given) - {spec.name for spec in inputs}
    if unknown:
        raise TrtpipeError(f"--shapes {min(unknown)}: no such input ({', '.join(s.name for s in inputs)})")
    shapes = {}
    for spec in inputs:
        if spec.name in given:
            shape = tuple(given[spec.name])
            if spec.ranked and (len(shape) != len(spec.shape) or any(d >= 0 and d != s for d, s in zip(spec.shape, shape))):
                raise TrtpipeError(f"--shapes {spec.name}: {list(shape)} does not fit the input's shape {list(spec.shape)}")
        else:
            if not spec.ranked and spec.name not in opt:
                raise TrtpipeError(f"input '{spec.name}' has no shape in the ONNX (any rank); pass --shapes {spec.name}:DIMS")
            dims = list(opt.get(spec.name) or spec.shape)
            if batch is not None and spec.shape and spec.shape[0] < 0:
                dims[0] = batch
            if any(d < 0 for d in dims):
                raise TrtpipeError(f"input '{spec.name}' has dynamic shape {list(spec.shape)}; pass --shapes "
                                   f"{spec.name}:DIMS (or --batch N when only the first dimension is dynamic)")
            shape = tuple(dims)
        if 0 in shape:  # a static dim of 0 in the model, or an engine profile's
            raise TrtpipeError(f"input '{spec.name}' would be {list(shape)}: an empty tensor times no work; bench "
                               "a model and --shapes whose dims are all at least 1")
        shapes[spec.name] = shape
    return shapes


def bench_inputs(inputs, shapes: Mapping[str, tuple[int, ...]], seed: int = 0,
                 limits: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Return random arrays of each input's dtype and shape (trtpipe.graph.inputs' rule; `limits` bounds
    the ids of inputs that index a table), refusing inputs bench cannot feed or this host cannot hold."""
    from trtpipe.graph.inputs import random_inputs

    drawn = []
    for spec in inputs:
        try:
            dtype, shape = np.dtype(spec.dtype), shapes[spec.name]
        except TypeError:
            dtype = None
        if dtype is None or not (dtype == np.bool_ or np.issubdtype(dtype, np.number)):
            raise TrtpipeError(f"input '{spec.name}' is a {spec.dtype} tensor; bench feeds random numbers, so it "
                               "times models whose inputs are numbers or booleans")
        # The generator makes float64 first: twice what it returns and more, so refuse what cannot fit.
        needed = math.prod(shape) * max(dtype.itemsize, 8) * 2
        if needed > _memory_bytes():
            raise TrtpipeError(f"input '{spec.name}' at {'x'.join(map(str, shape))} needs {needed / 2**30:.1f} GiB of host "
                               f"memory, more than this machine has; lower --batch or --shapes")
        drawn.append((spec.name, dtype, shape))
    return random_inputs(drawn, seed, limits)


def _memory_bytes() -> int:
    """Return this machine's physical memory in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


# --- the command's entry point --------------------------------------------------------------------

def bench(candidate: str | os.PathLike, settings: BenchSettings, shapes: Mapping[str, tuple[int, ...]] | None = None,
          batch: int | None = None) -> BenchResult:
    """Benchmark an engine (`.engine`, with its sidecar) or an ONNX model; return the result."""
    settings.check()
    if batch is not None and batch < 1:
        raise TrtpipeError(f"--batch {batch}: must be at least 1")
    path = Path(candidate)
    if not path.is_file():
        raise TrtpipeError(f"{path}: no such file; pass an engine built by 'trtpipe build' or an ONNX model")
    if path.suffix == ".onnx":
        if settings.cuda_graph or not settings.transfers:
            raise TrtpipeError("--cuda-graph and --no-transfers apply to engines; ONNX Runtime is timed on the host")
        from trtpipe.graph import onnxio
        from trtpipe.graph.inputs import index_limits
        from trtpipe.runtime.onnxrt import OnnxRunner

        model = onnxio.load(path)
        with OnnxRunner(path, model=model) as runner:
            sized = input_shapes(runner.inputs, shapes or {}, batch, {})
            feeds = bench_inputs(runner.inputs, sized, limits=index_limits(model.graph))
            del model
            times, timed, warmups, walltime = bench_onnx(runner, feeds, settings)
            # Timed, an FP32 ONNX is the baseline itself; a typed one stands in for its engine.
            device, measured, kind = runner.provider, runner.precision == "fp32", "onnxruntime"
    else:
        from trtpipe.runtime.engine import Engine

        with Engine(path) as engine:
            opt = {t.name: t.profile[1] for t in engine.info.inputs if t.profile}
            sized = input_shapes(engine.inputs, shapes or {}, batch, opt)
            times, timed, warmups, walltime = bench_session(engine.session, bench_inputs(engine.inputs, sized), settings)
            device, measured, kind = engine.ctx.name, True, "engine"
    metrics = {k: summarize(v) for k, v in times.items()}
    return BenchResult(path.name, kind, device, measured, {k: list(v) for k, v in sized.items()}, settings.transfers,
                       settings.cuda_graph, timed, warmups, walltime, timed / walltime if walltime else math.inf,
                       metrics, warnings_for(metrics))
