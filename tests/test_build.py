"""Real engines, built on this CPU by TensorRT-RTX for sm_89 and sm_80, with their sidecars."""

import json

import numpy as np
import pytest
from conftest import needs_rtx
from onnx import TensorProto, helper

import models
from models import _model, dynamic_mlp, mlp, save
from trtpipe.build import BuildOptions, build
from trtpipe.calibrators.amax import compute_amax
from trtpipe.calibrators.cache import CalibrationTable, render
from trtpipe.calibrators.collect import collect_histograms
from trtpipe.calibrators.graph import quantized_activations
from trtpipe.errors import TrtpipeError
from trtpipe.files import sha256
from trtpipe.spec import parse_shapes
from trtpipe.targets import Target

pytestmark = needs_rtx
rng = np.random.default_rng(0)
MODELS = {
    "conv": (models.conv_net(batch=2), {"input": rng.random((2, 3, 16, 16), np.float32)}, []),
    "mlp": (models.mlp(batch=4), {"x": rng.normal(size=(4, 16)).astype(np.float32)}, []),
    "dynamic": (models.dynamic_mlp(), {"x": rng.normal(size=(8, 16)).astype(np.float32)}, ["x:1x16/8x16/64x16"]),
}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("build")
    for name, (model, feeds, _) in MODELS.items():
        models.save(model, root / f"{name}.onnx")
        hists = collect_histograms(model, quantized_activations(model), [feeds])
        table = CalibrationTable({k: compute_amax(h, "entropy") for k, h in hists.items()})
        (root / f"{name}.cache").write_text(render(table))
    return root


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("sm,precisions", [("sm_89", ["fp32", "fp16", "int8", "fp8"]), ("sm_80", ["fp32", "fp16", "int8"])])
def test_real_engines_and_sidecars(workdir, name, sm, precisions):
    options = BuildOptions(target=Target.parse(sm), backend="tensorrt-rtx", cache=workdir / f"{name}.cache",
                           shapes=parse_shapes(MODELS[name][2]))
    out = workdir / f"out-{name}-{sm}"
    results = build(workdir / f"{name}.onnx", out, precisions, options)
    assert [r.info.precision for r in results] == precisions
    for result in results:
        assert result.engine.name == f"{name}.{result.info.precision}.{sm.replace('_', '')}.engine"
        assert result.engine.stat().st_size > 10_000
        sidecar = json.loads((out / f"{result.engine.name}.json").read_text())
        assert sidecar["engine_sha256"] == sha256(result.engine)
        assert sidecar["onnx_sha256"] == sha256(workdir / f"{name}.onnx")
        assert sidecar["cache_sha256"] == (sha256(workdir / f"{name}.cache") if result.info.precision in ("int8", "fp8") else None)
        assert sidecar["backend"] == "tensorrt-rtx" and sidecar["compute_capability"] == sm[3] + "." + sm[4]
        inputs = [t for t in sidecar["tensors"] if t["mode"] == "input"]
        assert inputs[0]["dtype"] == "float32"
        if name == "dynamic":
            assert inputs[0]["shape"] == [-1, 16] and inputs[0]["profile"] == [[1, 16], [8, 16], [64, 16]]
        assert (out / f"{name}.{result.info.precision}.onnx").is_file()


def test_fp8_refused_for_sm80(workdir):
    with pytest.raises(TrtpipeError, match="fp8 needs compute capability 8.9"):
        build(workdir / "mlp.onnx", workdir / "x", ["fp8"], BuildOptions(target=Target(8, 0), cache=workdir / "mlp.cache"))
    assert not (workdir / "x").exists()


def test_dynamic_input_without_shapes_is_refused(workdir):
    with pytest.raises(TrtpipeError, match="pass --shapes x:MIN/OPT/MAX"):
        build(workdir / "dynamic.onnx", workdir / "y", ["fp32"], BuildOptions(target=Target(8, 9)))
    assert not list((workdir / "y").glob("*.engine"))


def test_auto_builds_every_precision_the_target_runs(workdir):
    results = build(workdir / "mlp.onnx", workdir / "auto", ["auto"], BuildOptions(target=Target(8, 0), cache=workdir / "mlp.cache"))
    assert [r.info.precision for r in results] == ["fp32", "fp16", "bf16", "int8"]


def test_timing_cache_is_refused_where_the_backend_has_none(workdir):
    options = BuildOptions(target=Target(8, 9), backend="tensorrt-rtx", timing_cache=workdir / "timing.cache")
    with pytest.raises(TrtpipeError, match="--timing-cache: tensorrt-rtx has no timing cache"):
        build(workdir / "mlp.onnx", workdir / "t1", ["fp16"], options)


def test_implicit_calibration_needs_tensorrt_10(workdir):
    options = BuildOptions(target=Target(8, 9), cache=workdir / "mlp.cache", calibration="implicit")
    with pytest.raises(TrtpipeError, match="implicit INT8"):
        build(workdir / "mlp.onnx", workdir / "imp", ["int8"], options)


def test_auto_calibrates_the_int8_and_fp8_caches_it_needs_from_the_data(workdir, cli):
    data = workdir / "mlp-data"
    models.save_batches(data, rng.normal(size=(8, 16)).astype(np.float32))
    out = workdir / "auto-data"
    code, stdout, err = cli("build", workdir / "mlp.onnx", "--precision", "auto", "--target", "sm_89",
                            "--backend", "tensorrt-rtx", "--data", data, "-o", out)
    assert code == 0, err
    built = sorted(p.name for p in out.glob("*.engine"))
    assert built == sorted(f"mlp.{p}.sm89.engine" for p in ("fp32", "fp16", "bf16", "int8", "fp8"))
    for grid in ("int8", "fp8"):
        cache = out / f"mlp.{grid}.cache"
        assert json.loads((out / f"mlp.{grid}.cache.json").read_text())["options"]["grid"] == grid
        assert json.loads((out / f"mlp.{grid}.sm89.engine.json").read_text())["cache_sha256"] == sha256(cache)
    assert "calibrated" in stdout
    said = {line.split()[1].rsplit("/", 1)[-1]: line for line in stdout.splitlines() if line.startswith("built ")}
    # The 32x8 head stays out of INT8 (the small-GEMM rule): the line that names the engine says so.
    assert f"(1 layer left unquantized: trtpipe inspect {out / 'mlp.int8.sm89.engine'})" in said["mlp.int8.sm89.engine"]
    assert "(" not in said["mlp.fp32.sm89.engine"].split("MB")[1]


def test_a_cache_for_int8_alone_calibrates_fp8_from_the_data(workdir):
    from trtpipe.calibrate import CalibrationOptions, calibrate

    data = workdir / "mlp-data2"
    models.save_batches(data, rng.normal(size=(8, 16)).astype(np.float32))
    given = workdir / "given.int8.cache"
    calibrate(workdir / "mlp.onnx", data, given, CalibrationOptions(grid="int8"))
    out = workdir / "one-cache"
    options = BuildOptions(target=Target(8, 9), backend="tensorrt-rtx", cache=given, calibration_data=data)
    results = build(workdir / "mlp.onnx", out, ["int8", "fp8"], options)
    caches = {r.info.precision: r.info.cache_sha256 for r in results}
    assert caches == {"int8": sha256(given), "fp8": sha256(out / "mlp.fp8.cache")}


def test_auto_without_a_cache_or_data_fails_before_writing_anything(workdir, cli):
    out = workdir / "auto-nothing"
    code, _out, err = cli("build", workdir / "mlp.onnx", "--precision", "auto", "--target", "sm_89",
                          "--backend", "tensorrt-rtx", "-o", out)
    assert code == 2 and "--precision int8 needs a calibration cache: pass --data DIR" in err
    assert not out.exists()


def test_an_int8_cache_and_no_data_fails_on_fp8_before_writing_anything(workdir, cli):
    from trtpipe.calibrate import CalibrationOptions, calibrate

    data = workdir / "mlp-data3"
    models.save_batches(data, rng.normal(size=(8, 16)).astype(np.float32))
    given = workdir / "only.int8.cache"
    calibrate(workdir / "mlp.onnx", data, given, CalibrationOptions(grid="int8"))
    out = workdir / "auto-int8-only"
    code, _out, err = cli("build", workdir / "mlp.onnx", "--precision", "auto", "--target", "sm_89",
                          "--backend", "tensorrt-rtx", "--cache", given, "-o", out)
    assert code == 2 and "calibrated for int8, not fp8" in err
    assert not out.exists()


@needs_rtx
def test_a_shape_tensor_input_is_refused_with_the_fix(tmp_path):
    from trtpipe.build import BuildOptions, build

    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    graph = helper.make_graph(nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                                                 helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, -1])])
    save(_model(graph), tmp_path / "reshape.onnx")
    with pytest.raises(TrtpipeError, match="input 'shape' is a shape tensor.*make it a constant"):
        build(tmp_path / "reshape.onnx", tmp_path, ["fp32"], BuildOptions(target=Target(8, 9), backend="tensorrt-rtx"))
    assert not list(tmp_path.glob("*.engine"))


class StandInConfig:
    """TensorRT 10's IBuilderConfig timing-cache contract (TensorRT-RTX's are no-ops, so it cannot show it):
    set_timing_cache returns False for a cache from another GPU or version; get_timing_cache is then None."""

    def __init__(self, accepts: bool):
        self.accepts, self.attached = accepts, None

    def create_timing_cache(self, data: bytes):
        return ("cache", data)

    def set_timing_cache(self, cache, ignore_mismatch: bool) -> bool:
        if self.accepts or ignore_mismatch:
            self.attached = cache
        return self.accepts or ignore_mismatch


def test_a_timing_cache_tensorrt_refuses_stops_the_build_before_it_starts(tmp_path):
    from trtpipe.build import _attach_timing_cache

    stale = tmp_path / "other-gpu.cache"
    stale.write_bytes(b"timing cache of another GPU")
    with pytest.raises(TrtpipeError, match=r"--timing-cache .*other-gpu\.cache: TensorRT will not use it.*delete it"):
        _attach_timing_cache(StandInConfig(accepts=False), stale)
    config = StandInConfig(accepts=True)
    assert _attach_timing_cache(config, tmp_path / "new.cache") == ("cache", b"") == config.attached


@needs_rtx
def test_a_static_network_calibrates_at_its_own_batch_not_eight(tmp_path):
    import tensorrt_rtx as trt

    from trtpipe.build import _io_tensors, calibration_shapes

    save(mlp(batch=4), tmp_path / "mlp.onnx")
    builder = trt.Builder(trt.Logger(trt.Logger.ERROR))
    network = builder.create_network(0)
    assert trt.OnnxParser(network, trt.Logger(trt.Logger.ERROR)).parse_from_file(str(tmp_path / "mlp.onnx"))
    tensors, _ = _io_tensors(network, builder, {}, tmp_path / "mlp.onnx")
    assert calibration_shapes(tensors) == {"x": (4, 16)}


def test_unquantized_layers_get_the_builder_flag_of_their_type():
    from trtpipe.build import implicit_flags

    assert implicit_flags("fp32") == ("INT8",)
    assert implicit_flags("fp16") == ("INT8", "FP16")
    assert implicit_flags("bf16") == ("INT8", "BF16")


@needs_rtx
def test_exclude_finds_the_tensorrt_layers_named_after_onnx_nodes(tmp_path):
    import tensorrt_rtx as trt

    from trtpipe.build import excluded_layers

    save(dynamic_mlp(), tmp_path / "mlp.onnx")
    network = trt.Builder(trt.Logger(trt.Logger.ERROR)).create_network(0)
    assert trt.OnnxParser(network, trt.Logger(trt.Logger.ERROR)).parse_from_file(str(tmp_path / "mlp.onnx"))
    assert [layer.name for layer in excluded_layers(network, tmp_path / "mlp.onnx", ["fc1"])] == ["fc1"]
    assert excluded_layers(network, tmp_path / "mlp.onnx", []) == []
