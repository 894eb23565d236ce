"""The direct stack of `trtpipe serve`: the HTTP and gRPC fronts answer inference themselves.

The Triton stack hands every request from a front to Triton's frontend, to its Python stub (a
second process) and back: on an idle 2-core machine that chain costs 1.6 ms before any model runs
(docs/serving.md). Here the runner lives in the fronts' process: a request checked by the front
(the same limits, the same one-line refusals) goes to the model's batcher and comes back as the
KServe v2 answer Triton would give, so tritonclient, curl and `trtpipe loadtest` work unchanged.

The batcher has no thread of its own: the thread of the request that finds a runner free runs
what is queued (up to the model's max batch, waiting at most --max-queue-delay-us for more), so a
request that arrives at an idle server runs at once, in the thread that read it, with no hand-off.
Requests that arrive while every runner is busy queue up and run together next.
"""

from __future__ import annotations

import collections
import http.server
import json
import math
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from trtpipe.serve.batches import run_requests
from trtpipe.serve.guard import REQUEST_HEAD_S, Refused
from trtpipe.serve.limits import TRITON_DATATYPES, RequestLimits, reply_error
from trtpipe.serve.models import ServedModel

METRICS_CONNECTIONS = 8  # connections the metrics port reads at once
VERSION = "1"  # the one version a served model has, as in the Triton stack's repository
MODEL_PATH = re.compile(r"/v2/models/([^/]+)(?:/versions/[^/]+)?(/ready|/config|/infer)?/?")
# The methods each endpoint answers (by a model path's end, or the whole path), as Triton does; the rest GET.
HTTP_METHODS = {"/infer": ("POST",), "/v2/repository/index": ("POST", "GET")}
# Typed contents of a gRPC input, per Triton datatype (raw_input_contents is what tritonclient sends).
CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
            "INT64": "int64_contents", "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
            "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents"}


def numpy_dtype(name: str) -> np.dtype:
    """Return the numpy dtype of a runner's dtype name (bfloat16 through ml_dtypes, as ONNX Runtime takes it)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass
class _Request:
    feeds: dict[str, np.ndarray]
    samples: int
    arrived: float = field(default_factory=time.perf_counter)
    result: dict[str, np.ndarray] | str | None = None


@dataclass
class Counts:
    """What Triton's metrics count per model, counted the same way (durations in microseconds)."""

    success: int = 0
    failure: int = 0
    inferences: int = 0  # samples
    executions: int = 0  # runner calls
    request_us: float = 0.0
    queue_us: float = 0.0
    compute_us: float = 0.0


class Batcher:
    """Runs one model's requests on its runners: what is queued runs as one batch, up to the max batch.

    `lone`, when given, runs a batch that finds every runner idle and nothing queued behind it: a runner
    of every core for the request that arrives alone, where `runners` (one thread each) serve a busy
    queue side by side. ONNX Runtime cannot change a session's threads between runs, so both are open."""

    def __init__(self, model: ServedModel, runners: Sequence[Callable], max_queue_delay_us: int,
                 lone: Callable | None = None):
        self.model = model
        self.limits: RequestLimits = model.limits()
        self.runners = list(runners)
        self.free = list(runners)
        self.lone = lone
        self.lone_busy = False
        self.delay_s = max_queue_delay_us / 1e6 if model.max_batch else 0.0
        self.queue: collections.deque[_Request] = collections.deque()
        self.cond = threading.Condition()
        self.flushing = False
        self.counts = Counts()

    @property
    def pending(self) -> int:
        """The requests queued, not yet running."""
        return len(self.queue)

    def infer(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Return the outputs of one request; raise Refused with the runner's one line when it fails."""
        request = _Request(feeds, len(next(iter(feeds.values()))) if self.model.max_batch else 1)
        with self.cond:
            self.queue.append(request)
            while request.result is None:
                wait = self._wait_s()
                if wait == 0:
                    self._run_next()  # returns with the lock held again; this request may still be queued
                else:
                    self.cond.wait(wait)
        if isinstance(request.result, str):
            raise Refused(400, request.result)
        return request.result

    def _wait_s(self) -> float | None:
        """Return 0 when this thread should run the queue now, else how long to wait (None: until told)."""
        if not self.free or not self.queue:
            return None
        if self.flushing or not self.delay_s or sum(r.samples for r in self.queue) >= self.model.max_batch:
            return 0
        return max(0.0, self.queue[0].arrived + self.delay_s - time.perf_counter())

    def _run_next(self) -> None:
        """Run the requests at the head of the queue on a free runner (called and returning with the lock held)."""
        batch = [self.queue.popleft()]
        samples = batch[0].samples
        while self.queue and self.model.max_batch and samples + self.queue[0].samples <= self.model.max_batch:
            samples += self.queue[0].samples
            batch.append(self.queue.popleft())
        lone = (self.lone is not None and not self.lone_busy and not self.queue
                and len(self.free) == len(self.runners))
        if lone:
            runner, self.lone_busy = self.lone, True
        else:
            runner = self.free.pop()
        self.cond.release()
        began = time.perf_counter()
        try:
            results = run_requests(runner, [r.feeds for r in batch], self.limits, bool(self.model.max_batch))
        except Exception as exc:  # noqa: BLE001 - every request of the batch is told; the server keeps serving
            results = [reply_error(exc)] * len(batch)
        ended = time.perf_counter()
        self.cond.acquire()
        if lone:
            self.lone_busy = False
        else:
            self.free.append(runner)
        counts = self.counts
        counts.executions += 1
        for request, result in zip(batch, results):
            request.result = result
            failed = isinstance(result, str)
            counts.failure += failed
            counts.success += not failed
            counts.inferences += 0 if failed else request.samples
            counts.request_us += (ended - request.arrived) * 1e6
            counts.queue_us += (began - request.arrived) * 1e6
            counts.compute_us += (ended - began) * 1e6
        self.cond.notify_all()

    def flush(self) -> None:
        """Run what is queued without waiting for fuller batches (the server is stopping)."""
        with self.cond:
            self.flushing = True
            self.cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or running; return whether that happened within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while self.queue or len(self.free) < len(self.runners) or self.lone_busy:
                if not self.cond.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    return False
        return True


class DirectModels:
    """The served models, answering the KServe v2 protocol (HTTP and gRPC) with their batchers."""

    def __init__(self, models: Sequence[ServedModel], runners: Mapping[str, Sequence[Callable]], config_texts: Mapping[str, str],
                 max_queue_delay_us: int, lone: Mapping[str, Callable | None] | None = None):
        from google.protobuf import json_format, text_format
        from tritonclient.grpc import model_config_pb2, service_pb2

        self.pb = service_pb2
        self.json_format = json_format
        self.models = {m.name: m for m in models}
        self.batchers = {m.name: Batcher(m, runners[m.name], max_queue_delay_us, (lone or {}).get(m.name)) for m in models}
        self.configs = {}
        for model in models:
            config = text_format.Parse(config_texts[model.name], model_config_pb2.ModelConfig())
            config.ClearField("backend")  # no Triton backend runs it: this process does
            config.platform = "trtpipe_direct"
            self.configs[model.name] = config
        self.inputs = {m.name: {s.name: s for s in m.inputs} for m in models}
        self.grpc_methods = {"ServerLive": self._live, "ServerReady": self._ready, "ModelReady": self._model_ready,
                             "ServerMetadata": self._server_metadata, "ModelMetadata": self._model_metadata,
                             "ModelConfig": self._model_config, "RepositoryIndex": self._index}

    def limits(self) -> dict[str, RequestLimits]:
        """Return each model's request limits (the fronts check requests against them)."""
        return {name: batcher.limits for name, batcher in self.batchers.items()}

    def flush(self) -> None:
        """Run what every batcher holds now (the server is stopping)."""
        for batcher in self.batchers.values():
            batcher.flush()

    def wait_idle(self, timeout_s: float) -> None:
        """Wait, at most `timeout_s` in all, until no model has a request queued or running."""
        deadline = time.monotonic() + timeout_s
        for batcher in self.batchers.values():
            batcher.wait_idle(max(0.0, deadline - time.monotonic()))

    # What both protocols share: the model, its inputs as arrays, its outputs as the client asked.

    def _model(self, name: str) -> ServedModel:
        if name not in self.models:
            raise Refused(404, f"Request for unknown model: '{name}' is not found")
        return self.models[name]

    def _array(self, model: ServedModel, name: str, shape: list[int], data: bytes | Sequence) -> np.ndarray:
        """Return input `name` of `shape` from raw bytes or a list of values, in the shape the runner takes."""
        spec = self.inputs[model.name][name]
        dtype = numpy_dtype(spec.dtype)
        count = math.prod(shape)
        if isinstance(data, bytes):
            if len(data) != count * dtype.itemsize:
                raise Refused(400, f"input '{name}' holds {len(data)} bytes; shape {shape} of "
                                   f"{TRITON_DATATYPES.get(spec.dtype)} takes {count * dtype.itemsize}")
            array = np.frombuffer(data, dtype)
        else:
            array = _values(name, data, dtype, TRITON_DATATYPES.get(spec.dtype, spec.dtype))
            if array.size != count:
                raise Refused(400, f"input '{name}' holds {array.size} values; shape {shape} takes {count}")
        if self.batchers[model.name].limits.inputs[name].reshaped and len(shape) == len(spec.shape) + 1:
            shape = shape[:-1]  # the client's [N, 1] of an [N] input, as Triton's reshape hands it to the model
        return array.reshape(shape)

    def _run(self, model: ServedModel, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [s.name for s in model.inputs if s.name not in feeds]
        if missing:
            raise Refused(400, f"input '{missing[0]}' is missing; model '{model.name}' takes "
                               f"{', '.join(s.name for s in model.inputs)}")
        outputs = self.batchers[model.name].infer(feeds)
        # An output the repository writes as dims [1] with an empty reshape: clients get [N, 1] (or [1]).
        return {s.name: outputs[s.name].reshape(*outputs[s.name].shape, 1) if not model.dims(s) else outputs[s.name]
                for s in model.outputs}

    def _wanted(self, model: ServedModel, names: list[str]) -> list[str]:
        known = [s.name for s in model.outputs]
        for name in names:
            if name not in known:
                raise Refused(400, f"unknown output '{name}' for model '{model.name}'; it gives {', '.join(known)}")
        return names or known

    def _metadata(self, model: ServedModel) -> dict:
        config = self.configs[model.name]
        batch = [-1] if model.max_batch else []

        def tensors(entries, specs):
            return [{"name": t.name, "datatype": TRITON_DATATYPES[s.dtype], "shape": batch + [int(d) for d in t.dims]}
                    for t, s in zip(entries, specs)]

        return {"name": model.name, "versions": [VERSION], "platform": config.platform,
                "inputs": tensors(config.input, model.inputs), "outputs": tensors(config.output, model.outputs)}

    # gRPC: GrpcGuard hands over the parsed ModelInferRequest (checked) or any other call's bytes.

    def grpc_infer(self, request) -> bytes:
        """Return the serialized ModelInferResponse of a checked ModelInferRequest; raise Refused."""
        model = self._model(request.model_name)
        raw = list(request.raw_input_contents)
        if raw and len(raw) != len(request.inputs):
            raise Refused(400, f"the request has {len(request.inputs)} inputs and {len(raw)} raw_input_contents")
        feeds = {}
        for i, tensor in enumerate(request.inputs):
            if raw and tensor.HasField("contents"):
                raise Refused(400, f"input '{tensor.name}' has raw_input_contents and contents; send its data once")
            if raw:
                data = raw[i]
            elif tensor.datatype in CONTENTS:
                data = list(getattr(tensor.contents, CONTENTS[tensor.datatype]))
            else:
                raise Refused(400, f"input '{tensor.name}': send {tensor.datatype} as raw_input_contents")
            feeds[tensor.name] = self._array(model, tensor.name, list(tensor.shape), data)
        wanted = self._wanted(model, [o.name for o in request.outputs])
        outputs = self._run(model, feeds)
        response = self.pb.ModelInferResponse(model_name=model.name, model_version=VERSION, id=request.id)
        for name in wanted:
            array = np.ascontiguousarray(outputs[name])
            response.outputs.add(name=name, datatype=TRITON_DATATYPES[str(array.dtype)], shape=array.shape)
            response.raw_output_contents.append(array.tobytes())
        return response.SerializeToString()

    def grpc_stream_answer(self, request, problem: tuple[str, str] | None) -> bytes:
        """Return one ModelStreamInferResponse: the answer, or the error line in the stream as Triton sends it."""
        if problem is None:
            try:
                answer = self.pb.ModelInferResponse.FromString(self.grpc_infer(request))
                return self.pb.ModelStreamInferResponse(infer_response=answer).SerializeToString()
            except Refused as refused:
                problem = ("", str(refused))
        return self.pb.ModelStreamInferResponse(error_message=problem[1]).SerializeToString()

    def grpc_call(self, method: str, body: bytes) -> bytes:
        """Return the serialized answer to any call but inference; raise Refused."""
        name = method.rsplit("/", 1)[-1]
        if name not in self.grpc_methods:
            raise Refused(501, f"{name} is not served by trtpipe serve --stack direct; use --stack triton")
        request_type = getattr(self.pb, f"{name}Request")
        try:
            request = request_type.FromString(body)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError, whichever implementation is installed
            raise Refused(400, f"the request is not a {name}Request") from None
        return self.grpc_methods[name](request).SerializeToString()

    def _live(self, _request):
        return self.pb.ServerLiveResponse(live=True)

    def _ready(self, _request):
        return self.pb.ServerReadyResponse(ready=True)

    def _model_ready(self, request):
        return self.pb.ModelReadyResponse(ready=request.name in self.models)

    def _server_metadata(self, _request):
        from trtpipe import __version__

        return self.pb.ServerMetadataResponse(name="trtpipe", version=__version__)

    def _model_metadata(self, request):
        return self.json_format.ParseDict(self._metadata(self._model(request.name)), self.pb.ModelMetadataResponse())

    def _model_config(self, request):
        return self.pb.ModelConfigResponse(config=self.configs[self._model(request.name).name])

    def _index(self, _request):
        return self.pb.RepositoryIndexResponse(models=[{"name": n, "version": VERSION, "state": "READY"}
                                                       for n in self.models])

    # HTTP: the Guard hands over every request it accepted (inference checked against the limits).

    def http_answer(self, command: str, path: str, headers, body: bytes,
                    header: dict | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """Return (status, headers, body) of the answer to one HTTP request; raise Refused. `header`: an
        inference request's JSON header, as the Guard parsed it when it checked the request (parsed once)."""
        path = path.split("?", 1)[0]
        match = MODEL_PATH.fullmatch(path)
        verbs = HTTP_METHODS.get(match.group(2) if match else path, ("GET", "HEAD"))
        if command not in verbs:
            raise Refused(405, f"{command} {path}: send {' or '.join(verbs)}")
        if path in ("/v2/health/live", "/v2/health/ready"):
            return 200, [], b""
        if path in ("/v2", "/v2/"):
            from trtpipe import __version__

            return _json(200, {"name": "trtpipe", "version": __version__, "extensions": ["binary_tensor_data"]})
        if path == "/v2/repository/index":
            return _json(200, [{"name": n, "version": VERSION, "state": "READY"} for n in self.models])
        if not match:
            raise Refused(404, f"{path}: not served by trtpipe serve --stack direct")
        model, what = self._model(match.group(1)), match.group(2)
        if what == "/infer":
            return self._http_infer(model, headers, body, header)
        if what == "/ready":
            return 200, [], b""
        if what == "/config":
            return _json(200, self.json_format.MessageToDict(self.configs[model.name], preserving_proto_field_name=True))
        return _json(200, self._metadata(model))

    def _http_infer(self, model: ServedModel, headers, body: bytes, header: dict) -> tuple[int, list[tuple[str, str]], bytes]:
        length = headers.get("Inference-Header-Content-Length")
        split = int(length) if length else len(body)  # the Guard checked it is a number that fits
        binary = memoryview(body)[split:]
        feeds, offset = {}, 0
        for entry in header["inputs"]:
            size = _parameters(entry, f"input '{entry['name']}'").get("binary_data_size")
            if size is not None:
                if not isinstance(size, int) or isinstance(size, bool) or size < 0 or offset + size > len(binary):
                    raise Refused(400, f"input '{entry['name']}': binary_data_size {size} does not fit the body")
                data, offset = bytes(binary[offset:offset + size]), offset + size
            elif "data" in entry:
                data = entry["data"]
            else:
                raise Refused(400, f"input '{entry['name']}' has no 'data' and no binary_data_size")
            feeds[entry["name"]] = self._array(model, entry["name"], list(entry["shape"]), data)
        if offset != len(binary):
            raise Refused(400, f"the body holds {len(binary) - offset} bytes after its inputs' binary_data_size; "
                               "send each input's bytes once")
        requested = header.get("outputs") or []
        if not isinstance(requested, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str) for o in requested):
            raise Refused(400, "'outputs' must be a list of {\"name\": ...}")
        binary_default = _flag(_parameters(header, "the request"), "binary_data_output", False)
        as_binary = {o["name"]: _flag(_parameters(o, f"output '{o['name']}'"), "binary_data", binary_default)
                     for o in requested}
        wanted = self._wanted(model, [o["name"] for o in requested])
        outputs = self._run(model, feeds)
        entries, tail = [], []
        for name in wanted:
            array = np.ascontiguousarray(outputs[name])
            entry = {"name": name, "datatype": TRITON_DATATYPES[str(array.dtype)], "shape": list(array.shape)}
            if as_binary.get(name, binary_default):
                tail.append(array.tobytes())
                entry["parameters"] = {"binary_data_size": len(tail[-1])}
            else:
                entry["data"] = array.ravel().tolist()
            entries.append(entry)
        answer = {"model_name": model.name, "model_version": VERSION, "outputs": entries}
        if "id" in header:
            answer["id"] = header["id"]
        text = json.dumps(answer).encode()
        if not tail:
            return 200, [("Content-Type", "application/json")], text
        return 200, [("Content-Type", "application/octet-stream"),
                     ("Inference-Header-Content-Length", str(len(text)))], text + b"".join(tail)

    # Metrics: Triton's Prometheus counters of each model, under the same names.

    def metrics_text(self) -> str:
        """Return the Prometheus exposition of every model's counters, named as Triton names them."""
        rows = [("nv_inference_request_success", "counter", lambda c, b: c.success),
                ("nv_inference_request_failure", "counter", lambda c, b: c.failure),
                ("nv_inference_count", "counter", lambda c, b: c.inferences),
                ("nv_inference_exec_count", "counter", lambda c, b: c.executions),
                ("nv_inference_request_duration_us", "counter", lambda c, b: int(c.request_us)),
                ("nv_inference_queue_duration_us", "counter", lambda c, b: int(c.queue_us)),
                ("nv_inference_compute_infer_duration_us", "counter", lambda c, b: int(c.compute_us)),
                ("nv_inference_pending_request_count", "gauge", lambda c, b: b.pending)]
        lines = []
        for metric, kind, value in rows:
            lines.append(f"# TYPE {metric} {kind}")
            for name, batcher in self.batchers.items():
                with batcher.cond:
                    lines.append(f'{metric}{{model="{name}",version="{VERSION}"}} {value(batcher.counts, batcher)}')
        return "\n".join(lines) + "\n"


def _values(name: str, data, dtype: np.dtype, datatype: str) -> np.ndarray:
    """Return an input's listed values (JSON's, or gRPC's typed contents) as a flat array of `dtype`, refusing
    values of another kind: strings, objects, ragged lists, booleans for numbers, fractions for integers,
    integers out of the type's range. numpy would convert, truncate or wrap them without a word."""
    try:
        values = np.asarray(data)
    except (ValueError, TypeError):
        values = np.asarray([object()])  # ragged: refused below
    kinds = "b" if dtype.kind == "b" else "iu" if dtype.kind in "iu" else "iuf"
    if values.size and values.dtype.kind not in kinds:
        raise Refused(400, f"input '{name}': its data are not {datatype} values")
    if values.size and dtype.kind in "iu":
        info = np.iinfo(dtype)
        low, high = values.min(), values.max()
        if low < info.min or high > info.max:
            raise Refused(400, f"input '{name}' holds {low if low < info.min else high}, outside {datatype}'s range")
    return values.astype(dtype, copy=False).ravel()


def _parameters(entry: dict, where: str) -> dict:
    """Return the 'parameters' object of a request, an input or an output (none given: {}); refuse any other value."""
    value = entry.get("parameters")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(400, f"{where}: 'parameters' must be an object")
    return value


def _flag(parameters: dict, key: str, default: bool) -> bool:
    value = parameters.get(key, default)
    if not isinstance(value, bool):
        raise Refused(400, f"parameter '{key}' is {json.dumps(value)[:40]}; it takes true or false")
    return value


def _json(status: int, value) -> tuple[int, list[tuple[str, str]], bytes]:
    return status, [("Content-Type", "application/json")], json.dumps(value).encode()


class MetricsServer(http.server.ThreadingHTTPServer):
    """GET /metrics on (host, port): the direct stack's counters.

    A thread a connection, as the fronts: connections that never finish a request would each hold one
    for ever, and enough of them leave the process no thread to answer inference with. So at most
    METRICS_CONNECTIONS are read at once (a scraper needs one; the rest are closed unread), and each
    must send its request within REQUEST_HEAD_S."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = socket.SOMAXCONN

    def __init__(self, host: str, port: int, models: DirectModels):
        self.models = models
        self.room = threading.BoundedSemaphore(METRICS_CONNECTIONS)
        super().__init__((host, port), _MetricsHandler)

    def process_request(self, request, client_address):
        if not self.room.acquire(blocking=False):
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.room.release()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):  # a client that timed out or went away is no error
            super().handle_error(request, client_address)


class _MetricsHandler(http.server.BaseHTTPRequestHandler):
    server: MetricsServer
    timeout = REQUEST_HEAD_S

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        found = self.path.split("?", 1)[0] == "/metrics"
        payload = self.server.models.metrics_text().encode() if found else b"not found\n"
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
