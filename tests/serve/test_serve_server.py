"""`trtpipe serve` for real: one Triton (through PyTriton) on free 127.0.0.1 ports for this module,
serving a conv net (FP32, ONNX Runtime) and its typed FP16 ONNX (simulated), answering HTTP and gRPC
concurrently, refusing bad requests while it keeps serving, and the load test against it."""

import json
import threading
import urllib.error
import urllib.request

import numpy as np
import pytest
from serve_helpers import STACKS, needs_pytriton
from serve_process import start_server

import models
from trtpipe.graph import onnxio
from trtpipe.graph.typed import typed_model
from trtpipe.runtime import OnnxRunner
from trtpipe.targets import Precision

pytestmark = needs_pytriton()
MAX_BATCH = 8


@pytest.fixture(scope="module", params=STACKS)
def served(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("serve")
    model = models.conv_net(batch="N")
    models.save(model, root / "conv.onnx")
    onnxio.save(typed_model(model, Precision.FP16, None), root / "conv.fp16.onnx")
    models.save(models.conv_net(batch=1, seed=4), root / "fixed.onnx")  # a fixed first dimension: no batching
    server = start_server([root / "conv.onnx", root / "conv.fp16.onnx", root / "fixed.onnx", "--max-batch", MAX_BATCH,
                           "--max-queue-delay-us", 2000, "--stack", request.param], root / "serve.log")
    yield server, root
    assert server.terminate() == 0, server.output[-2000:]


def http_json(port, path, body=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode() if body else None)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def infer_http(port, model, array, name="input"):
    dtype = {np.float32: "FP32", np.float64: "FP64"}[array.dtype.type]
    body = {"inputs": [{"name": name, "shape": list(array.shape), "datatype": dtype, "data": array.ravel().tolist()}]}
    return http_json(port, f"/v2/models/{model}/infer", body)


def infer_grpc(port, model, array):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        tensor = grpcclient.InferInput("input", list(array.shape), "FP32")
        tensor.set_data_from_numpy(array)
        return client.infer(model, [tensor]).as_numpy("logits")
    finally:
        client.close()


def test_health_metrics_and_simulated_metadata(served):
    server, _ = served
    assert http_json(server.http, "/v2/health/ready")[0] == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics}/metrics", timeout=30) as response:
        assert b"nv_inference_request_success" in response.read()
    parameters = {}
    for name in ("conv", "conv_fp16"):
        status, config = http_json(server.http, f"/v2/models/{name}/config")
        assert status == 200 and config["max_batch_size"] == MAX_BATCH
        assert config["input"][0]["dims"] == ["3", "16", "16"] or config["input"][0]["dims"] == [3, 16, 16]
        parameters[name] = {k: v["string_value"] for k, v in config["parameters"].items()}
    assert parameters["conv"]["trtpipe.simulated"] == "false" and parameters["conv"]["trtpipe.precision"] == "fp32"
    assert parameters["conv_fp16"]["trtpipe.simulated"] == "true" and parameters["conv_fp16"]["trtpipe.precision"] == "fp16"


def test_a_model_with_a_fixed_batch_is_served_without_batching(served):
    server, root = served
    status, config = http_json(server.http, "/v2/models/fixed/config")
    assert status == 200 and config.get("max_batch_size", 0) == 0
    sample = np.random.default_rng(1).random((1, 3, 16, 16), dtype=np.float32)
    with OnnxRunner(root / "fixed.onnx") as runner:
        np.testing.assert_allclose(infer_grpc(server.grpc, "fixed", sample), runner({"input": sample})["logits"],
                                   rtol=1e-4, atol=1e-5)


def test_concurrent_http_and_grpc_requests_are_answered_right(served):
    server, root = served
    rng = np.random.default_rng(3)
    samples = [rng.random((int(rng.integers(1, 4)), 3, 16, 16), dtype=np.float32) for _ in range(48)]
    with OnnxRunner(root / "conv.onnx") as runner:
        expected = [runner({"input": s})["logits"] for s in samples]
    got = [None] * len(samples)
    failures = []

    def client(indices):
        for i in indices:
            try:
                if i % 2:
                    got[i] = infer_grpc(server.grpc, "conv", samples[i])
                else:
                    status, body = infer_http(server.http, "conv", samples[i])
                    assert status == 200, body
                    got[i] = np.asarray(body["outputs"][0]["data"], np.float32).reshape(body["outputs"][0]["shape"])
            except Exception as exc:  # noqa: BLE001 - collected and shown below
                failures.append(repr(exc))

    threads = [threading.Thread(target=client, args=(range(k, len(samples), 16),)) for k in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures[:3]
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g is not None and g.shape == e.shape, i
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    # Triton's dynamic batcher ran fewer executions than requests: concurrent requests were batched.
    counts = metric_counts(server.metrics, "conv", len(samples))
    assert counts["nv_inference_exec_count"] < counts["nv_inference_count"], counts


def metric_counts(port, model, requests: int = 0) -> dict[str, float]:
    """Return Triton's Prometheus counters of `model` (the statistics API is restricted by PyTriton) once `requests`
    requests are counted, succeeded or failed: it updates them every 2 s (a read at once found all of them 0)."""
    import time

    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
            lines = response.read().decode().splitlines()
        counts = {line.split("{")[0]: float(line.rsplit(" ", 1)[1]) for line in lines
                  if line.startswith("nv_inference") and f'model="{model}"' in line}
        counted = counts.get("nv_inference_request_success", 0) + counts.get("nv_inference_request_failure", 0)
        if counted >= requests:
            return counts
        assert time.monotonic() < deadline, counts
        time.sleep(0.5)


def test_bad_requests_get_clear_errors_and_the_server_keeps_serving(served):
    server, _ = served
    good = np.ones((1, 3, 16, 16), np.float32)
    status, body = infer_http(server.http, "conv", np.ones((1, 3, 8, 8), np.float32))
    assert status == 400 and "shape" in body["error"] and "[-1,3,16,16]" in body["error"].replace(" ", "")
    status, body = infer_http(server.http, "conv", good.astype(np.float64))
    assert status == 400 and "FP64" in body["error"] and "FP32" in body["error"]
    status, body = infer_http(server.http, "no_such_model", good)
    assert status == 404 and "unknown model" in body["error"]
    status, body = infer_http(server.http, "conv", np.ones((MAX_BATCH + 1, 3, 16, 16), np.float32))
    assert status == 400 and f"dimension 0 is {MAX_BATCH + 1}, more than {MAX_BATCH} (the batch limit)" in body["error"]
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    with pytest.raises(InferenceServerException, match=r"INVALID_ARGUMENT.*takes \[-1,3,16,16\]"):  # gRPC's front
        infer_grpc(server.grpc, "conv", np.ones((1, 3, 8, 8), np.float32))
    with pytest.raises(InferenceServerException, match="unknown model"):
        infer_grpc(server.grpc, "no_such_model", good)
    assert grpcclient  # imported for the exception's module
    status, body = infer_http(server.http, "conv", good)
    assert status == 200 and body["outputs"][0]["shape"] == [1, 16]
    assert infer_grpc(server.grpc, "conv_fp16", good).shape == (1, 16)


def test_loadtest_checks_every_answer_and_plots(served, cli, tmp_path):
    server, _root = served
    data = tmp_path / "data"
    models.save_batches(data, np.random.default_rng(5).random((32, 3, 16, 16), dtype=np.float32))
    code, out, err = cli("loadtest", f"grpc://127.0.0.1:{server.grpc}", "--model", "conv_fp16", "--data", data,
                         "--concurrency", "1,4", "--duration-s", "1", "--plot", tmp_path / "load.png", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["checked_against"].endswith("conv.fp16.onnx")  # the file the server names, run here
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 4]
    for level in report["levels"]:
        assert level["requests"] > 0 and level["errors"] == 0 and level["wrong"] == 0
        assert level["p50_ms"] <= level["p99_ms"]
    assert (tmp_path / "load.png").read_bytes()[:4] == b"\x89PNG"
    code, out, err = cli("loadtest", f"http://127.0.0.1:{server.http}", "--model", "conv", "--data", data,
                         "--concurrency", "2", "--duration-s", "0.5")
    assert code == 0, err
    row = out.splitlines()[-1].split()
    assert "checked against" in out and row[0] == "2" and int(row[5]) > 0 and row[6:] == ["0", "0"]  # errors, wrong
