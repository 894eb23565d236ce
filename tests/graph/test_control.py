"""If nodes: folded into their branch when the shapes or a fixed input decide them, kept (FP32) otherwise."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import needs_rtx
from helpers import cosine, run
from onnx import TensorProto, helper, numpy_helper

from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.graph.control import fold_ifs
from trtpipe.graph.typed import typed_graph
from trtpipe.targets import Precision

rng = np.random.default_rng(5)
SHAPES = {"x": ((1, 8), (4, 8), (8, 8))}


def traced_ifs(lstm: bool = False):
    """What a traced PyTorch model leaves: `if sr == 16000` around the body, and inside it
    `if h.shape[-1] == 1: h = h.squeeze(-1)`, whose branches differ in rank.

    x [N, 8] -> fc (outside) -> h [N, 1]. The 16 kHz branch: fc16k (a MatMul inside the If) ->
    g [N, 1] -> the shape If squeezes g to [N] -> y = g * 3 (with `lstm`, g first runs through a
    one-step LSTM, silero-vad's pattern). Other rates: y = -h, squeezed.
    """
    def value(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, shape)

    def const(name, array, dtype=np.int64):
        return numpy_helper.from_array(np.asarray(array, dtype), name)

    inits = [const("w", rng.normal(0, 0.5, (8, 1)), np.float32), const("w16k", rng.normal(0, 0.5, (8, 1)), np.float32),
             const("rate", 16000), const("last", [-1]), const("one", [1]), const("scale", 3.0, np.float32)]
    squeeze = helper.make_graph([helper.make_node("Squeeze", ["g", "last"], ["g_squeezed"])], "squeeze", [],
                                [value("g_squeezed", ["N"])])
    keep = helper.make_graph([helper.make_node("Identity", ["g"], ["g_kept"])], "keep", [], [value("g_kept", ["N", 1])])
    body = [
        helper.make_node("MatMul", ["x", "w16k"], ["g"], name="fc16k"),
        helper.make_node("Shape", ["g"], ["g_shape"]),
        helper.make_node("Gather", ["g_shape", "last"], ["g_last"], axis=0),
        helper.make_node("Equal", ["g_last", "one"], ["g_is_column"]),
        helper.make_node("Squeeze", ["g_is_column"], ["g_is_column0"]),
        helper.make_node("If", ["g_is_column0"], ["g1"], then_branch=squeeze, else_branch=keep, name="squeeze_if"),
    ]
    if lstm:
        inits += [const("W", rng.normal(0, 0.5, (1, 16, 1)), np.float32), const("R", rng.normal(0, 0.5, (1, 16, 4)), np.float32),
                  const("seq_axes", [0, 2]), const("first", [0]), const("hidden_axis", [1])]
        body += [helper.make_node("Unsqueeze", ["g1", "seq_axes"], ["seq"]),  # [1, N, 1]: one step of N sequences
                 helper.make_node("LSTM", ["seq", "W", "R"], ["", "hidden"], hidden_size=4, name="lstm"),
                 helper.make_node("Squeeze", ["hidden", "first"], ["hidden2"]),  # [N, 4]
                 helper.make_node("ReduceSum", ["hidden2", "hidden_axis"], ["g2"], keepdims=0),  # [N]
                 helper.make_node("Add", ["g1", "g2"], ["g3"])]
    else:
        body += [helper.make_node("Identity", ["g1"], ["g3"])]
    body += [helper.make_node("Mul", ["g3", "scale"], ["y_16k"])]
    rate_16k = helper.make_graph(body, "rate_16k", [], [value("y_16k", ["N"])])
    other = helper.make_graph([helper.make_node("Neg", ["h"], ["h_neg"]), helper.make_node("Squeeze", ["h_neg", "last"], ["y_other"])],
                              "other", [], [value("y_other", ["N"])])
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("Equal", ["sr", "rate"], ["is_16k"]),
        helper.make_node("If", ["is_16k"], ["y"], then_branch=rate_16k, else_branch=other, name="rate_if"),
    ]
    graph = helper.make_graph(nodes, "traced", [value("x", ["N", 8]), value("sr", [], TensorProto.INT64)],
                              [value("y", ["N"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnxio.IR_VERSION
    onnx.checker.check_model(model)
    return model, {"x": rng.normal(0, 1, (4, 8)).astype(np.float32), "sr": np.array(16000, np.int64)}


def if_count(model) -> int:
    def count(graph):
        return sum(n.op_type == "If" for n in graph.node) + sum(
            count(a.g) for n in graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
    return count(model.graph)


def test_a_runtime_condition_is_not_folded_and_a_fixed_input_folds_it():
    model, _ = traced_ifs()
    folded, done = fold_ifs(model, SHAPES)
    assert done == [] and if_count(folded) == 2  # sr decides: the data, nothing folds
    folded, done = fold_ifs(model, SHAPES, {"sr": np.array(16000, np.int64)})
    assert [(f.node, f.branch) for f in done] == [("rate_if", "then_branch"), ("squeeze_if", "then_branch")]
    assert if_count(folded) == 0
    folded, done = fold_ifs(model, SHAPES, {"sr": np.array(8000, np.int64)})
    assert [(f.node, f.branch) for f in done] == [("rate_if", "else_branch")]


def test_a_condition_on_a_dynamic_dim_is_not_decided():
    model, _ = traced_ifs()
    # A profile whose batch moves does not decide `N == 1`.
    for node in model.graph.node:
        if node.name == "rate_if":
            body = next(a.g for a in node.attribute if a.name == "then_branch")
            gather = next(n for n in body.node if n.op_type == "Gather")
            gather.input[1] = "zero"  # `if g.shape[0] == 1`: the batch
    model.graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    _, done = fold_ifs(model, SHAPES, {"sr": np.array(16000, np.int64)})
    assert [f.node for f in done] == ["rate_if"]  # the batch-dim If stays
    _, done = fold_ifs(model, {"x": ((1, 8), (1, 8), (1, 8))}, {"sr": np.array(16000, np.int64)})
    assert [f.node for f in done] == ["rate_if", "squeeze_if"]  # batch fixed at 1: now it is decided


@pytest.mark.parametrize("lstm", [False, True])
def test_the_folded_graph_computes_what_the_original_does(lstm, tmp_path):
    model, feeds = traced_ifs(lstm)
    expected, = run(model, feeds, tmp_path / "original.onnx")
    for precision in (Precision.FP32, Precision.FP16):
        typed = typed_graph(model, precision, None, shapes=SHAPES, fixed={"sr": feeds["sr"]})
        assert if_count(typed.model) == 0 and not any(k.reason.startswith("control flow") for k in typed.kept)
        got, = run(typed.model, feeds, tmp_path / f"{precision}.onnx")
        assert got.shape == expected.shape and cosine(got, expected) > 0.9999


def test_int8_reaches_the_layer_inside_a_folded_if_and_lists_an_unfolded_one(tmp_path):
    from helpers import table_for

    from trtpipe.graph.toolkit import label

    model, feeds = traced_ifs()
    fixed = {"sr": feeds["sr"]}
    folded, _ = fold_ifs(model, SHAPES, fixed)
    table = table_for(folded, feeds)  # calibration sees the folded graph too (calibrate passes the spec's facts)
    typed = typed_graph(model, Precision.INT8, table, shapes=SHAPES, fixed=fixed)
    made_by = {out: n for n in typed.model.graph.node for out in n.output}
    quantized = {label(n) for n in typed.model.graph.node if n.op_type == "MatMul"
                 and made_by.get(n.input[1]) is not None and made_by[n.input[1]].op_type == "DequantizeLinear"}
    # fc fed only the other rates' branch: folded away with it, as dead as the condition's Equal.
    assert quantized == {"fc16k"} and if_count(typed.model) == 0
    assert not any(n.op_type == "Equal" or n.name == "fc" for n in typed.model.graph.node)
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    got, = run(typed.model, feeds, tmp_path / "int8.onnx")
    assert cosine(got, expected) > 0.99
    # Without the sample rate the If stays: fc16k stays FP32 inside it, and the If is listed with the reason.
    typed = typed_graph(model, Precision.INT8, table_for(model, feeds), shapes=SHAPES)
    assert if_count(typed.model) == 2
    assert [k.reason for k in typed.kept if k.node == "rate_if"] == ["control flow: its subgraphs compute in FP32"]


@needs_rtx
def test_tensorrt_rtx_refuses_an_lstm_inside_an_if_and_builds_it_folded(tmp_path, capfd):
    """silero-vad's refusal on a small graph: TensorRT-RTX 1.7 asserts in graph scoping on an LSTM
    (a TensorRT loop) inside a conditional, in every precision. Folded, the same graph builds."""
    from trtpipe.backend import TENSORRT_RTX, load
    from trtpipe.build import BuildOptions, build_engine
    from trtpipe.targets import Target

    model, feeds = traced_ifs(lstm=True)
    options = BuildOptions(target=Target.parse("sm_89"), backend="tensorrt-rtx", shapes=SHAPES)
    backend = load(TENSORRT_RTX)
    shipped = onnxio.save(model, tmp_path / "shipped.onnx")
    with pytest.raises(TrtpipeError) as err:
        build_engine(shipped, tmp_path / "shipped.engine", Precision.FP32, options, backend, shipped)
    assert "\n" not in str(err.value)
    logged = capfd.readouterr()
    assert "graphScope" in str(err.value), logged  # TensorRT's own reason, quoted in the one line
    typed = typed_graph(model, Precision.FP16, None, shapes=SHAPES, fixed={"sr": feeds["sr"]}).model
    path = onnxio.save(typed, tmp_path / "folded.onnx")
    build_engine(path, tmp_path / "folded.engine", Precision.FP16, options, backend, shipped)
    assert (tmp_path / "folded.engine").stat().st_size > 10_000


def test_inspect_lists_the_folded_ifs(tmp_path):
    from trtpipe.describe import describe, render
    from trtpipe.graph.typed import write_typed_onnx

    model, feeds = traced_ifs()
    path = write_typed_onnx(model, Precision.FP16, tmp_path / "m.fp16.onnx", None, shapes=SHAPES, fixed={"sr": feeds["sr"]})
    description = describe(path)
    assert description["folded_ifs"] == [{"node": "rate_if", "branch": "then_branch"},
                                         {"node": "squeeze_if", "branch": "then_branch"}]
    assert "rate_if" in render(description)


def rate_if_only():
    """Every layer inside `if sr == 16000` (silero-vad's habit): x [N, 8] -> fc1 -> Relu -> fc2 at
    16 kHz, fc_other at other rates; the main graph has no layer of its own to quantize."""
    def value(name, shape, elem=TensorProto.FLOAT):
        return helper.make_tensor_value_info(name, elem, shape)

    weights = {name: numpy_helper.from_array(rng.normal(0, 0.5, shape).astype(np.float32), name)
               for name, shape in (("w1", (8, 16)), ("w2", (16, 4)), ("w_other", (8, 4)))}
    rate_16k = helper.make_graph([helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
                                  helper.make_node("Relu", ["h"], ["h_relu"]),
                                  helper.make_node("MatMul", ["h_relu", "w2"], ["y_16k"], name="fc2")],
                                 "rate_16k", [], [value("y_16k", ["N", 4])])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "w_other"], ["y_other"], name="fc_other")],
                              "other", [], [value("y_other", ["N", 4])])
    graph = helper.make_graph(
        [helper.make_node("Equal", ["sr", "rate"], ["is_16k"]),
         helper.make_node("If", ["is_16k"], ["y"], then_branch=rate_16k, else_branch=other, name="rate_if")],
        "rate_only", [value("x", ["N", 8]), value("sr", [], TensorProto.INT64)], [value("y", ["N", 4])],
        [*weights.values(), numpy_helper.from_array(np.array(16000, np.int64), "rate")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnxio.IR_VERSION
    onnx.checker.check_model(model)
    return model


RATE_SPEC = """name = "rate"
task = "generic"
[[inputs]]
name = "x"
shape = [-1, 8]
dtype = "float32"
[[inputs]]
name = "sr"
shape = []
dtype = "int64"
batched = false
value = 16000
[shapes]
x = "1x8/16x8/16x8"
[data]
calibration = "calib"
validation = "val"
"""


def test_sensitivity_and_tune_fold_the_if_the_specs_fixed_input_decides(tmp_path, cli):
    """calibrate and build fold `if sr == 16000` with the spec's `value`; sensitivity and tune must
    see the same graph, or the layers inside the If are invisible to them (silero-vad's LSTM)."""
    from trtpipe.quality.tune import TuneOptions, tune
    from trtpipe.spec import load_spec
    from trtpipe.targets import Target

    onnxio.save(rate_if_only(), tmp_path / "rate.onnx")
    (tmp_path / "rate.toml").write_text(RATE_SPEC)
    for split, count in (("calib", 32), ("val", 16)):
        (tmp_path / split).mkdir()
        np.savez(tmp_path / split / "x.npz", x=rng.normal(0, 1, (count, 8)).astype(np.float32), sr=np.array(16000, np.int64))
    code, _, err = cli("calibrate", tmp_path / "rate.onnx", "--spec", tmp_path / "rate.toml", "-o", tmp_path / "rate.cache")
    assert code == 0, err

    code, out, err = cli("sensitivity", tmp_path / "rate.onnx", "--cache", tmp_path / "rate.cache",
                         "--spec", tmp_path / "rate.toml", "--json")
    assert code == 0, err  # without the spec's sample rate: "no Conv, MatMul or Gemm ... has scales"
    assert sorted(row["node"] for row in json.loads(out)) == ["fc1", "fc2"]

    # Without the sample rate tune finds no layer to quantize and stops.
    result = tune(tmp_path / "rate.onnx", load_spec(tmp_path / "rate.toml"), Precision.INT8, Target.parse("sm_89"),
                  tmp_path / "calib", TuneOptions(budget_seconds=30, batch_size=16, ladder=False))
    assert result.chosen.quantized + len(result.chosen.config.exclude) == 2  # fc1 and fc2, fc_other folded away
    assert result.chosen.passed and 0.99 < result.chosen.metrics["cosine"] < 1.0  # something really was quantized


def _quantized_matmuls(model) -> set[str]:
    made_by = {out: n for n in model.graph.node for out in n.output}
    return {n.name for n in model.graph.node if n.op_type == "MatMul"
            and made_by.get(n.input[1]) is not None and made_by[n.input[1]].op_type == "DequantizeLinear"}


def _calibrated_rate_model(tmp_path, cli) -> None:
    """Write the If-only model, its spec fixing the sample rate, one calibration batch, and its cache."""
    onnxio.save(rate_if_only(), tmp_path / "rate.onnx")
    (tmp_path / "rate.toml").write_text(RATE_SPEC)
    (tmp_path / "calib").mkdir()
    np.savez(tmp_path / "calib" / "x.npz", x=rng.normal(0, 1, (16, 8)).astype(np.float32), sr=np.array(16000, np.int64))
    code, _, err = cli("calibrate", tmp_path / "rate.onnx", "--spec", tmp_path / "rate.toml", "-o", tmp_path / "rate.cache")
    assert code == 0, err


def test_an_exclusion_inside_the_folded_if_is_a_node_quantize_and_build_know(tmp_path, cli):
    """tune names layers of the If the spec's fixed input folds; quantize and build checked
    --exclude against the graph before folding and refused them ("matches no node")."""
    _calibrated_rate_model(tmp_path, cli)
    code, _, err = cli("quantize", tmp_path / "rate.onnx", "--precision", "int8", "--cache", tmp_path / "rate.cache",
                       "--spec", tmp_path / "rate.toml", "--exclude", "fc1", "-o", tmp_path / "rate.int8.onnx")
    assert code == 0, err
    assert _quantized_matmuls(onnxio.load(tmp_path / "rate.int8.onnx")) == {"fc2"}
    code, _, err = cli("quantize", tmp_path / "rate.onnx", "--precision", "int8", "--cache", tmp_path / "rate.cache",
                       "--spec", tmp_path / "rate.toml", "--exclude", "fc9", "-o", tmp_path / "typo.onnx")
    assert code == 2 and "--exclude fc9: matches no node" in err and not (tmp_path / "typo.onnx").exists()


@needs_rtx
def test_build_takes_an_exclusion_inside_the_folded_if(tmp_path, cli):
    _calibrated_rate_model(tmp_path, cli)
    code, _, err = cli("build", tmp_path / "rate.onnx", "--precision", "int8", "--target", "sm_89", "--backend", "tensorrt-rtx",
                       "--cache", tmp_path / "rate.cache", "--spec", tmp_path / "rate.toml", "--exclude", "fc2",
                       "-o", tmp_path / "engines")
    assert code == 0, err
    assert _quantized_matmuls(onnxio.load(tmp_path / "engines" / "rate.int8.onnx")) == {"fc1"}
    assert (tmp_path / "engines" / "rate.int8.sm89.engine").stat().st_size > 1000
