"""Stopping `trtpipe serve`: SIGTERM with requests in flight answers every one of them before it exits,
and an idle kept-alive HTTP client does not hold it up;
a second server on a taken port fails at once with one line. One server for this module, whose dynamic
batcher holds requests for 1.5 s, so that they are surely in flight when the signal lands."""

import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest
from serve_helpers import STACKS, needs_pytriton
from serve_process import start_server

import models
from trtpipe.runtime import OnnxRunner

pytestmark = needs_pytriton()
IN_FLIGHT = 8


@pytest.fixture(scope="module", params=STACKS)
def served(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("shutdown")
    models.save(models.conv_net(batch="N"), root / "conv.onnx")
    server = start_server([root / "conv.onnx", "--max-batch", 32, "--max-queue-delay-us", 1_500_000, "--stack", request.param], root / "serve.log")
    yield server, root
    server.kill_group()


def pending(port) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("nv_inference_pending_request_count") and 'model="conv"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_second_server_on_a_taken_port_fails_with_one_line(served):
    server, root = served
    result = subprocess.run([sys.executable, "-m", "trtpipe.cli", "serve", root / "conv.onnx", "--host", "127.0.0.1",
                             "--http-port", str(server.http)], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "Traceback" not in result.stderr
    assert f"--http-port {server.http}: 127.0.0.1:{server.http} is taken" in result.stderr


def test_sigterm_answers_every_request_in_flight(served):
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    server, root = served
    samples = [np.random.default_rng(i).random((1, 3, 16, 16), dtype=np.float32) for i in range(IN_FLIGHT)]
    with OnnxRunner(root / "conv.onnx") as runner:
        expected = [runner({"input": s})["logits"] for s in samples]
    got, failures = [None] * IN_FLIGHT, []

    def send(i):
        module, port = (grpcclient, server.grpc) if i % 2 else (httpclient, server.http)
        client = module.InferenceServerClient(f"127.0.0.1:{port}", **({} if i % 2 else {"network_timeout": 120.0}))
        try:
            tensor = module.InferInput("input", [1, 3, 16, 16], "FP32")
            tensor.set_data_from_numpy(samples[i])
            got[i] = client.infer("conv", [tensor]).as_numpy("logits")
        except Exception as exc:  # noqa: BLE001 - collected and shown below
            failures.append(repr(exc))
        finally:
            client.close()

    threads = [threading.Thread(target=send, args=(i,)) for i in range(IN_FLIGHT)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while pending(server.metrics) < IN_FLIGHT and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(g is None for g in got), "answered before the signal: the batcher did not hold the requests"
    idle = httpclient.InferenceServerClient(f"127.0.0.1:{server.http}")  # kept alive, idle when the signal lands
    assert idle.is_server_ready()
    began = time.monotonic()
    code = server.terminate()
    # Triton 2.51 waits out its whole 60 s exit timeout while any HTTP connection to it is open;
    # the front closes its own to Triton, so an idle client does not hold the server up.
    assert time.monotonic() - began < 50, "stopping waited for the idle HTTP connection"
    idle.close()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures[:3]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    assert code == 0 and server.output.rstrip().endswith("stopped"), server.output[-2000:]
