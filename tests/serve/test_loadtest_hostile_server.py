"""`trtpipe loadtest` against a server that is not what the URL promised: its answers are input too. Metadata
of any other shape is one line naming the URL, exit 2, and no traceback; a config it cannot read names no file
to check against, and the load test runs."""

import http.server
import json
import threading

import numpy as np
import pytest

pytest.importorskip("tritonclient.http", reason="the serve extra (tritonclient) is not installed")

GOOD_META = {"name": "m", "versions": ["1"], "platform": "onnxruntime_onnx",
             "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}],
             "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 8]}]}
GOOD_ANSWER = {"model_name": "m", "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 8], "data": [0.5] * 8}]}
INPUT = GOOD_META["inputs"][0]

# Metadata a server may answer that no KServe v2 server sends, by what is wrong with it.
WRONG_METADATA = {
    "a list": [GOOD_META],
    "a string": "m",
    "inputs a string": {**GOOD_META, "inputs": "x"},
    "no inputs": {**GOOD_META, "inputs": []},
    "inputs of numbers": {**GOOD_META, "inputs": [1, 2]},
    "an input without a name": {**GOOD_META, "inputs": [{"datatype": "FP32", "shape": [-1, 16]}]},
    "a shape of words": {**GOOD_META, "inputs": [{**INPUT, "shape": ["batch", "x"]}]},
    "a shape that is a number": {**GOOD_META, "inputs": [{**INPUT, "shape": 16}]},
    "a shape of fractions": {**GOOD_META, "inputs": [{**INPUT, "shape": [1.5, 16]}]},
    "a dimension past int64": {**GOOD_META, "inputs": [{**INPUT, "shape": [10**30, 16]}]},
    "an unknown datatype": {**GOOD_META, "inputs": [{**INPUT, "datatype": "FP99"}]},
    "no datatype": {**GOOD_META, "inputs": [{"name": "x", "shape": [-1, 16]}]},
    "outputs an object": {**GOOD_META, "outputs": {"name": "y"}},
}


def serving(metadata, config=None):
    """Start an HTTP server answering `metadata`, `config` and good answers; return it (its port is server_port)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, value):
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self.reply(config if self.path.endswith("/config") else metadata)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.reply(GOOD_ANSWER)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def samples(tmp_path):
    for i in range(2):
        np.save(tmp_path / f"{i}.npy", np.full((1, 16), i, np.float32))
    return tmp_path


def loadtest_against(cli, samples, metadata, config=None):
    """Run `trtpipe loadtest` on a server answering `metadata` and `config`; return (exit code, stdout, stderr, port)."""
    server = serving(metadata, config)
    try:
        return (*cli("loadtest", f"http://127.0.0.1:{server.server_port}", "--model", "m", "--data", samples,
                     "--concurrency", "1", "--duration-s", "0.2"), server.server_port)
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("what", sorted(WRONG_METADATA))
def test_metadata_no_kserve_server_sends_is_one_line(cli, samples, what):
    code, _out, err, port = loadtest_against(cli, samples, WRONG_METADATA[what])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (what, err)
    assert f"127.0.0.1:{port}: model 'm' has metadata no KServe v2 server sends" in err, err


@pytest.mark.parametrize("config", [[1, 2], "x", {"config": {"parameters": ["trtpipe.file"]}},
                                    {"parameters": {"trtpipe.file": "not an object"}}])
def test_a_config_it_cannot_read_names_no_file_and_the_load_runs(cli, samples, config):
    code, out, err, _port = loadtest_against(cli, samples, GOOD_META, config)
    assert code == 0 and "answers not checked (no file here)" in out and "errors" in out, (config, out, err)
