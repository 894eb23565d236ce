"""Session 32's class: a precision that has no layer of the model, reached by roads other than an element-wise model.

FP8 of a model of small convolutions (graph.qdq's rule, which no longer steps aside), INT8 of a model whose only
layers are depthwise, and every layer excluded by the user: each asked for by name is one line naming the model and
exit 2 with nothing written; `build --precision auto` skips the precision with a warning and builds the rest
(the depthwise model stopped the whole build with exit 2, and its line named no file).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import HAS_RTX, needs_rtx
from onnx import TensorProto, helper, numpy_helper

import models
from contract.test_hostile import check_refused, run_cli

rng = np.random.default_rng(32)


def convs(layers: list[tuple[int, int, int, int]]):
    """A chain of Conv+Relu, each (input channels, output channels, kernel, group), on [1, C, 16, 16]."""
    inits, nodes, x = [], [], "x"
    for i, (c_in, c_out, k, group) in enumerate(layers):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, (c_out, c_in // group, k, k)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], group=group, pads=[k // 2] * 4, name=f"conv{i}"),
                  helper.make_node("Relu", [f"c{i}"], [f"y{i}"], name=f"relu{i}")]
        x = f"y{i}"
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, layers[0][0], 16, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, layers[-1][1], 16, 16])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


CASES = {  # (layers, the precision with no layer, the spec's [quantize] exclude, what the line says)
    "fp8-small-convs": ([(3, 8, 3, 1), (8, 32, 7, 1)], "fp8", None, "no layer to quantize in fp8: each of the model's convolutions"),
    "int8-depthwise": ([(8, 8, 3, 8), (8, 8, 5, 8)], "int8", None, "no layer to quantize in int8: each of the model's layers"),
    "int8-all-excluded": ([(8, 32, 3, 1), (32, 32, 3, 1)], "int8", "Conv", "excluded (the spec's [quantize] exclude"),
}


@pytest.fixture
def case(request, tmp_path):
    layers, precision, exclude, said = CASES[request.param]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    models.save(convs(layers), workspace / "m.onnx")
    for folder in ("data", "clean", "val"):
        models.save_batches(workspace / folder, rng.uniform(0, 1, (8, layers[0][0], 16, 16)).astype(np.float32))
    (workspace / "data" / "broken.npy").write_bytes(b"not a numpy file")  # refused before any sample is read
    (workspace / "m.toml").write_text("" if exclude is None else f'[quantize]\nexclude = ["{exclude}"]\n')
    return workspace, precision, said


@pytest.mark.parametrize("case", sorted(CASES), indirect=True)
def test_a_precision_with_no_layer_asked_for_by_name_is_one_line(case, tmp_path):
    workspace, precision, said = case
    hostile, out = tmp_path / "hostile", tmp_path / "out"
    hostile.mkdir(), out.mkdir()
    model, common = workspace / "m.onnx", ["--data", workspace / "data", "--spec", workspace / "m.toml"]
    commands = [["calibrate", model, *common, "--precision", precision, "-o", out / "c.cache"],
                ["tune", model, *common, "--precision", precision, "--target", "sm_89", "-o", out / "tuned.cache"]]
    if HAS_RTX:  # build and deploy load their backend first
        commands += [["build", model, *common, "--precision", precision, "--target", "sm_89", "-o", out / "e"],
                     ["deploy", model, "--data", workspace / "clean", "--validation", workspace / "val", "--spec",
                      workspace / "m.toml", "--precision", precision, "--target", "sm_89", "-o", out / "d"]]
    for argv in commands:
        assert str(model) in check_refused(argv, workspace, out, hostile, [said]), argv[0]


def test_sensitivity_says_fp8_has_no_layer_not_that_the_cache_lacks_scales(tmp_path):
    """A cache made before the FP8 rule stopped stepping aside holds every Conv's scales: sensitivity blamed it."""
    from trtpipe.calibrators.cache import CalibrationTable, render

    workspace, hostile, out = tmp_path / "ws", tmp_path / "hostile", tmp_path / "out"
    for folder in (workspace, hostile, out):
        folder.mkdir()
    models.save(convs(CASES["fp8-small-convs"][0]), workspace / "m.onnx")
    models.save_batches(workspace / "data", rng.uniform(0, 1, (8, 3, 16, 16)).astype(np.float32))
    (workspace / "old.cache").write_text(render(CalibrationTable(amax={"x": 1.0, "y0": 2.0})))
    line = check_refused(["sensitivity", workspace / "m.onnx", "--precision", "fp8", "--cache", workspace / "old.cache",
                          "--data", workspace / "data"], workspace, out, hostile, ["no layer to quantize in fp8"])
    assert str(workspace / "m.onnx") in line


@needs_rtx
@pytest.mark.parametrize("case", ["fp8-small-convs", "int8-depthwise"], indirect=True)
def test_build_auto_skips_a_precision_with_no_layer_and_builds_the_rest(case, tmp_path):
    workspace, precision, said = case
    code, _out, err, _ = run_cli(["build", workspace / "m.onnx", "--data", workspace / "clean", "--target", "sm_89",
                                  "--backend", "tensorrt-rtx", "-o", tmp_path / "auto"])
    assert code == 0, err
    built = {p.name.split(".")[1] for p in (tmp_path / "auto").glob("*.engine")}
    assert {"fp32", "fp16"} <= built and precision not in built
    assert f"{precision} not built" in err and said in err and str(workspace / "m.onnx") in err
