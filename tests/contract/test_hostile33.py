"""Session 33's class: a graph that builds but is wrong, reached by a model that computes in float64.

TensorRT has no float64: its ONNX parser casts such a model to float32 and builds it. trtpipe's FP16 pass retypes
float32 tensors alone, so `build --precision fp16` of a float64 model wrote an engine said to be FP16 that computed in
FP32, calibration blamed the data ("the model cannot run on this data"), and a float64 Conv stopped every command on
ONNX Runtime's "no implementation" naming no file. Every command that calibrates, types or builds a model now refuses
one whose layers compute in float64, found by type (a weight through an Identity or a Cast, an attention's MatMul of
two activations, one float64 layer in a float32 model), in one line naming the model and saying to export it in
float32. A model that reads and writes float64 through casts around float32 layers is quantized and deployed.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import HAS_RTX
from onnx import TensorProto, helper, numpy_helper

import models
from contract.test_hostile import check_refused, run_cli

rng = np.random.default_rng(33)
SAID = "computes in float64"
F64, F32 = TensorProto.DOUBLE, TensorProto.FLOAT


def _weight(shape, dtype=F64):
    return rng.normal(0, 0.3, shape).astype(np.float64 if dtype == F64 else np.float32)


def mlp(case: str):
    """MatMul, Relu, MatMul on [4, 16], computing in float64 as `case` says (see CASES); "edges": float32 layers
    between float64 casts, which is no float64 model."""
    layer = F32 if case == "edges" else F64  # what the layers compute in
    io = F32 if case == "island" else F64
    nodes = [helper.make_node("Cast", ["x"], ["x0"], to=layer)]
    inits = [numpy_helper.from_array(_weight((32, 8), F32 if case == "edges" else F64), "w1")]
    if case == "constant-node":
        nodes.append(helper.make_node("Constant", [], ["w0"], value=numpy_helper.from_array(_weight((16, 32)))))
    elif case in ("identity", "cast"):
        inits.append(numpy_helper.from_array(_weight((16, 32), F64 if case == "identity" else F32), "w0raw"))
        nodes.append(helper.make_node("Identity", ["w0raw"], ["w0"]) if case == "identity"
                     else helper.make_node("Cast", ["w0raw"], ["w0"], to=F64))
    else:
        inits.append(numpy_helper.from_array(_weight((16, 32), F32 if case in ("island", "edges") else F64), "w0"))
    island = case == "island"  # a float32 model whose second MatMul alone computes in float64
    nodes += [helper.make_node("MatMul", ["x0" if not island else "x", "w0"], ["h"], name="mm0"),
              helper.make_node("Relu", ["h"], ["r"]),
              helper.make_node("Cast", ["r"], ["r1"], to=F64 if island else layer),
              helper.make_node("MatMul", ["r1", "w1"], ["y1"], name="mm1"),
              helper.make_node("Cast", ["y1"], ["y"], to=io)]
    if island:
        nodes.pop(0)
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", io, [4, 16])],
                              [helper.make_tensor_value_info("y", io, [4, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def conv():
    """A float64 Conv: ONNX Runtime's CPU provider runs none, so trtpipe's cleanup stopped on it first."""
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4, name="conv0"),
                               helper.make_node("Relu", ["c"], ["y"])], "conv",
                              [helper.make_tensor_value_info("x", F64, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", F64, [1, 32, 16, 16])],
                              [numpy_helper.from_array(_weight((32, 3, 3, 3)), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def attention():
    """Two MatMuls of activations alone (x @ x^T, then by x): no weight says float64, the types do."""
    graph = helper.make_graph([helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
                               helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores"),
                               helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                               helper.make_node("MatMul", ["p", "x"], ["y"], name="mix")], "attention",
                              [helper.make_tensor_value_info("x", F64, [4, 4, 16])],
                              [helper.make_tensor_value_info("y", F64, [4, 4, 16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


CASES = {  # how the float64 is reached: the model and one sample file's array
    **{case: (lambda case=case: mlp(case), (4, 16), np.float64)
       for case in ("initializers", "constant-node", "identity", "cast")},
    "island": (lambda: mlp("island"), (4, 16), np.float32),
    "conv": (conv, (1, 3, 16, 16), np.float64),
    "attention": (attention, (4, 4, 16), np.float64),
}


@pytest.fixture(params=sorted(CASES))
def doubled(request, tmp_path):
    make, shape, dtype = CASES[request.param]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    models.save(make(), workspace / "m.onnx")
    (workspace / "data").mkdir()
    for i in range(2):
        np.save(workspace / "data" / f"{i}.npy", rng.uniform(-1, 1, shape).astype(dtype))
    return workspace


def test_every_command_that_builds_a_float64_model_says_so_in_one_line(doubled, tmp_path):
    hostile, out = tmp_path / "hostile", tmp_path / "out"
    hostile.mkdir(), out.mkdir()
    model, data = doubled / "m.onnx", doubled / "data"
    commands = [["quantize", model, "--precision", p, "-o", out / f"m.{p}.onnx"] for p in ("fp16", "int4")]
    commands += [["calibrate", model, "--data", data, "--precision", p, "-o", out / f"{p}.cache"] for p in ("int8", "fp8")]
    commands += [["smooth", model, "--data", data, "-o", out / "s.onnx"], ["awq", model, "--data", data, "-o", out / "a.onnx"]]
    if HAS_RTX:  # build and deploy load their backend first
        commands += [["build", model, "--precision", p, "--target", "sm_89", "-o", out / "e"] for p in ("fp32", "auto")]
        commands += [["deploy", model, "--data", data, "--target", "sm_89", "-o", out / "d"]]
    for argv in commands:
        line = check_refused(argv, doubled, out, hostile, [SAID])
        assert str(model) in line and "export the model in float32" in line, argv[0]


def test_a_float32_model_reading_and_writing_float64_through_casts_is_quantized(tmp_path):
    """Only a layer computing in float64 is refused: float64 at the edges, cast to float32 inside, is a float32 model,
    and a spec says its inputs are float64 (init writes so)."""
    models.save(mlp("edges"), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", rng.uniform(-1, 1, (8, 16)), per_file=4)
    code, _out, err, _ = run_cli(["init", tmp_path / "m.onnx", "--data", tmp_path / "data", "-o", tmp_path / "m.toml"])
    assert code == 0 and 'dtype = "float64"' in (tmp_path / "m.toml").read_text(), err
    code, _out, err, _ = run_cli(["calibrate", tmp_path / "m.onnx", "--spec", tmp_path / "m.toml", "-o", tmp_path / "c.cache"])
    assert code == 0, err
    code, _out, err, _ = run_cli(["quantize", tmp_path / "m.onnx", "--precision", "int8", "--cache", tmp_path / "c.cache",
                                  "-o", tmp_path / "m.int8.onnx"])
    assert code == 0, err
    code, _out, err, _ = run_cli(["validate", tmp_path / "m.int8.onnx", "--baseline", tmp_path / "m.onnx", "--spec",
                                  tmp_path / "m.toml", "--threshold", "cosine=0.99"])
    assert code == 0, err
