"""Session 33's class: a graph that builds but is wrong, reached by a model exported in float64.

TensorRT has no float64: its ONNX parser casts such a model to float32 and builds it. trtpipe's FP16 pass retypes
float32 tensors alone, so `build --precision fp16` of a float64 model wrote an engine said to be FP16 that computed in
FP32, and calibration blamed the data ("the model cannot run on this data"). Every precision but FP32 is now one line
naming the model and saying to export it in float32; `build --precision auto` builds its FP32 and skips the rest,
and deploy, which would have nothing to build, refuses at once.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import HAS_RTX, needs_rtx
from onnx import TensorProto, helper, numpy_helper

import models
from contract.test_hostile import check_refused, run_cli

rng = np.random.default_rng(33)
SAID = "computes in float64"


def mlp(dtype: int, weights_from_constant: bool = False):
    """MatMul, Relu, MatMul on [4, 16] in `dtype`; the first weight an initializer or a Constant node's value."""
    kind = np.float64 if dtype == TensorProto.DOUBLE else np.float32
    w0, w1 = (rng.normal(0, 0.3, shape).astype(kind) for shape in ((16, 32), (32, 8)))
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["h"], name="mm0"), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w1"], ["y"], name="mm1")]
    inits = [numpy_helper.from_array(w1, "w1")]
    if weights_from_constant:
        nodes.insert(0, helper.make_node("Constant", [], ["w0"], value=numpy_helper.from_array(w0)))
    else:
        inits.append(numpy_helper.from_array(w0, "w0"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", dtype, [4, 16])],
                              [helper.make_tensor_value_info("y", dtype, [4, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


@pytest.fixture(params=["initializers", "constant-node"])
def doubled(request, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    models.save(mlp(TensorProto.DOUBLE, request.param == "constant-node"), workspace / "m.onnx")
    models.save_batches(workspace / "data", rng.uniform(-1, 1, (8, 16)), per_file=4)  # float64, as the model takes
    return workspace


def test_every_precision_but_fp32_of_a_float64_model_is_one_line(doubled, tmp_path):
    hostile, out = tmp_path / "hostile", tmp_path / "out"
    hostile.mkdir(), out.mkdir()
    model, data = doubled / "m.onnx", doubled / "data"
    commands = [["quantize", model, "--precision", p, "-o", out / f"m.{p}.onnx"] for p in ("fp16", "bf16", "int4")]
    commands += [["calibrate", model, "--data", data, "--precision", p, "-o", out / f"{p}.cache"] for p in ("int8", "fp8")]
    if HAS_RTX:  # build and deploy load their backend first
        commands += [["build", model, "--precision", "fp16", "--target", "sm_89", "-o", out / "e"],
                     ["deploy", model, "--data", data, "--target", "sm_89", "-o", out / "d"]]
    for argv in commands:
        line = check_refused(argv, doubled, out, hostile, [SAID])
        assert str(model) in line and "export the model in float32" in line, argv[0]


@needs_rtx
def test_build_auto_of_a_float64_model_builds_fp32_alone(doubled, tmp_path):
    code, _out, err, _ = run_cli(["build", doubled / "m.onnx", "--data", doubled / "data", "--target", "sm_89",
                                  "--backend", "tensorrt-rtx", "-o", tmp_path / "auto"])
    assert code == 0, err
    assert {p.name.split(".")[1] for p in (tmp_path / "auto").glob("*.engine")} == {"fp32"}
    assert "fp16 not built" in err and "int8 not built" in err and SAID in err


def test_a_float32_model_reading_and_writing_float64_through_casts_is_quantized(tmp_path):
    """Only a layer computing in float64 is refused: float64 at the edges, cast to float32 inside, is a float32 model."""
    model = mlp(TensorProto.FLOAT)
    x, y = model.graph.input[0], model.graph.output[0]
    x.name, model.graph.node[0].input[0] = "x64", "x32"
    model.graph.node.insert(0, helper.make_node("Cast", ["x64"], ["x32"], to=TensorProto.FLOAT))
    model.graph.node[-1].output[0] = "y32"
    model.graph.node.append(helper.make_node("Cast", ["y32"], ["y"], to=TensorProto.DOUBLE))
    x.type.tensor_type.elem_type = y.type.tensor_type.elem_type = TensorProto.DOUBLE
    models.save(model, tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", rng.uniform(-1, 1, (8, 16)), per_file=4)
    code, _out, err, _ = run_cli(["calibrate", tmp_path / "m.onnx", "--data", tmp_path / "data", "-o", tmp_path / "c.cache"])
    assert code == 0, err
    code, _out, err, _ = run_cli(["quantize", tmp_path / "m.onnx", "--precision", "int8", "--cache", tmp_path / "c.cache",
                                  "-o", tmp_path / "m.int8.onnx"])
    assert code == 0, err
    code, _out, err, _ = run_cli(["validate", tmp_path / "m.int8.onnx", "--baseline", tmp_path / "m.onnx", "--data",
                                  tmp_path / "data", "--threshold", "cosine=0.99"])
    assert code == 0, err
