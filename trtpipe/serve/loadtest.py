"""`trtpipe loadtest`: closed-loop clients through tritonclient, one thread per request in flight.

Each level keeps `concurrency` requests in flight for `duration_s` seconds and counts what came
back: throughput in samples per second, latency percentiles, errors, and answers that differ from a
direct run of the same runner here (the served file, opened in this process).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError, require

# Served and direct runs of one runner differ only by how requests were batched.
RTOL, ATOL = 1e-3, 1e-4
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class LoadOptions:
    url: str
    model: str
    levels: tuple[int, ...] = (1, 4, 16, 64)
    duration_s: float = 10.0
    batch: int = 1
    protocol: str | None = None  # "grpc" or "http"; None: from the URL's scheme, else http


@dataclass
class Level:
    """What one concurrency level measured."""

    concurrency: int
    requests: int
    samples: int
    errors: int
    wrong: int
    seconds: float
    throughput: float  # samples per second
    p50_ms: float
    p90_ms: float
    p99_ms: float
    first_error: str | None = None


@dataclass
class LoadReport:
    url: str
    model: str
    protocol: str
    batch: int
    checked_against: str | None
    levels: list[Level] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(level.errors for level in self.levels)

    @property
    def wrong(self) -> int:
        return sum(level.wrong for level in self.levels)

    def to_json(self) -> dict:
        return asdict(self)


# Each concurrent request is a thread with a client of its own: past this, the load test measures
# the client machine, not the server (and a typo such as 10000000 would start that many threads).
MAX_CONCURRENCY = 1024


def parse_levels(text: str) -> tuple[int, ...]:
    """Return the concurrency levels in `1,4,16,64`, or raise naming --concurrency."""
    try:
        levels = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        levels = ()
    if not levels or any(not 1 <= level <= MAX_CONCURRENCY for level in levels):
        raise TrtpipeError(f"--concurrency {text}: write integers from 1 to {MAX_CONCURRENCY} separated by commas, "
                           "e.g. 1,4,16,64")
    return levels


def percentiles(latencies_s: Sequence[float]) -> tuple[float, float, float]:
    """Return p50, p90 and p99 of `latencies_s` in milliseconds (nan when there are none)."""
    if not latencies_s:
        return (float("nan"),) * 3
    p50, p90, p99 = np.percentile(np.asarray(latencies_s) * 1e3, [50, 90, 99])
    return float(p50), float(p90), float(p99)


def split_url(url: str, protocol: str | None) -> tuple[str, str]:
    """Return (protocol, host:port) from `grpc://h:p`, `http://h:p` or `h:p` (with --protocol, else http)."""
    scheme, sep, rest = url.partition("://")
    if sep:
        if scheme not in ("grpc", "http"):
            raise TrtpipeError(f"{url}: the URL's scheme is {scheme}; write http://HOST:PORT or grpc://HOST:PORT")
        if protocol and protocol != scheme:
            raise TrtpipeError(f"--protocol {protocol}: the URL says {scheme}; drop one of them")
        return scheme, rest.rstrip("/")
    return protocol or "http", url.rstrip("/")


class Client:
    """One tritonclient connection (one per thread: neither client is meant to be shared across threads)."""

    def __init__(self, protocol: str, address: str):
        self.protocol = protocol
        name = "tritonclient.grpc" if protocol == "grpc" else "tritonclient.http"
        self.module = require(name, "serve", "the load test")
        self.client = self.module.InferenceServerClient(address)

    def metadata(self, model: str) -> dict:
        meta = self.client.get_model_metadata(model, **({"as_json": True} if self.protocol == "grpc" else {}))
        return meta

    def parameters(self, model: str) -> dict[str, str]:
        config = self.client.get_model_config(model, **({"as_json": True} if self.protocol == "grpc" else {}))
        config = config.get("config", config) if isinstance(config, dict) else {}
        parameters = config.get("parameters") if isinstance(config, dict) else None
        if not isinstance(parameters, dict):
            return {}  # a config of another shape names no file to check the answers against
        return {k: v.get("string_value", "") for k, v in parameters.items() if isinstance(v, dict)}

    def infer(self, model: str, arrays: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        from tritonclient.utils import np_to_triton_dtype

        inputs = []
        for name, array in arrays.items():
            tensor = self.module.InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        result = self.client.infer(model, inputs)
        return {name: result.as_numpy(name) for name in outputs}

    def close(self) -> None:
        self.client.close()


def _connect(options: LoadOptions) -> tuple[Client, dict]:
    protocol, address = split_url(options.url, options.protocol)
    client = Client(protocol, address)
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            meta = client.metadata(options.model)
        except Exception as exc:  # noqa: BLE001 - tritonclient raises its own and socket errors alike
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if time.monotonic() > deadline or ("unknown model" in message.lower() and _ready(client)):
                client.close()
                raise TrtpipeError(f"{options.url}: cannot read model '{options.model}' from the server ({message}); "
                                   "check the URL, the port's protocol and the model name") from None
            time.sleep(0.2)
            continue
        problem = metadata_problem(meta)
        if problem:
            client.close()
            raise TrtpipeError(f"{options.url}: model '{options.model}' has metadata no KServe v2 server sends "
                               f"({problem}); check the URL and the port's protocol")
        return client, meta


def metadata_problem(meta) -> str | None:
    """Return what keeps a model's metadata from telling its inputs and outputs, None when nothing does: the
    server's answer is input too, and a server that is not what the URL promised answers anything."""
    from tritonclient.utils import triton_to_np_dtype

    if not isinstance(meta, dict):
        return f"a {type(meta).__name__}, not an object"
    for key in ("inputs", "outputs"):
        tensors = meta.get(key)
        if not isinstance(tensors, list) or not tensors or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                                   for t in tensors):
            return f"'{key}' is not a list of named tensors"
    for tensor in meta["inputs"]:
        shape = tensor.get("shape")
        if not isinstance(shape, list) or not all(re.fullmatch(r"-?\d{1,18}", str(d)) for d in shape):
            return f"input '{tensor['name']}' has shape {str(shape)[:40]}, not a list of integers"
        if not isinstance(tensor.get("datatype"), str) or triton_to_np_dtype(tensor["datatype"]) is None:
            return f"input '{tensor['name']}' has datatype {str(tensor.get('datatype'))[:20]}"
    return None


def _ready(client: Client) -> bool:
    """Whether the server says all its models are loaded (an unknown model is then really unknown)."""
    try:
        return bool(client.client.is_server_ready())
    except Exception:  # noqa: BLE001 - not reachable: not ready
        return False


def load_samples(options: LoadOptions, data_dir, spec_path, limit: int) -> list[dict[str, np.ndarray]]:
    """Return request payloads of `options.batch` samples each, read from `data_dir` with the server's inputs."""
    from trtpipe import data
    from trtpipe.spec import InputSpec, ModelSpec, load_spec

    data.list_files(data_dir)  # the files are told before the server is asked
    if spec_path:
        spec = load_spec(spec_path)
    else:
        from tritonclient.utils import triton_to_np_dtype

        client, meta = _connect(options)
        client.close()
        inputs = [InputSpec(i["name"], [int(d) for d in i["shape"]], np.dtype(triton_to_np_dtype(i["datatype"])).name)
                  for i in meta["inputs"]]
        spec = ModelSpec(name=options.model, root=Path(data_dir), inputs=inputs)
    batches = list(data.iter_batches(spec, data_dir, options.batch, limit))
    full = [b for b in batches if b.size == options.batch] or batches  # a short last batch only when it is all there is
    return [b.arrays for b in full]


def _expected(check_path, payloads, client: Client, options: LoadOptions) -> tuple[list[dict] | None, str | None]:
    """Return the direct run's outputs for every payload, and the file run, or (None, None) when none is here."""
    from trtpipe.serve.models import open_runner

    if check_path is None:
        served = client.parameters(options.model).get("trtpipe.file")
        if not served or not Path(served).is_file():
            return None, None
        check_path = Path(served)
    with open_runner(check_path) as runner:
        return [runner(p) for p in payloads], str(check_path)


def _agrees(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> bool:
    return all(name in got and got[name].shape == value.shape and
               np.allclose(got[name], value, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(value).max(initial=0))))
               for name, value in want.items())


def run_level(options: LoadOptions, concurrency: int, payloads: list[dict], expected: list[dict] | None,
              outputs: list[str]) -> Level:
    """Keep `concurrency` requests in flight for `options.duration_s`; return what came back."""
    protocol, address = split_url(options.url, options.protocol)
    lock = threading.Lock()
    latencies: list[float] = []
    counts = {"requests": 0, "errors": 0, "wrong": 0}
    first_error: list[str] = []
    clients = [Client(protocol, address) for _ in range(concurrency)]
    start_line = threading.Barrier(concurrency + 1)
    deadline = [0.0]

    def worker(index: int) -> None:
        client = clients[index]
        mine, wrong, errors, sent = [], 0, 0, 0
        start_line.wait()
        i = index
        while time.perf_counter() < deadline[0]:
            payload = payloads[i % len(payloads)]
            began = time.perf_counter()
            try:
                got = client.infer(options.model, payload, outputs)
                mine.append(time.perf_counter() - began)
                if expected is not None and not _agrees(got, expected[i % len(payloads)]):
                    wrong += 1
            except Exception as exc:  # noqa: BLE001 - every failure is counted, the first one shown
                errors += 1
                if not first_error:
                    first_error.append(str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__)
            sent += 1
            i += concurrency
        with lock:
            latencies.extend(mine)
            counts["requests"] += sent
            counts["errors"] += errors
            counts["wrong"] += wrong

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(concurrency)]
    for thread in threads:
        thread.start()
    began = time.perf_counter()
    deadline[0] = began + options.duration_s
    start_line.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    for client in clients:
        client.close()
    answered = counts["requests"] - counts["errors"]
    p50, p90, p99 = percentiles(latencies)
    return Level(concurrency, counts["requests"], answered * options.batch, counts["errors"], counts["wrong"], seconds,
                 answered * options.batch / seconds, p50, p90, p99, first_error[0] if first_error else None)


def run_loadtest(options: LoadOptions, payloads: list[dict], check_path=None) -> LoadReport:
    """Run every level of `options` with `payloads`; answers are checked when the served file is here."""
    if not payloads:
        raise TrtpipeError("--data: no samples to send")
    client, meta = _connect(options)
    try:
        expected, checked = _expected(check_path, payloads, client, options)
    finally:
        client.close()
    outputs = [o["name"] for o in meta["outputs"]]
    report = LoadReport(options.url, options.model, split_url(options.url, options.protocol)[0], options.batch, checked)
    for level in options.levels:
        report.levels.append(run_level(options, level, payloads, expected, outputs))
    return report


def format_table(report: LoadReport) -> str:
    """Return the report as a table, one row per concurrency level."""
    check = f"checked against {report.checked_against}" if report.checked_against else "answers not checked (no file here)"
    lines = [f"{report.model} at {report.url} ({report.protocol}, batch {report.batch}; {check})",
             (f"{'concurrency':>11} {'samples/s':>10} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'requests':>9} "
              f"{'errors':>7} {'wrong':>6}")]
    for lv in report.levels:
        lines.append(f"{lv.concurrency:>11} {lv.throughput:>10.1f} {lv.p50_ms:>8.2f} {lv.p90_ms:>8.2f} {lv.p99_ms:>8.2f} "
                     f"{lv.requests:>9} {lv.errors:>7} {lv.wrong:>6}")
        if lv.first_error:
            lines.append(f"{'':>11} first error: {lv.first_error}")
    return "\n".join(lines)


def plot_levels(report: LoadReport, path) -> None:
    """Write throughput and p99 latency against concurrency as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from trtpipe.files import atomic_path

    x = [lv.concurrency for lv in report.levels]
    fig, left = plt.subplots(figsize=(6, 4))
    left.plot(x, [lv.throughput for lv in report.levels], "o-", color="tab:blue")
    left.set_xscale("log", base=2)
    left.set_xlabel("concurrency (requests in flight)")
    left.set_ylabel("throughput (samples/s)", color="tab:blue")
    left.set_ylim(bottom=0)
    right = left.twinx()
    right.plot(x, [lv.p99_ms for lv in report.levels], "s--", color="tab:red")
    right.set_ylabel("p99 latency (ms)", color="tab:red")
    right.set_ylim(bottom=0)
    left.set_title(f"{report.model} over {report.protocol}, batch {report.batch}")
    fig.tight_layout()
    with atomic_path(path, "--plot") as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
