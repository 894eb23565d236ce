"""Small graphs, each carrying one thing public exporters write that broke the typed passes.

Each returns (model, feeds): a valid ONNX model at opset 17 and inputs it runs on.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtpipe.graph import onnxio

rng = np.random.default_rng(0)


def _f(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def _i(name, array):
    return numpy_helper.from_array(np.asarray(array, np.int64), name)


def _model(nodes, inputs, outputs, inits, opset=17):
    graph = helper.make_graph(nodes, "case", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = onnxio.IR_VERSION
    onnx.checker.check_model(model)
    return model


def _value(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def out_of_range_batchnorm():
    """Conv -> BatchNormalization with running variances 1e7..1e8 (PP-OCR's), -> Relu; then an Add and a
    second BatchNormalization of the same kind that has no Conv to fold into."""
    c = 8
    var = rng.uniform(1e7, 1e8, c)
    mean = rng.normal(0, 300, c)
    inits = [
        _f("conv.w", rng.normal(0, 0.5, (c, 3, 3, 3))), _f("conv.b", rng.normal(0, 0.1, c)),
        _f("bn0.scale", rng.uniform(0.5, 1.5, c)), _f("bn0.bias", rng.normal(0, 0.1, c)),
        _f("bn0.mean", mean * 0.01), _f("bn0.var", var),
        _f("bn1.scale", rng.uniform(0.5, 1.5, c)), _f("bn1.bias", rng.normal(0, 0.1, c)),
        _f("bn1.mean", mean), _f("bn1.var", var), _f("offset", np.full((1, c, 1, 1), 100.0)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c0"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c0", "bn0.scale", "bn0.bias", "bn0.mean", "bn0.var"], ["b0"], name="bn0"),
        helper.make_node("Relu", ["b0"], ["r0"], name="relu"),
        helper.make_node("Mul", ["r0", "offset"], ["m0"], name="scale_up"),
        helper.make_node("BatchNormalization", ["m0", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["y"], name="bn1"),
    ]
    model = _model(nodes, [_value("x", [1, 3, 16, 16])], [_value("y", [1, c, 16, 16])], inits)
    return model, {"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)}


def range_shape_subgraph():
    """YOLOv8's anchor grid: Shape -> Gather -> Cast(float) -> Range(float) + 0.5, added to the data, and a
    Reshape whose shape is computed in float (floor(H * W)) from the input's dynamic height and width."""
    inits = [_i("idx_h", 2), _i("idx_w", 3), _f("zero", 0.0), _f("one", 1.0), _f("half", 0.5),
             _i("axes01", [0, 1]), _i("axes0", [0]), _i("minus1", [1, -1]),
             _f("w", rng.normal(0, 0.3, (4, 3, 1, 1)))]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["f"], name="conv"),
        helper.make_node("Shape", ["f"], ["shape"], name="shape"),
        helper.make_node("Gather", ["shape", "idx_w"], ["width"], axis=0, name="gather_w"),
        helper.make_node("Cast", ["width"], ["width_f"], to=TensorProto.FLOAT, name="cast_w"),
        helper.make_node("Range", ["zero", "width_f", "one"], ["xs"], name="range"),
        helper.make_node("Add", ["xs", "half"], ["centers"], name="center"),
        helper.make_node("Add", ["f", "centers"], ["shifted"], name="shift"),
        helper.make_node("Gather", ["shape", "idx_h"], ["height"], axis=0, name="gather_h"),
        helper.make_node("Cast", ["height"], ["height_f"], to=TensorProto.FLOAT, name="cast_h"),
        helper.make_node("Mul", ["height_f", "width_f"], ["area_f"], name="area"),
        helper.make_node("Floor", ["area_f"], ["area_floor"], name="floor"),
        helper.make_node("Cast", ["area_floor"], ["area"], to=TensorProto.INT64, name="cast_area"),
        helper.make_node("Unsqueeze", ["area", "axes0"], ["area1"], name="unsqueeze"),
        helper.make_node("Concat", ["minus1", "area1"], ["new_shape"], axis=0, name="concat"),
        helper.make_node("Reshape", ["shifted", "new_shape"], ["flat"], name="reshape"),
        helper.make_node("Softmax", ["flat"], ["y"], axis=-1, name="softmax"),
    ]
    model = _model(nodes, [_value("x", [1, 3, "height", "width"])], [_value("y", [1, 4, None])], inits)
    # 49 * 53 = 2597: odd and above 2048, so FP16 cannot hold it and a Reshape to it would fail.
    return model, {"x": rng.random((1, 3, 49, 53), np.float32)}


def constant_node_weights():
    """Paddle's way: Conv weights as Constant nodes, and a MatMul weight behind a Transpose of a Constant."""
    c = 16
    conv_w = numpy_helper.from_array(rng.normal(0, 0.3, (c, 3, 3, 3)).astype(np.float32), "cw")
    fc_w = numpy_helper.from_array(rng.normal(0, 0.3, (20, c)).astype(np.float32), "fw")  # [N, K]: transposed below
    nodes = [
        helper.make_node("Constant", [], ["conv_w"], value=conv_w, name="conv_w_const"),
        helper.make_node("Conv", ["x", "conv_w"], ["c0"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c0"], ["r0"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r0"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["flat"], name="flatten"),
        helper.make_node("Constant", [], ["fc_w_nk"], value=fc_w, name="fc_w_const"),
        helper.make_node("Transpose", ["fc_w_nk"], ["fc_w"], perm=[1, 0], name="fc_w_t"),
        helper.make_node("MatMul", ["flat", "fc_w"], ["y"], name="fc"),
    ]
    model = _model(nodes, [_value("x", [2, 3, 16, 16])], [_value("y", [2, 20])], [])
    return model, {"x": rng.random((2, 3, 16, 16), np.float32)}


def fp16_weights():
    """tf2onnx's mixed-precision Keras export (Slovorez): FP32 in, a Cast to FP16, a Conv whose weight and
    bias are FP16 initializers, a Cast back to FP32."""
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float16), "conv.w"),
             numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float16), "conv.b")]
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16, name="to_half"),
        helper.make_node("Conv", ["x16", "conv.w", "conv.b"], ["c16"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c16"], ["r16"], name="relu"),
        helper.make_node("Cast", ["r16"], ["y"], to=TensorProto.FLOAT, name="to_float"),
    ]
    model = _model(nodes, [_value("x", [1, 3, 16, 16])], [_value("y", [1, 8, 16, 16])], inits)
    return model, {"x": rng.random((1, 3, 16, 16), np.float32)}


def conv_transpose():
    """A ConvTranspose upsampling, weight [C_in, C_out, k, k]: its output channels are axis 1."""
    inits = [_f("up.w", rng.normal(0, 0.3, (8, 4, 2, 2)) * np.linspace(0.1, 2.0, 4)[None, :, None, None]),
             _f("up.b", rng.normal(0, 0.1, 4)), _f("pre.w", rng.normal(0, 0.3, (8, 3, 3, 3)))]
    nodes = [
        helper.make_node("Conv", ["x", "pre.w"], ["c"], pads=[1, 1, 1, 1], name="pre"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("ConvTranspose", ["r", "up.w", "up.b"], ["y"], strides=[2, 2], name="up"),
    ]
    model = _model(nodes, [_value("x", [1, 3, 8, 8])], [_value("y", [1, 4, 16, 16])], inits)
    return model, {"x": rng.random((1, 3, 8, 8), np.float32)}


def initializers_as_inputs():
    """Conv -> BatchNormalization -> Relu with every initializer also listed as a graph input, as IR 4
    exporters wrote them (PyTorch 1.2's CenterFace: 194 of them)."""
    c = 8
    inits = [_f("conv.w", rng.normal(0, 0.5, (c, 3, 3, 3))), _f("bn.scale", rng.uniform(0.5, 1.5, c)),
             _f("bn.bias", rng.normal(0, 0.1, c)), _f("bn.mean", rng.normal(0, 0.2, c)), _f("bn.var", rng.uniform(0.5, 2, c))]
    nodes = [
        helper.make_node("Conv", ["x", "conv.w"], ["c0"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c0", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["b0"], name="bn"),
        helper.make_node("Relu", ["b0"], ["y"], name="relu"),
    ]
    declared = [_value(init.name, list(init.dims)) for init in inits]
    model = _model(nodes, [_value("x", [1, 3, 16, 16]), *declared], [_value("y", [1, c, 16, 16])], inits)
    return model, {"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)}


def matmul_weights_both_sides():
    """x @ W^T with W stored [N, K] behind a Transpose, and W2 @ h with the constant on the left."""
    inits = [_f("w_nk", rng.normal(0, 0.3, (24, 16)) * np.linspace(0.1, 3.0, 24)[:, None]),
             _f("w_left", rng.normal(0, 0.3, (6, 16)) * np.linspace(0.1, 3.0, 6)[:, None])]
    nodes = [
        helper.make_node("Transpose", ["w_nk"], ["w_kn"], perm=[1, 0], name="w_t"),
        helper.make_node("MatMul", ["x", "w_kn"], ["h"], name="fc_right"),  # [16, 16] @ [16, 24]
        helper.make_node("Relu", ["h"], ["hr"], name="relu"),
        helper.make_node("MatMul", ["w_left", "hr"], ["y"], name="fc_left"),  # [6, 16] @ [16, 24]
    ]
    model = _model(nodes, [_value("x", [16, 16])], [_value("y", [6, 24])], inits)
    return model, {"x": rng.normal(0, 1, (16, 16)).astype(np.float32)}


def gemm_trans_b():
    """Gemm with transB=1 (weight [N, K], output channels axis 0) and one with transB=0 ([K, N], axis 1)."""
    inits = [_f("w0", rng.normal(0, 0.3, (32, 16)) * np.linspace(0.1, 3.0, 32)[:, None]), _f("b0", np.zeros(32)),
             _f("w1", rng.normal(0, 0.3, (32, 16)) * np.linspace(0.1, 3.0, 16)[None, :]), _f("b1", np.zeros(16))]
    nodes = [
        helper.make_node("Gemm", ["x", "w0", "b0"], ["h"], transB=1, name="fc_transposed"),
        helper.make_node("Relu", ["h"], ["hr"], name="relu"),
        helper.make_node("Gemm", ["hr", "w1", "b1"], ["y"], name="fc_plain"),
    ]
    model = _model(nodes, [_value("x", [4, 16])], [_value("y", [4, 16])], inits)
    return model, {"x": rng.normal(0, 1, (4, 16)).astype(np.float32)}


def shared_dim_names():
    """An exporter's input dims: batch "?" and height and width both "?" (or both "size")."""
    inits = [_f("w", rng.normal(0, 0.3, (4, 3, 3, 3)))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["y"], name="relu")]
    model = _model(nodes, [_value("x", ["?", 3, "?", "?"])], [_value("y", ["?", 4, "?", "?"])], inits)
    return model, {"x": rng.random((2, 3, 32, 48), np.float32)}


def activation_beyond_fp16():
    """Activations that reach ~50000 (within FP16's 65504 for the constants, not for the data)."""
    inits = [_f("w", rng.normal(0, 0.3, (4, 3, 3, 3))), _f("gain", 2000.0), _f("shrink", 1e-4)]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Mul", ["c", "gain"], ["big"], name="gain"),
        helper.make_node("Mul", ["big", "big"], ["square"], name="square"),
        helper.make_node("Mul", ["square", "shrink"], ["y"], name="shrink"),
    ]
    model = _model(nodes, [_value("x", [1, 3, 8, 8])], [_value("y", [1, 4, 8, 8])], inits)
    return model, {"x": (rng.random((1, 3, 8, 8)) * 4).astype(np.float32)}


def if_subgraph():
    """An If whose branches read an outer-scope float tensor."""
    then_graph = helper.make_graph([helper.make_node("Mul", ["h", "h"], ["out_then"])], "then", [],
                                   [_value("out_then", [2, 4])])
    else_graph = helper.make_graph([helper.make_node("Neg", ["h"], ["out_else"])], "else", [],
                                   [_value("out_else", [2, 4])])
    inits = [_f("w", rng.normal(0, 0.3, (3, 4))), _f("zero", 0.0)]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("ReduceSum", ["h"], ["total"], keepdims=0, name="total"),
        helper.make_node("Greater", ["total", "zero"], ["positive"], name="positive"),
        helper.make_node("If", ["positive"], ["branch"], then_branch=then_graph, else_branch=else_graph, name="choose"),
        helper.make_node("Relu", ["branch"], ["y"], name="relu"),
    ]
    model = _model(nodes, [_value("x", [2, 3])], [_value("y", [2, 4])], inits)
    return model, {"x": rng.normal(0, 1, (2, 3)).astype(np.float32)}


def loop_reading_outer_weight():
    """A Loop whose body runs a MatMul on a weight that only the body reads (an outer-scope initializer), after
    a top-level MatMul that Q/DQ quantizes: a TorchScript export of a scripted refinement loop writes this."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "w_step"], ["step"]), helper.make_node("Tanh", ["step"], ["h_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 _value("h_in", [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), _value("h_out", [2, 4])])
    inits = [_f("w", rng.normal(0, 0.5, (3, 4))), _f("w_step", rng.normal(0, 0.5, (4, 4))), _i("trips", 3),
             numpy_helper.from_array(np.array(True), "go")]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
        helper.make_node("Loop", ["trips", "go", "h"], ["y"], body=body, name="refine"),
    ]
    model = _model(nodes, [_value("x", [2, 3])], [_value("y", [2, 4])], inits)
    return model, {"x": rng.normal(0, 1, (2, 3)).astype(np.float32)}


def contrib_ops_between_matmuls():
    """MatMul, then ONNX Runtime's com.microsoft BiasGelu and SkipLayerNormalization, then a MatMul on their
    output: what its transformer optimizer writes into a BERT. ONNX's shape inference knows no com.microsoft
    op, so every tensor from the first of them on has no type it can tell."""
    hidden = 8
    inits = [_f("w0", rng.normal(0, 0.5, (hidden, hidden))), _f("bias", rng.normal(0, 0.1, hidden)),
             _f("gamma", rng.uniform(0.5, 1.5, hidden)), _f("beta", rng.normal(0, 0.1, hidden)),
             _f("w1", rng.normal(0, 0.5, (hidden, 4)))]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h"], name="fc0"),
        helper.make_node("BiasGelu", ["h", "bias"], ["g"], domain="com.microsoft", name="gelu"),
        helper.make_node("SkipLayerNormalization", ["g", "x", "gamma", "beta"], ["n"], domain="com.microsoft",
                         epsilon=1e-5, name="skip_norm"),
        helper.make_node("MatMul", ["n", "w1"], ["y"], name="fc1"),
    ]
    graph = helper.make_graph(nodes, "case", [_value("x", [2, 3, hidden])], [_value("y", [2, 3, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = onnxio.IR_VERSION
    return model, {"x": rng.normal(0, 1, (2, 3, hidden)).astype(np.float32)}


def input_passed_through():
    """An output that is an input as it came (Identity), beside one computed from it: a TorchScript export
    that returns its input too writes this."""
    inits = [_f("w", rng.normal(0, 0.5, (4, 3)))]
    nodes = [helper.make_node("Identity", ["x"], ["x_out"], name="copy"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")]
    model = _model(nodes, [_value("x", [2, 4])], [_value("y", [2, 3]), _value("x_out", [2, 4])], inits)
    return model, {"x": (rng.normal(0, 1, (2, 4)) * 3.3).astype(np.float32)}


def sequence_through_a_loop():
    """A Loop that fills a sequence begun by SequenceEmpty, then ConcatFromSequence and a MatMul: what the
    TorchScript exporter writes for a scripted loop appending to a list (its element type is SequenceEmpty's dtype)."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["part"]), helper.make_node("SequenceInsert", ["parts_in", "part"], ["parts_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_sequence_value_info("parts_in", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("parts_out", TensorProto.FLOAT, None)])
    inits = [_f("w", rng.normal(0, 0.5, (8, 4))), _f("w2", rng.normal(0, 0.5, (8, 3))), _i("trips", 2),
             numpy_helper.from_array(np.array(True), "go")]
    nodes = [
        helper.make_node("SequenceEmpty", [], ["empty"], dtype=TensorProto.FLOAT, name="empty"),
        helper.make_node("Loop", ["trips", "go", "empty"], ["parts"], body=body, name="collect"),
        helper.make_node("ConcatFromSequence", ["parts"], ["joined"], axis=1, name="join"),
        helper.make_node("MatMul", ["joined", "w2"], ["y"], name="fc"),
    ]
    model = _model(nodes, [_value("x", [2, 8])], [_value("y", [2, 3])], inits)
    return model, {"x": rng.normal(0, 1, (2, 8)).astype(np.float32)}
