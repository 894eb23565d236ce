"""The graph toolkit: labels, attributes, subgraph reads, copies, and new names that never collide."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtpipe.graph import toolkit


def _matmul_reading_a_name_qdq_would_make(tmp_path):
    """y = (x @ W) + x__scale: the model already holds `x__scale`, the name Q/DQ builds for x's scale."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(size=(8, 4)).astype(np.float32), "W")
    taken = numpy_helper.from_array(np.full((4,), 3.0, np.float32), "x__scale")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"], name="mm"), helper.make_node("Add", ["xw", "x__scale"], ["y"], name="add")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [weight, taken])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_qdq_names_its_tensors_around_a_name_the_model_already_has(tmp_path):
    from helpers import run

    from trtpipe.calibrators.cache import CalibrationTable
    from trtpipe.graph.qdq import insert_qdq
    from trtpipe.targets import Precision

    model = _matmul_reading_a_name_qdq_would_make(tmp_path)
    feeds = {"x": np.random.default_rng(1).uniform(-1, 1, (2, 8)).astype(np.float32)}
    typed, quantized = insert_qdq(model, CalibrationTable({"x": 1.0}), Precision.INT8)
    assert quantized == ["mm"]
    onnx.checker.check_model(typed, full_check=True)
    assert len({init.name for init in typed.graph.initializer}) == len(typed.graph.initializer)
    expected = feeds["x"] @ numpy_helper.to_array(model.graph.initializer[0]) + 3.0
    (got,) = run(typed, feeds, tmp_path / "typed.onnx")
    assert np.allclose(got, expected, atol=0.1)  # the Add still reads the model's own 3.0, not a Q/DQ scale


def test_new_names_skip_every_name_the_graph_has_subgraphs_included():
    inner = helper.make_graph([helper.make_node("Identity", ["outer"], ["t__dq"])], "then", [],
                              [helper.make_tensor_value_info("t__dq", TensorProto.FLOAT, None)])
    node = helper.make_node("If", ["cond"], ["out"], then_branch=inner, else_branch=inner)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    names = toolkit.NewNames(graph)
    assert names.new("t__dq") == "t__dq_1"
    assert names.new("t__dq") == "t__dq_2"
    assert names.new("fresh") == "fresh"
    assert toolkit.names_read(graph.node) == {"cond", "outer", "t__dq"}


def test_label_attributes_and_copies():
    node = helper.make_node("Gemm", ["a", "b"], ["c"], transB=1)
    assert toolkit.label(node) == "c"
    assert toolkit.label(helper.make_node("Gemm", ["a", "b"], ["c"], name="fc")) == "fc"
    assert toolkit.label(helper.make_node("NoOp", [], [])) == "NoOp"
    assert toolkit.attribute(node, "transB") == 1 and toolkit.attribute(node, "transA", 0) == 0
    copy = toolkit.copy(node)
    toolkit.set_attribute(copy, "transB", 0)
    toolkit.set_attribute(copy, "alpha", 0.5)
    assert toolkit.attributes(copy) == {"transB": 0, "alpha": 0.5}
    assert toolkit.attributes(node) == {"transB": 1}  # the original is untouched


@pytest.mark.parametrize("value, expected", [
    (helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 2.0]), [1.0, 2.0]),
    (1.5, 1.5),
])
def test_constant_value(value, expected):
    node = helper.make_node("Constant", [], ["c"], value=value) if not isinstance(value, float) else \
        helper.make_node("Constant", [], ["c"], value_float=value)
    assert np.array_equal(toolkit.constant_value(node), np.array(expected, np.float32))
