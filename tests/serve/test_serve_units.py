"""The pure pieces of serving: names, batch limits from sidecars, levels, percentiles, URLs, LD_LIBRARY_PATH."""

import hashlib
import json

import numpy as np
import pytest

from trtpipe.errors import TrtpipeError
from trtpipe.serve.environment import library_path
from trtpipe.serve.loadtest import parse_levels, percentiles, split_url
from trtpipe.serve.models import describe_engine, model_name


def test_model_names_drop_the_suffix_and_the_target():
    assert model_name("build/digits/digits.int8.sm89.engine") == "digits_int8"
    assert model_name("digits.onnx") == "digits"
    assert model_name("efficientnet-lite0.fp16.onnx") == "efficientnet-lite0_fp16"


def test_engine_batch_limit_is_the_smallest_profile_maximum(tmp_path):
    engine = tmp_path / "two.fp16.sm89.engine"
    engine.write_bytes(b"plan")
    tensors = [{"name": "a", "mode": "input", "dtype": "float32", "shape": [-1, 4], "profile": [[1, 4], [8, 4], [32, 4]]},
               {"name": "b", "mode": "input", "dtype": "int64", "shape": [-1, 7], "profile": [[1, 7], [4, 7], [16, 7]]},
               {"name": "y", "mode": "output", "dtype": "float32", "shape": [-1, 2], "profile": None}]
    sidecar = {"engine": engine.name, "backend": "tensorrt-rtx", "backend_version": "1.7", "target": "sm89",
               "compute_capability": "8.9", "precision": "fp16", "onnx": "two.onnx", "onnx_sha256": "0" * 64,
               "engine_sha256": hashlib.sha256(b"plan").hexdigest(), "tensors": tensors}
    (tmp_path / f"{engine.name}.json").write_text(json.dumps(sidecar))
    model = describe_engine(engine)
    assert model.name == "two_fp16" and model.max_batch == 16 and model.engines == {"8.9": engine}
    assert [model.dims(s) for s in model.inputs] == [(4,), (7,)]
    assert describe_engine(engine, max_batch=8).max_batch == 8
    with pytest.raises(TrtpipeError, match=r"--max-batch 17: two.fp16.sm89.engine takes at most 16"):
        describe_engine(engine, max_batch=17)
    engine.write_bytes(b"pla")  # not the file the sidecar describes
    with pytest.raises(TrtpipeError, match="does not match its sidecar's sha256"):
        describe_engine(engine)


def test_levels_percentiles_and_urls():
    assert parse_levels("1,4,16,64") == (1, 4, 16, 64) and parse_levels("1024") == (1024,)
    for bad in ("", "0", "1,x", "-2", "4,1025", "10000000"):
        with pytest.raises(TrtpipeError, match="--concurrency"):
            parse_levels(bad)
    p50, p90, p99 = percentiles([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert (p50, p90) == pytest.approx((50.5, 90.1)) and p99 == pytest.approx(99.01)
    assert all(np.isnan(percentiles([])))
    assert split_url("grpc://h:8001/", None) == ("grpc", "h:8001")
    assert split_url("h:8000", None) == ("http", "h:8000") and split_url("h:8001", "grpc") == ("grpc", "h:8001")
    with pytest.raises(TrtpipeError, match="--protocol http: the URL says grpc"):
        split_url("grpc://h:8001", "http")


def test_library_path_puts_the_interpreters_libdir_first_once():
    assert library_path(None, "/py/lib") == "/py/lib"
    assert library_path("/a:/py/lib:/b", "/py/lib") == "/py/lib:/a:/b"
    assert library_path("/a", None) == "/a"


def test_triton_log_cause_names_the_model_and_the_python_exception_behind_it():
    from trtpipe.serve.triton_log import cause

    # As Triton 2.51 logged the ml_dtypes 0.7 break (paths shortened).
    lines = [
        'E1201 23:18:01.816474 8563 server.cc:241] "CudaDriverHelper has not been initialized."',
        'I1201 23:18:01.817995 8563 model_lifecycle.cc:472] "loading: conv:1"',
        ("RuntimeError: module was compiled against NumPy C-API version 0x12 (NumPy 2.0) but the running NumPy has C-API "
         "version 0x11."),
        ('E1201 23:18:03.481585 8563 model_lifecycle.cc:642] "failed to load \'conv\' version 1: Internal: SystemError: '
         '<built-in function __import__> returned a result with an exception set\\n\\nAt:\\n  ml_dtypes/_finfo.py(19)"'),
        "error: creating server: Internal - failed to load all models",
    ]
    log = "\n".join(lines)
    assert cause(log) == ("model 'conv' did not load: SystemError: <built-in function __import__> returned a result with "
                          "an exception set (RuntimeError: module was compiled against NumPy C-API version 0x12 (NumPy 2.0) "
                          "but the running NumPy has C-API version 0x11.)")
    assert cause(log.splitlines()[0]) is None  # CPU-only start-up noise is not a cause
    assert cause('E1201 23:18:01.8 1 server.cc:9] "failed to bind 127.0.0.1:8000"') == "failed to bind 127.0.0.1:8000"


def test_model_names_are_one_safe_directory():
    from trtpipe.serve.models import check_model_name

    assert model_name("a b/../x.y.onnx") == "x_y" and model_name("-q.onnx") == "q"
    with pytest.raises(TrtpipeError, match=r"\.\.\.\.onnx: its file name makes no model name; pass --name"):
        model_name("....onnx")
    assert check_model_name("digits_int8-2") == "digits_int8-2"
    for bad in ("../escaped", "a/b", "a\\b", 'a"b', "", "..", "-x", "x" * 201):
        with pytest.raises(TrtpipeError, match="--name .*a model name is letters, digits"):
            check_model_name(bad)


def test_request_limits_come_from_the_model():
    from trtpipe.serve.limits import DEFAULT_MAX_REQUEST_BYTES, request_limits

    limits = request_limits("m", [("x", "float32", (-1, 3, -1)), ("k", "int64", (-1,))], 8, {"x": (32, 3, 100)})
    assert limits.max_bytes == 8 * 3 * 100 * 4 + 8 * 8  # the batch limit, not the profile's 32, bounds dimension 0
    assert limits.problem({"x": [8, 3, 100], "k": [8]}) is None
    assert limits.problem({"k": [8, 1]}) is None  # [N] as a client sends it through the config's reshape
    assert "more than 8 (the batch limit)" in limits.problem({"k": [9, 1]}) and "has 2 dimensions" in limits.problem({"k": [8, 2]})
    assert limits.problem({"x": [8, 3, 100]}, {"x": "FP32"}) is None
    assert "dimension 0 is 9, more than 8 (the batch limit)" in limits.problem({"x": [9, 3, 1]})
    assert "dimension 2 is 101, more than 100 (the model's maximum)" in limits.problem({"x": [1, 3, 101]})
    assert "takes [-1,3,-1]" in limits.problem({"x": [1, 4, 1]})
    assert "has 2 dimensions" in limits.problem({"x": [1, 3]})
    assert "dimension 1 is -3" in limits.problem({"x": [1, -3, 1]}) and "dimension 0 is 0" in limits.problem({"k": [0]})
    assert "unknown input 'y'" in limits.problem({"y": [1]})
    assert "is FP64, model 'm' takes FP32" in limits.problem({"x": [1, 3, 1]}, {"x": "FP64"})
    assert "list of integers" in limits.problem({"x": [1, 3, 1.5]})
    unbounded = request_limits("u", [("x", "float32", (-1, -1))], 4)
    assert unbounded.max_bytes == DEFAULT_MAX_REQUEST_BYTES
    assert "more than 67108864 bytes" in unbounded.problem({"x": [4, 10**9]})
    assert type(limits).from_json(limits.to_json()) == limits


def test_error_replies_are_one_line_without_server_paths():
    from trtpipe.serve.limits import reply_error

    error = RuntimeError("/home/me/models/net.onnx: failed in /opt/x/y.py line 3\nTraceback (most recent call last):\n  ...")
    assert reply_error(error) == "net.onnx: failed in y.py line 3"
    assert reply_error(ValueError("")) == "ValueError"


def test_a_failed_batch_answers_each_request_alone(tmp_path):
    import models
    from trtpipe.runtime import OnnxRunner
    from trtpipe.serve.batches import run_requests
    from trtpipe.serve.limits import request_limits

    models.save(models.lookup(rows=5), tmp_path / "lookup.onnx")
    limits = request_limits("lookup", [("index", "int64", (-1, 1))], 8)
    feeds = [{"index": np.array(ix, np.int64).reshape(-1, 1)} for ix in ([1, 2], [9], [4], [0] * 9)]
    with OnnxRunner(tmp_path / "lookup.onnx") as runner:
        results = run_requests(runner, feeds, limits, batching=True)
        assert [r["rows"][:, 0, 0].tolist() for r in results[:3:2]] == [[3.0, 6.0], [12.0]]
        assert "indices element out of data bounds, idx=9" in results[1] and "\n" not in results[1]
        assert "dimension 0 is 9, more than 8 (the batch limit)" in results[3]
        good = run_requests(runner, feeds[:1] + feeds[2:3], limits, batching=True)  # one batched run
        assert [r["rows"][:, 0, 0].tolist() for r in good] == [[3.0, 6.0], [12.0]]


def test_config_pbtxt_escapes_names_and_refuses_types_before_writing(tmp_path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    from trtpipe.runtime.runner import IOSpec
    from trtpipe.serve.models import ServedModel
    from trtpipe.serve.repository import RepositoryOptions, config_text

    odd = 'in"put\\é\n'
    model = ServedModel("m", tmp_path / "m.onnx", "onnx", "fp32", False, 4, (IOSpec(odd, "float32", (-1, 2)),),
                        (IOSpec("y", "float32", (-1, 2)),))
    config = text_format.Parse(config_text(model, "python", RepositoryOptions(), {"onnx": "model.onnx"}),
                               model_config_pb2.ModelConfig())
    assert config.input[0].name == odd and config.max_batch_size == 4
    assert '"in\\"put' in config.parameters["trtpipe.limits"].string_value
    wide = ServedModel("w", tmp_path / "w.onnx", "onnx", "fp32", False, 4, (IOSpec("x", "uint16", (-1, 2)),), ())
    with pytest.raises(TrtpipeError, match="tensor 'x' is uint16, which this repository cannot serve"):
        config_text(wide, "python", RepositoryOptions(), {"onnx": "model.onnx"})


def test_the_direct_batcher_runs_what_queued_while_the_runner_was_busy_as_one_batch(tmp_path):
    import threading

    import models
    from trtpipe.runtime import OnnxRunner
    from trtpipe.serve.direct import Batcher
    from trtpipe.serve.guard import Refused
    from trtpipe.serve.models import describe_runner

    models.save(models.lookup(rows=5), tmp_path / "lookup.onnx")
    runner = OnnxRunner(tmp_path / "lookup.onnx")
    calls, first_running, release = [], threading.Event(), threading.Event()

    def gated(feeds):  # the first call holds the only runner until the other requests are queued
        calls.append(len(feeds["index"]))
        if len(calls) == 1:
            first_running.set()
            release.wait(30)
        return runner(feeds)

    batcher = Batcher(describe_runner(tmp_path / "lookup.onnx", runner, max_batch=8), [gated], max_queue_delay_us=0)
    rows = [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0]  # the first alone, then ten queued: a batch of 8 and one of 2
    answers = [None] * len(rows)

    def send(k):
        answers[k] = batcher.infer({"index": np.array([[rows[k]]], np.int64)})["rows"][0, 0, 0]

    threads = [threading.Thread(target=send, args=(0,))]
    threads[0].start()
    assert first_running.wait(30)
    threads += [threading.Thread(target=send, args=(k,)) for k in range(1, len(rows))]
    for thread in threads[1:]:
        thread.start()
    while batcher.pending < len(rows) - 1:
        threading.Event().wait(0.01)
    release.set()
    for thread in threads:
        thread.join(30)
    assert answers == [3.0 * r for r in rows]
    assert calls == [1, 8, 2] and batcher.counts.executions == 3 and batcher.counts.inferences == len(rows)
    with pytest.raises(Refused, match="idx=9"):  # a bad request alone fails alone, and the batcher keeps serving
        batcher.infer({"index": np.array([[9]], np.int64)})
    assert batcher.infer({"index": np.array([[2]], np.int64)})["rows"][0, 0, 0] == 6.0
    runner.close()


def test_the_direct_batcher_gives_a_lone_request_the_wide_runner_and_a_busy_queue_the_narrow_ones(tmp_path):
    """The default for ONNX on the direct stack: a request that finds every runner idle and nothing behind it
    runs on the runner of every core; once one runner is busy, the others run what queues, one thread each."""
    import threading

    import models
    from trtpipe.runtime import OnnxRunner
    from trtpipe.serve.direct import Batcher
    from trtpipe.serve.models import describe_runner

    models.save(models.lookup(rows=5), tmp_path / "lookup.onnx")
    runner = OnnxRunner(tmp_path / "lookup.onnx")
    ran, first_running, release = [], threading.Event(), threading.Event()

    def labelled(label):
        def run(feeds):
            ran.append((label, len(feeds["index"])))
            if label == "narrow-1" and not release.is_set():  # holds one narrow runner until the rest is queued
                first_running.set()
                release.wait(30)
            return runner(feeds)
        return run

    batcher = Batcher(describe_runner(tmp_path / "lookup.onnx", runner, max_batch=8),
                      [labelled("narrow-0"), labelled("narrow-1")], max_queue_delay_us=0, lone=labelled("wide"))

    def send(row):
        return batcher.infer({"index": np.array([[row]], np.int64)})["rows"][0, 0, 0]

    assert send(2) == 6.0 and ran == [("wide", 1)]  # alone: every core
    ran.clear()
    with batcher.cond:  # the wide runner taken, as by a lone request still running: a narrow one runs the next
        batcher.lone_busy = True
    held = threading.Thread(target=send, args=(1,))
    held.start()
    assert first_running.wait(30)
    with batcher.cond:
        batcher.lone_busy = False
    assert send(3) == 9.0  # one runner busy: the other narrow one, not the wide one
    release.set()
    held.join(30)
    assert ran == [("narrow-1", 1), ("narrow-0", 1)]
    assert batcher.wait_idle(5)
    runner.close()
