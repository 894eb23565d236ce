"""A real engine on a real GPU: built here for this GPU, run by `Engine`, compared with ONNX Runtime.

Needs pycuda, an NVIDIA GPU and a backend that runs on it: TensorRT 10+ on any GPU from compute
capability 7.5, or TensorRT-RTX on 8.0/8.6/8.9/12.x. Skips with the reason otherwise; on the
team's H200 it skips (no TensorRT installs there and TensorRT-RTX refuses 9.0).
"""

import threading

import numpy as np
import onnxruntime as ort
import pytest

from models import dynamic_mlp, save
from trtpipe.errors import TrtpipeError


def _runnable_backend():
    try:
        import pycuda.driver  # noqa: F401
    except ImportError:
        return None, "pycuda is not installed: pip install 'trtpipe[gpu]'"
    from trtpipe.backend import SPECS
    from trtpipe.targets import local_target

    try:
        target = local_target()
    except TrtpipeError as exc:
        return None, f"no GPU: {exc}"
    for spec in SPECS.values():
        if spec.installed() and spec.runs_on(target):
            return (spec, target), ""
    return None, f"no installed backend runs {target} (TensorRT 10+ or TensorRT-RTX on 8.0/8.6/8.9/12.x)"


BACKEND, WHY = _runnable_backend()
pytestmark = pytest.mark.skipif(BACKEND is None, reason=WHY)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from trtpipe.build import BuildOptions, build
    from trtpipe.spec import parse_shapes

    spec, target = BACKEND
    root = tmp_path_factory.mktemp("engine")
    save(dynamic_mlp(), root / "mlp.onnx")
    options = BuildOptions(target=target, backend=spec.name, shapes=parse_shapes(["x:1x16/8x16/64x16"]))
    engine = build(root / "mlp.onnx", root, ["fp32"], options)[0].engine
    reference = ort.InferenceSession(str(root / "mlp.onnx"), providers=["CPUExecutionProvider"])
    return engine, lambda x: reference.run(None, {"x": x})[0]


def test_engine_matches_onnxruntime_across_dynamic_batches(built):
    from trtpipe.runtime import Engine

    path, reference = built
    rng = np.random.default_rng(0)
    with Engine(path) as engine:
        assert [(i.name, i.shape) for i in engine.inputs] == [("x", (-1, 16))]
        for batch in (1, 8, 64, 3):  # grows, then shrinks inside the grown buffers
            x = rng.normal(size=(batch, 16)).astype(np.float32)
            got = engine({"x": x})["probs"]
            assert got.shape == (batch, 8)
            np.testing.assert_allclose(got, reference(x), atol=1e-4)
        x = rng.normal(size=(4, 16)).astype(np.float32)
        np.testing.assert_allclose(engine([x])["probs"], reference(x), atol=1e-4)  # list in input order
        np.testing.assert_allclose(engine.infer_async({"x": x}).result()["probs"], reference(x), atol=1e-4)


def test_engine_rejects_a_batch_outside_its_profile(built):
    from trtpipe.runtime import Engine

    with Engine(built[0]) as engine, pytest.raises(TrtpipeError, match="optimization profile"):
        engine({"x": np.zeros((65, 16), np.float32)})


def test_engine_serves_threads(built):
    from trtpipe.runtime import Engine

    path, reference = built
    rng = np.random.default_rng(1)
    inputs = [rng.normal(size=(1 + i % 8, 16)).astype(np.float32) for i in range(32)]
    results = [None] * len(inputs)
    with Engine(path) as engine:
        def work(i):
            results[i] = engine({"x": inputs[i]})["probs"]

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for x, got in zip(inputs, results):
        np.testing.assert_allclose(got, reference(x), atol=1e-4)


def test_engine_takes_and_fills_torch_device_tensors(built):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from trtpipe.runtime import Engine

    path, reference = built
    x = torch.randn(8, 16, device="cuda")
    out = torch.empty(8, 8, device="cuda")
    with Engine(path) as engine:
        engine.infer(engine.feeds({"x": x}), out={"probs": out})
    np.testing.assert_allclose(out.cpu().numpy(), reference(x.cpu().numpy()), atol=1e-4)


def test_bench_times_a_real_engine(built):
    from trtpipe.runtime.bench import BenchSettings, bench

    for settings in (BenchSettings(warmup_ms=20, duration_s=0.2, iterations=20),
                     BenchSettings(warmup_ms=20, duration_s=0.2, iterations=20, transfers=False, cuda_graph=True)):
        result = bench(built[0], settings, batch=8)
        assert result.runner == "engine" and result.shapes == {"x": [8, 16]} and result.queries >= 20
        compute = result.metrics["gpu_compute"]
        assert 0 < compute.min <= compute.median <= compute.max
        assert ("h2d" in result.metrics) == settings.transfers
