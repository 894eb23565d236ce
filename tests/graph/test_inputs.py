"""The one random-input rule: floats in [0, 1), masks on, ids 0 or 1 and never past the table they index."""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from trtpipe.graph.inputs import index_limits, random_inputs


def test_each_dtype_gets_its_rule_and_ids_stay_in_their_table():
    feeds = random_inputs([("x", np.float16, (64, 3)), ("mask", np.bool_, (4, 5)), ("ids", np.int64, (1000,)),
                           ("one_row", np.int32, (1000,))], seed=0, limits={"one_row": 1})
    assert feeds["x"].dtype == np.float16 and 0 <= feeds["x"].min() and feeds["x"].max() < 1
    assert feeds["mask"].all()
    assert set(np.unique(feeds["ids"])) == {0, 1}
    assert feeds["one_row"].dtype == np.int32 and not feeds["one_row"].any()
    again = random_inputs([("x", np.float16, (64, 3))], seed=0)
    assert np.array_equal(again["x"], feeds["x"])  # one seed, one draw order: the same feeds every time


def test_index_limits_follow_an_index_through_reshapes_to_the_smallest_table():
    tables = [numpy_helper.from_array(np.zeros((rows, 4), np.float32), f"table{rows}") for rows in (30522, 2)]
    column_table = numpy_helper.from_array(np.zeros((4, 5), np.float32), "columns")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table30522", "ids"], ["words"]),
         helper.make_node("Unsqueeze", ["ids", "axes"], ["ids2"]),
         helper.make_node("Gather", ["table2", "ids2"], ["types"]),
         helper.make_node("Gather", ["columns", "col"], ["picked"], axis=-1),
         helper.make_node("Gather", ["words", "other"], ["not_a_table"])],
        "g", [helper.make_tensor_value_info(n, TensorProto.INT64, [3]) for n in ("ids", "col", "other")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("types", "picked", "not_a_table")],
        tables + [column_table, numpy_helper.from_array(np.array([0], np.int64), "axes")])
    assert index_limits(graph) == {"ids": 2, "col": 5}
