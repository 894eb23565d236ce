"""A hostile client against one live `trtpipe serve` (loopback only, a fixed number of requests, a time
bound): malformed JSON, huge, negative and zero shapes, wrong dtypes and names, oversize, compressed
and chunked bodies over HTTP, and lying shapes and oversize messages over gRPC; values of the wrong kind,
parameters of the wrong type, URLs and headers http.server will not read, and data given twice; lengths,
URLs and methods a server may not take (request smuggling), and the absolute form of a URL; with a good
request after every bad one and one bad request inside a batch of good ones. The server answers every good
request right, every bad one with one line (no traceback, no server path), and is still serving at the end."""

import http.client
import json
import select
import socket
import threading
import time
import zlib

import numpy as np
import pytest
from serve_helpers import STACKS, needs_pytriton
from serve_process import start_server

import models
from trtpipe.runtime import OnnxRunner

pytestmark = needs_pytriton()
MAX_BATCH = 8
FUZZ_REQUESTS = 102  # six rounds of every kind
TIME_BOUND_S = 60


@pytest.fixture(scope="module", params=STACKS)
def served(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("fuzz")
    models.save(models.conv_net(batch="N"), root / "conv.onnx")
    models.save(models.lookup(rows=5), root / "lookup.onnx")
    server = start_server([root / "conv.onnx", root / "lookup.onnx", "--max-batch", MAX_BATCH,
                           "--max-queue-delay-us", 200_000, "--stack", request.param], root / "serve.log")
    yield server, root
    assert server.terminate() == 0, server.output[-2000:]


def post(port, path, body: bytes, headers=None):
    """POST `body` on a fresh connection; return (status, the reply's JSON or its text)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("POST", path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(data or b"{}")
    except ValueError:
        return response.status, data.decode(errors="replace")


def request_json(name="input", shape=(1, 3, 16, 16), datatype="FP32", data=None):
    data = [0.5] * int(np.prod(shape)) if data is None else data
    return json.dumps({"inputs": [{"name": name, "shape": list(shape), "datatype": datatype, "data": data}]}).encode()


def good_request(root, rng):
    """Return a random input of the conv model, its in-process answer, and the JSON request that sends it."""
    good = rng.random((1, 3, 16, 16), dtype=np.float32)
    with OnnxRunner(root / "conv.onnx") as runner:
        expected = runner({"input": good})["logits"]
    return good, expected, request_json(shape=good.shape, data=good.ravel().tolist())


def bad_http_bodies(rng):
    """Yield (what, path, body, headers) of requests the server must refuse, drawn from `rng`."""
    conv = "/v2/models/conv/infer"
    huge = int(rng.integers(10**6, 10**13))
    yield "huge shape", conv, request_json(shape=(1, 3, 16, huge), data=[1.0]), {}
    yield "huge batch", conv, request_json(shape=(huge, 3, 16, 16), data=[1.0]), {}
    yield "negative shape", conv, request_json(shape=(-int(rng.integers(1, 10**6)), 3, 16, 16), data=[1.0]), {}
    yield "zero shape", conv, request_json(shape=(0, 3, 16, 16), data=[]), {}
    yield "overflowing shape", conv, request_json(shape=(2**62, 2**62, 16, 16), data=[1.0]), {}
    yield "wrong rank", conv, request_json(shape=(1, 3, 16), data=[1.0] * 48), {}
    yield "wrong dtype", conv, request_json(datatype=str(rng.choice(["FP64", "INT8", "BYTES", "NOPE"]))), {}
    yield "wrong name", conv, request_json(name="nope", shape=(1, 10**12), data=[1.0]), {}
    yield "unknown model", "/v2/models/nope/infer", request_json(shape=(10**12,), data=[1.0]), {}
    yield "not JSON", conv, rng.bytes(int(rng.integers(1, 2000))), {}
    yield "truncated JSON", conv, request_json()[: int(rng.integers(1, 200))], {}
    yield "deep JSON", conv, b"[" * int(rng.integers(10**4, 10**5)), {}
    yield "no inputs", conv, json.dumps({"inputs": 3}).encode(), {}
    yield "shape of strings", conv, request_json(shape=("1", 3, 16, 16), data=[1.0]), {}
    yield "oversize body", conv, b" " * (2 << 20), {}
    yield "inflating body", conv, zlib.compress(b" " * (64 << 20)), {"Content-Encoding": "deflate"}
    yield "bad header length", conv, request_json(), {"Inference-Header-Content-Length": str(10**9)}


def test_a_hostile_client_is_refused_and_every_good_request_answered(served):
    server, root = served
    rng = np.random.default_rng(26)
    began = time.monotonic()
    good, expected, body = good_request(root, rng)
    refused, kinds = {}, []
    for i in range(FUZZ_REQUESTS):
        assert time.monotonic() - began < TIME_BOUND_S, f"{i} requests in {TIME_BOUND_S} s"
        if not kinds:
            kinds = list(bad_http_bodies(rng))  # every kind once per round, with new random sizes
        what, path, bad, headers = kinds.pop(0)
        status, reply = post(server.http, path, bad, headers)
        assert 400 <= status < 500, (what, status, reply)
        message = reply["error"] if isinstance(reply, dict) else reply
        assert "\n" not in message and "Traceback" not in message and str(root) not in message, (what, message)
        refused.setdefault(what, message)
        status, reply = post(server.http, "/v2/models/conv/infer", body)  # the server still answers, and right
        assert status == 200, (what, reply)
        np.testing.assert_allclose(np.asarray(reply["outputs"][0]["data"], np.float32).reshape(1, 16), expected,
                                   rtol=1e-4, atol=1e-5)
    assert "more than 8 (the batch limit)" in refused["huge batch"] and "takes [-1,3,16,16]" in refused["huge shape"]
    assert "at least 1" in refused["negative shape"] and "more than" in refused["inflating body"]
    from tritonclient.utils import InferenceServerException

    lies = [("conv", "input", "FP32", shape) for shape in ([10**12, 3, 16, 16], [1, 3, 16, 10**12], [-5, 3, 16, 16],
                                                         [0, 3, 16, 16], [2**62, 2**62, 16, 16], [1, 3, 16])]
    lies += [("conv", "nope", "FP32", [1, 3, 16, 16]), ("conv", "input", "INT64", [1, 3, 16, 16]),
             ("nope", "input", "FP32", [1, 3, 16, 16])]
    oversize = np.ones(16 << 18, np.float32)  # 16 MiB, far more than any request the two models take
    lies += [("conv", "input", "FP32", [1, 3, 16, 16], oversize), ("conv", "input", "FP32", [8, 3, 16, 16], oversize)]
    grpc_refused = {}
    for model, name, datatype, shape, *data in lies:
        with pytest.raises(InferenceServerException) as caught:
            grpc_infer(server.grpc, model, name, datatype, shape, *data)
        assert "Traceback" not in str(caught.value) and str(root) not in str(caught.value)
        grpc_refused.setdefault(tuple(shape) if not data else "oversize", str(caught.value))
        np.testing.assert_allclose(grpc_infer(server.grpc, "conv", "input", "FP32", good.shape, good), expected,
                                   rtol=1e-4, atol=1e-5)
    # The front refuses these itself: the shape before Triton sees it, the message from its length prefix.
    assert "more than 8 (the batch limit)" in grpc_refused[(10**12, 3, 16, 16)], grpc_refused
    assert "takes [-1,3,16,16]" in grpc_refused[(1, 3, 16, 10**12)], grpc_refused
    assert "larger than max (16777" in grpc_refused["oversize"] and "vs. 1048576)" in grpc_refused["oversize"], grpc_refused
    assert server.process.poll() is None


def lying_values(rng):
    """Yield (what, path, body, headers) of requests whose shapes are right and whose values or parameters are
    not what the model takes, drawn from `rng`: the class numpy would convert, truncate or wrap unasked."""
    conv, lookup = "/v2/models/conv/infer", "/v2/models/lookup/infer"
    count = 3 * 16 * 16
    number = float(rng.random())
    yield "numbers as strings", conv, request_json(data=[str(number)] * count), {}
    yield "booleans for FP32", conv, request_json(data=[bool(rng.integers(2))] * count), {}
    yield "nulls", conv, request_json(data=[None] * count), {}
    yield "objects", conv, request_json(data=[{"v": number}] * count), {}
    cut = int(rng.integers(1, count))
    yield "ragged lists", conv, request_json(data=[[number] * cut, [number] * (count - cut + 1)]), {}
    yield "data not a list", conv, request_json(data=number), {}
    index = {"name": "index", "shape": [1, 1], "datatype": "INT64"}
    yield "a fraction for INT64", lookup, json.dumps({"inputs": [{**index, "data": [number + 1]}]}).encode(), {}
    beyond = 2**63 + int(rng.integers(0, 2**62))  # a UINT64 no INT64 holds
    yield "an integer beyond INT64", lookup, json.dumps({"inputs": [{**index, "data": [beyond]}]}).encode(), {}
    yield "an integer below INT64", lookup, json.dumps({"inputs": [{**index, "data": [-beyond - 1]}]}).encode(), {}
    yield "an integer beyond any float", conv, request_json(data=[10 ** int(rng.integers(310, 400))] * count), {}
    good = json.loads(request_json(data=[number] * count))
    for value in ("yes", 1, [], None if rng.integers(2) else "true"):
        yield f"parameters {value!r}", conv, json.dumps({**good, "parameters": value or "x"}).encode(), {}
        yield f"binary_data {value!r}", conv, json.dumps(
            {**good, "outputs": [{"name": "logits", "parameters": {"binary_data": value}}]}).encode(), {}
    yield "binary_data_output a number", conv, json.dumps({**good, "parameters": {"binary_data_output": 1}}).encode(), {}
    yield "binary_data_size a boolean", conv, json.dumps(
        {"inputs": [{**good["inputs"][0], "data": None, "parameters": {"binary_data_size": True}}]}).encode(), {}
    yield "an input's parameters a list", conv, json.dumps({"inputs": [{**good["inputs"][0], "parameters": [1]}]}).encode(), {}
    yield "a URL too long", "/v2/models/" + "m" * int(rng.integers(65537, 80000)) + "/infer", request_json(), {}
    yield "too many headers", conv, request_json(), {f"X-H{i}": "1" for i in range(int(rng.integers(101, 300)))}
    yield "a header line too long", conv, request_json(), {"X-Long": "v" * int(rng.integers(65537, 80000))}


# What Triton 2.51 lets pass on the Triton stack (the parameters it reads none of); the direct stack refuses it.
TRITON_IGNORES = {"an input's parameters a list"}


def test_values_and_parameters_of_the_wrong_kind_are_refused(served):
    server, root = served
    rng = np.random.default_rng(27)
    good, expected, body = good_request(root, rng)
    direct = "--stack direct" in " ".join(map(str, server.process.args))
    began, refused = time.monotonic(), {}
    for _round in range(2):
        for what, path, bad, headers in lying_values(rng):
            assert time.monotonic() - began < TIME_BOUND_S, what
            status, reply = post(server.http, path, bad, headers)
            # Values Triton cannot parse it answers itself, with its own 500 and one line; the direct stack says 400.
            if not direct and what in TRITON_IGNORES:
                assert status == 200, (what, status, reply)
                continue
            assert isinstance(reply, dict) and (400 <= status < 500 or (not direct and status == 500)), (what, status, reply)
            message = reply["error"]
            assert "\n" not in message and "Traceback" not in message and str(root) not in message, (what, message)
            refused.setdefault(what, message)
            status, reply = post(server.http, "/v2/models/conv/infer", body)
            assert status == 200, (what, reply)
            np.testing.assert_allclose(np.asarray(reply["outputs"][0]["data"], np.float32).reshape(1, 16), expected,
                                       rtol=1e-4, atol=1e-5)
    assert "Request-URI Too Long" in refused["a URL too long"] and "Too many headers" in refused["too many headers"]
    if direct:
        assert "its data are not FP32 values" in refused["numbers as strings"], refused
        assert "its data are not INT64 values" in refused["a fraction for INT64"], refused
        assert "outside INT64's range" in refused["an integer beyond INT64"], refused
        assert "not INT64 values" in refused["an integer below INT64"], refused  # no integer type of numpy holds it
        assert "it takes true or false" in refused["binary_data 'yes'"], refused
        assert "'parameters' must be an object" in refused["an input's parameters a list"], refused
    # Data given twice over gRPC, raw and typed: both stacks refuse it (Triton in its own words).
    import grpc
    from tritonclient.grpc import service_pb2

    request = service_pb2.ModelInferRequest(model_name="conv")
    tensor = request.inputs.add(name="input", datatype="FP32", shape=list(good.shape))
    tensor.contents.fp32_contents.extend(good.ravel().tolist())
    request.raw_input_contents.append(good.tobytes())
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc}") as channel:
        call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer", lambda m: m.SerializeToString(),
                                   lambda b: b)
        with pytest.raises(grpc.RpcError) as caught:
            call(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in caught.value.details()
    assert server.process.poll() is None


def send_raw(port, request: bytes):
    """Send `request` as bytes on a fresh connection (what http.client will not send); return (status, the reply's JSON)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(request)
        response = http.client.HTTPResponse(connection)
        response.begin()
        data = response.read()
    return response.status, json.loads(data or b"{}")


def misframed(rng):
    """Yield (what, the request's bytes, the status it must get) of requests that say where they end, what they
    are or where they go in a way a server may not take, or take otherwise than a proxy in front of it (request
    smuggling), drawn from `rng`: lengths other than digits or given twice, URLs no URL holds, methods an endpoint
    has not, binary data longer than its inputs say."""
    body = request_json()
    size = len(body)

    def infer(head: bytes, payload: bytes = body, target: bytes = b"/v2/models/conv/infer", method: bytes = b"POST"):
        return b"%s %s HTTP/1.1\r\nHost: t\r\n%s\r\n%s" % (method, target, head, payload)

    other = int(rng.integers(1, size))
    yield "two lengths that differ", infer(b"Content-Length: %d\r\nContent-Length: %d\r\n" % (size, other)), 400
    for text in (b"+%d" % size, b"%d_%d" % divmod(size, 10), b"0x%x" % size, b"-%d" % other, b"%d %d" % divmod(size, 10)):
        yield f"Content-Length {text!r}", infer(b"Content-Length: %s\r\n" % text), 400
    yield "a header length with a sign", infer(b"Content-Length: %d\r\nInference-Header-Content-Length: +%d\r\n" % (size, size)), 400
    for character in (b"\x00", b"\x1b", bytes([int(rng.integers(0x80, 0x100))])):
        yield f"a URL holding {character!r}", b"GET /v2/models/co%snv HTTP/1.1\r\nHost: t\r\n\r\n" % character, 400
    for method, target in ((b"PUT", b"/v2/models/conv/infer"), (b"DELETE", b"/v2/models/conv"), (b"PUT", b"/v2/models/conv/config")):
        yield f"{method.decode()} {target.decode()}", infer(b"Content-Length: %d\r\n" % size, target=target, method=method), 405
    header = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 16, 16], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 3072}}]}).encode()
    extra = rng.bytes(int(rng.integers(1, 4096)))
    binary = header + np.zeros(768, np.float32).tobytes() + extra
    yield "bytes after the binary data", infer(b"Content-Length: %d\r\nInference-Header-Content-Length: %d\r\n"
                                               % (len(binary), len(header)), binary), 400


def test_a_request_framed_two_ways_is_refused_and_an_absolute_url_answered(served):
    server, root = served
    rng = np.random.default_rng(29)
    _good, expected, body = good_request(root, rng)
    refused = {}
    for _round in range(2):
        for what, request, status in misframed(rng):
            got, reply = send_raw(server.http, request)
            message = reply.get("error", "")
            assert got == status and message and "\n" not in message and "Traceback" not in message, (what, got, reply)
            refused.setdefault(what, message)
            # The absolute form of the URL (RFC 9112 3.2.2: a server must take it) reaches the same model, checked
            # as any request is: on the Triton stack it went around the front's checks to Triton, and a shape of
            # 10^12 elements stopped Triton.
            got, reply = send_raw(server.http, b"POST http://t/v2/models/conv/infer HTTP/1.1\r\nHost: t\r\n"
                                               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            assert got == 200, (what, reply)
            np.testing.assert_allclose(np.asarray(reply["outputs"][0]["data"], np.float32).reshape(1, 16), expected,
                                       rtol=1e-4, atol=1e-5)
    assert "differ; send one" in refused["two lengths that differ"], refused
    lengths = [m for w, m in refused.items() if w.startswith(("Content-Length", "a header length"))]
    assert len(lengths) >= 6 and all("is not a number of bytes" in m for m in lengths), refused
    assert "percent-encode" in refused["a URL holding b'\\x00'"], refused
    huge = request_json(shape=(1, 3, 16, 10**12), data=[1.0])
    got, reply = send_raw(server.http, b"POST http://t/v2/models/conv/infer HTTP/1.1\r\nHost: t\r\n"
                                       b"Content-Length: %d\r\n\r\n%s" % (len(huge), huge))
    assert got == 400 and "takes [-1,3,16,16]" in reply["error"], reply
    assert send_raw(server.http, b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body))[0] == 200
    assert server.process.poll() is None


def held_connections(port, rng, count):
    """Open `count` connections that each stop partway, drawn from `rng`: nothing sent, a request line or headers
    cut short, a body that never ends (the slow clients of slowloris, each stopped rather than trickling)."""
    body = request_json()
    head = b"POST /v2/models/conv/infer HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(body)
    parts = [b"", head[: int(rng.integers(1, 20))], head[: int(rng.integers(20, len(head) - 4))],
             head + body[: int(rng.integers(1, len(body)))]]
    held = []
    for _ in range(count):
        connection = socket.create_connection(("127.0.0.1", port), timeout=30)
        connection.sendall(parts[int(rng.integers(len(parts)))])
        held.append(connection)
    return held


def test_clients_holding_every_connection_or_worker_do_not_keep_others_out(served):
    from trtpipe.serve.guard import MAX_CONNECTIONS

    server, root = served
    rng = np.random.default_rng(28)
    good, expected, body = good_request(root, rng)
    held = held_connections(server.http, rng, MAX_CONNECTIONS + 16)
    try:
        for _ in range(4):  # each good client closes the connection that has waited longest, and is answered
            began = time.monotonic()
            status, reply = post(server.http, "/v2/models/conv/infer", body)
            assert status == 200 and time.monotonic() - began < 5, (status, reply)
            np.testing.assert_allclose(np.asarray(reply["outputs"][0]["data"], np.float32).reshape(1, 16), expected,
                                       rtol=1e-4, atol=1e-5)
        time.sleep(0.5)
        readable = select.select(held, [], [], 0)[0]
        # One held connection closed for each held past the limit and for the first good client (the later
        # ones took the slot the one before let go).
        closed = sum(c.recv(1 << 16) == b"" for c in readable)
        assert closed >= 16 + 1, closed
    finally:
        for connection in held:
            connection.close()
    import grpc

    from trtpipe.serve.grpc_guard import WORKERS

    never = threading.Event()

    def nothing():
        never.wait(60)
        yield from ()

    with grpc.insecure_channel(f"127.0.0.1:{server.grpc}") as channel:  # calls that send no message, and streams
        infer = channel.stream_unary("/inference.GRPCInferenceService/ModelInfer", lambda b: b, lambda b: b)
        stream = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer", lambda b: b, lambda b: b)
        calls = [infer.future(nothing()) if rng.integers(2) else stream(nothing()) for _ in range(WORKERS + 8)]
        try:
            time.sleep(1)
            began = time.monotonic()
            np.testing.assert_allclose(grpc_infer(server.grpc, "conv", "input", "FP32", good.shape, good), expected,
                                       rtol=1e-4, atol=1e-5)
            assert time.monotonic() - began < 5
        finally:
            never.set()
            for call in calls:
                call.cancel()
    assert server.process.poll() is None


def grpc_infer(port, model, name, datatype, shape, data=None):
    """Send one input of `shape` whose bytes are `data` (default: one sample's worth of ones, whatever `shape` says)."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        data = np.ones((1, 3, 16, 16), np.float32) if data is None else data
        tensor = grpcclient.InferInput(name, list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        tensor._input.datatype = datatype  # as a client that lies about them would send
        tensor.set_shape(list(shape))
        return client.infer(model, [tensor], client_timeout=30).as_numpy("logits")
    finally:
        client.close()


def test_one_bad_request_in_a_batch_fails_alone(served):
    import tritonclient.grpc as grpcclient

    server, _root = served
    indices = [[i % 5] for i in range(MAX_BATCH - 1)] + [[9]]  # the last one is out of the table's 5 rows
    answers, errors = [None] * len(indices), [None] * len(indices)
    start = threading.Barrier(len(indices))

    def send(k):
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc}")
        try:
            tensor = grpcclient.InferInput("index", [1, 1], "INT64")
            tensor.set_data_from_numpy(np.array([indices[k]], np.int64))
            start.wait()
            answers[k] = client.infer("lookup", [tensor]).as_numpy("rows")
        except Exception as exc:  # noqa: BLE001 - the bad one's error is checked below
            errors[k] = str(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=send, args=(k,)) for k in range(len(indices))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors[:-1] == [None] * (len(indices) - 1), errors
    assert [a[0, 0, 0] for a in answers[:-1]] == [3.0 * (k % 5) for k in range(len(indices) - 1)]
    assert "indices element out of data bounds, idx=9" in errors[-1] and "Traceback" not in errors[-1]
    from test_serve_server import metric_counts

    counts = metric_counts(server.metrics, "lookup", len(indices))
    assert counts["nv_inference_exec_count"] < counts["nv_inference_count"], counts  # they were batched together
