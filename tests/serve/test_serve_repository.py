"""`trtpipe triton`: model repositories whose every config.pbtxt Triton's own model_config protobuf
parses; real TensorRT-RTX engines for two GPUs in one model; and an ONNX model's Python-backend
repository served by the real Triton server on this CPU, answering right through trtpipe's runner."""

import contextlib
import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_rtx
from serve_helpers import needs_pytriton
from serve_process import bundled_triton
from test_serve_server import metric_counts

import models
from trtpipe.build import BuildOptions, build
from trtpipe.runtime import OnnxRunner
from trtpipe.runtime.runner import IOSpec
from trtpipe.runtime.sidecar import verify_engine
from trtpipe.serve.models import ServedModel
from trtpipe.serve.repository import RepositoryOptions, config_text
from trtpipe.spec import parse_shapes
from trtpipe.targets import Target

pytestmark = needs_pytriton()
PROFILE = ["input:1x3x16x16/8x3x16x16/32x3x16x16"]


def parse(path):
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    return text_format.Parse(path.read_text() if hasattr(path, "read_text") else path, model_config_pb2.ModelConfig())


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("engines")
    models.save(models.conv_net(batch="N"), root / "conv.onnx")
    built = []
    for sm in ("sm_89", "sm_120"):
        options = BuildOptions(target=Target.parse(sm), backend="tensorrt-rtx", shapes=parse_shapes(PROFILE))
        built += [r.engine for r in build(root / "conv.onnx", root, ["fp16"], options)]
    return root, built


@needs_rtx
def test_rtx_engines_for_two_gpus_make_one_python_backend_model(engines, cli, tmp_path):
    _root, built = engines
    code, _out, err = cli("triton", *built, "-o", tmp_path / "repo", "--instances", 2, "--max-queue-delay-us", 500)
    assert code == 0, err
    config = parse(tmp_path / "repo" / "conv_fp16" / "config.pbtxt")
    assert config.name == "conv_fp16" and config.backend == "python" and config.max_batch_size == 32
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input] == [("input", 11, [3, 16, 16])]  # TYPE_FP32
    assert [(o.name, list(o.dims)) for o in config.output] == [("logits", [16])]
    assert config.instance_group[0].count == 2 and config.instance_group[0].kind == 1  # KIND_GPU
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    files = json.loads(config.parameters["trtpipe.files"].string_value)
    assert files == {"8.9": "model.sm89.plan", "12.0": "model.sm120.plan"}
    for name in files.values():
        plan = tmp_path / "repo" / "conv_fp16" / "1" / name
        verify_engine(plan)  # the copy is the engine its sidecar describes
    assert (tmp_path / "repo" / "conv_fp16" / "1" / "model.py").is_file()


@needs_rtx
def test_max_batch_over_the_profile_is_refused_before_anything_is_written(engines, cli, tmp_path):
    _, built = engines
    code, _out, err = cli("triton", built[0], "-o", tmp_path / "repo", "--max-batch", 64)
    assert code == 2 and err.count("\n") == 1
    assert "--max-batch 64" in err and "at most 32" in err
    assert not (tmp_path / "repo" / "conv_fp16").exists()


@needs_rtx
def test_serving_an_engine_without_a_gpu_names_the_typed_onnx_instead(engines, cli):
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has a GPU: the engine would be served")
    root, built = engines
    code, _out, err = cli("serve", built[0], "--host", "127.0.0.1")
    assert code == 2 and err.count("\n") == 1 and "serve the typed ONNX beside it instead" in err
    code, _out, err = cli("serve", root / "missing.onnx")
    assert code == 2 and "missing.onnx: no such file" in err


def test_tensorrt_engines_pick_a_plan_per_gpu():
    spec = IOSpec("input", "float16", (-1, 3, 16, 16))
    model = ServedModel("conv", Path("conv.fp16.sm90.engine"), "engine", "fp16", False, 16,
                        (spec,), (IOSpec("logits", "float32", (-1, 10)),), "tensorrt 10.13")
    files = {"8.9": "model.sm89.plan", "9.0": "model.sm90.plan"}
    config = parse(config_text(model, "tensorrt", RepositoryOptions(dynamic_batching=False), files))
    assert config.platform == "tensorrt_plan" and config.default_model_filename == "model.sm89.plan"
    assert dict(config.cc_model_filenames) == files
    assert config.input[0].data_type == 10 and list(config.input[0].dims) == [3, 16, 16]  # TYPE_FP16
    assert not config.HasField("dynamic_batching") and "trtpipe.files" not in config.parameters


def test_onnx_repository_runs_in_the_real_triton_server(cli, tmp_path):
    models.save(models.conv_net(batch="N"), tmp_path / "conv.onnx")
    code, _out, err = cli("triton", tmp_path / "conv.onnx", "-o", tmp_path / "repo", "--kind", "cpu", "--max-batch", 8,
                         "--max-queue-delay-us", 1_000_000)
    assert code == 0, err
    config = parse(tmp_path / "repo" / "conv" / "config.pbtxt")
    assert config.instance_group[0].kind == 2 and config.max_batch_size == 8  # KIND_CPU
    samples = [np.random.default_rng(i).random((1 + i % 3, 3, 16, 16), dtype=np.float32) for i in range(6)]
    with triton_of(tmp_path) as (port, metrics):
        got = infer_together(port, "conv", "input", "logits", samples)
        with OnnxRunner(tmp_path / "conv.onnx") as runner:
            for sample, answer in zip(samples, got):
                np.testing.assert_allclose(answer, runner({"input": sample})["logits"], rtol=1e-4, atol=1e-5)
        # model.py ran requests the batcher handed over together as one batch: fewer executions than requests.
        counts = metric_counts(metrics, "conv", len(samples))
        assert counts["nv_inference_exec_count"] < len(samples), counts


def test_a_model_whose_only_axis_is_the_batch_is_reshaped_and_served_batched(cli, tmp_path):
    """[N] in, [N] out: Triton takes no empty dims, so clients send [N, 1] and the model gets [N] back."""
    models.save(models.per_sample(), tmp_path / "score.onnx")
    code, _out, err = cli("triton", tmp_path / "score.onnx", "-o", tmp_path / "repo", "--kind", "cpu", "--max-batch", 8,
                          "--max-queue-delay-us", 1_000_000)
    assert code == 0, err
    config = parse(tmp_path / "repo" / "score" / "config.pbtxt")
    assert config.max_batch_size == 8
    for tensor in (config.input[0], config.output[0]):
        assert list(tensor.dims) == [1] and tensor.HasField("reshape") and list(tensor.reshape.shape) == []
    samples = [np.random.default_rng(i).normal(size=(1 + i % 3, 1)).astype(np.float32) for i in range(4)]
    with triton_of(tmp_path) as (port, metrics):
        got = infer_together(port, "score", "x", "score", samples)
        for sample, answer in zip(samples, got):
            assert answer.shape == sample.shape
            np.testing.assert_allclose(answer, 1 / (1 + np.exp(-(2 * sample + 1))), rtol=1e-5)
        counts = metric_counts(metrics, "score", len(samples))
        assert counts["nv_inference_exec_count"] < len(samples), counts


@contextlib.contextmanager
def triton_of(tmp_path):
    """Yield (HTTP port, metrics port) of the bundled tritonserver on tmp_path/repo, stopped after."""
    process, port, _grpc, metrics = bundled_triton(tmp_path, tmp_path / "repo", tmp_path / "triton.log")
    try:
        yield port, metrics
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Triton and its stubs: the group this test started
        try:
            process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)


def infer_together(port: int, model: str, input_name: str, output_name: str, samples: list) -> list:
    """Return the answers to `samples` sent at once over HTTP, one client each, so the batcher can merge them."""
    import concurrent.futures

    import tritonclient.http as httpclient

    def infer(sample):
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}", network_timeout=120.0)
        try:
            tensor = httpclient.InferInput(input_name, list(sample.shape), "FP32")
            tensor.set_data_from_numpy(sample)
            return client.infer(model, [tensor]).as_numpy(output_name)
        finally:
            client.close()

    with concurrent.futures.ThreadPoolExecutor(len(samples)) as pool:
        return list(pool.map(infer, samples))


def test_names_and_types_the_repository_cannot_hold_write_nothing(cli, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    models.save(models.conv_net(batch="N"), tmp_path / "conv.onnx")
    for name in ("../escaped", "a/b", 'q"uote'):
        code, _out, err = cli("triton", tmp_path / "conv.onnx", "-o", tmp_path / "repo", "--name", name, "--kind", "cpu")
        assert code == 2 and err.count("\n") == 1 and "a model name is letters, digits" in err, err
    assert not (tmp_path / "repo").exists() and not (tmp_path / "escaped").exists()
    node = helper.make_node("Identity", ["x"], ["y"])
    graph = helper.make_graph([node], "wide", [helper.make_tensor_value_info("x", TensorProto.UINT16, ["N", 2])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT16, ["N", 2])])
    wide = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    wide.ir_version = 8
    onnx.save(wide, tmp_path / "wide.onnx")
    code, _out, err = cli("triton", tmp_path / "conv.onnx", tmp_path / "wide.onnx", "-o", tmp_path / "repo", "--kind", "cpu")
    assert code == 2 and "tensor 'x' is uint16, which this repository cannot serve" in err, err
    assert not (tmp_path / "repo").exists()  # the good model was not written either: nothing half-made
