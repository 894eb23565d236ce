"""The pure pieces of serving: names, batch limits from sidecars, levels, percentiles, URLs, LD_LIBRARY_PATH."""

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
               "engine_sha256": "0" * 64, "tensors": tensors}
    (tmp_path / f"{engine.name}.json").write_text(json.dumps(sidecar))
    model = describe_engine(engine)
    assert model.name == "two_fp16" and model.max_batch == 16 and model.engines == {"8.9": engine}
    assert [model.dims(s) for s in model.inputs] == [(4,), (7,)]
    assert describe_engine(engine, max_batch=8).max_batch == 8
    with pytest.raises(TrtpipeError, match=r"--max-batch 17: two.fp16.sm89.engine takes at most 16"):
        describe_engine(engine, max_batch=17)


def test_levels_percentiles_and_urls():
    assert parse_levels("1,4,16,64") == (1, 4, 16, 64)
    for bad in ("", "0", "1,x", "-2"):
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
