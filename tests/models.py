"""Small ONNX models the tests share, made with onnx.helper: a conv net with BatchNorm and a
residual Add, an MLP, a model with a dynamic batch (the MLP with batch -1), and a table lookup whose
index can be out of range."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtpipe.graph import onnxio

OPSET = 17


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def conv_net(batch=1, seed=0) -> onnx.ModelProto:
    """Conv-BN-Relu, Conv-BN, residual Add, Relu, global pool, Gemm: 3x16x16 -> 10 classes."""
    rng = np.random.default_rng(seed)
    c = 8
    inits = [
        _init("conv0.w", rng.normal(0, 0.3, (c, 3, 3, 3))), _init("conv0.b", rng.normal(0, 0.1, c)),
        _init("conv1.w", rng.normal(0, 0.2, (c, c, 3, 3))), _init("conv1.b", np.zeros(c)),
        _init("fc.w", rng.normal(0, 0.3, (10, c))), _init("fc.b", rng.normal(0, 0.1, 10)),
    ]
    for name in ("bn0", "bn1"):
        inits += [_init(f"{name}.scale", rng.uniform(0.5, 1.5, c)), _init(f"{name}.bias", rng.normal(0, 0.1, c)),
                  _init(f"{name}.mean", rng.normal(0, 0.1, c)), _init(f"{name}.var", rng.uniform(0.5, 1.5, c))]
    nodes = [
        helper.make_node("Conv", ["input", "conv0.w", "conv0.b"], ["c0"], pads=[1, 1, 1, 1], name="conv0"),
        helper.make_node("BatchNormalization", ["c0", "bn0.scale", "bn0.bias", "bn0.mean", "bn0.var"], ["b0"], name="bn0"),
        helper.make_node("Relu", ["b0"], ["r0"], name="relu0"),
        helper.make_node("Conv", ["r0", "conv1.w", "conv1.b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"], ["b1"], name="bn1"),
        helper.make_node("Add", ["b1", "r0"], ["res"], name="residual"),
        helper.make_node("Relu", ["res"], ["r1"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r1"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(nodes, "conv_net",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 16, 16])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], inits)
    return _model(graph)


def mlp(batch=4, seed=1, hidden=32) -> onnx.ModelProto:
    """MatMul-Add-Relu-MatMul-Add-Softmax on 16 features; `batch` may be a name (dynamic)."""
    rng = np.random.default_rng(seed)
    inits = [_init("w0", rng.normal(0, 0.3, (16, hidden))), _init("b0", rng.normal(0, 0.1, hidden)),
             _init("w1", rng.normal(0, 0.3, (hidden, 8))), _init("b1", rng.normal(0, 0.1, 8))]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h0"], name="fc0"),
        helper.make_node("Add", ["h0", "b0"], ["h1"], name="bias0"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w1"], ["h3"], name="fc1"),
        helper.make_node("Add", ["h3", "b1"], ["h4"], name="bias1"),
        helper.make_node("Softmax", ["h4"], ["probs"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 8])], inits)
    return _model(graph)


def mlp_classifier(weights, biases, sample_shape) -> onnx.ModelProto:
    """Flatten, then MatMul-Add-Relu layers and a last MatMul-Add giving logits, from trained weights
    (scikit-learn's MLPClassifier coefs_ and intercepts_); the input is `image`, batch dynamic."""
    inits, nodes, x = [], [helper.make_node("Flatten", ["image"], ["flat"], name="flatten")], "flat"
    for i, (w, b) in enumerate(zip(weights, biases)):
        inits += [_init(f"fc{i}.w", w), _init(f"fc{i}.b", b)]
        nodes += [helper.make_node("MatMul", [x, f"fc{i}.w"], [f"mm{i}"], name=f"fc{i}"),
                  helper.make_node("Add", [f"mm{i}", f"fc{i}.b"], [f"h{i}"], name=f"bias{i}")]
        x = f"h{i}"
        if i < len(weights) - 1:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    nodes.append(helper.make_node("Identity", [x], ["logits"], name="logits"))
    graph = helper.make_graph(nodes, "mlp_classifier",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", *sample_shape])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", len(biases[-1])])], inits)
    return _model(graph)


def dynamic_mlp() -> onnx.ModelProto:
    return mlp(batch="N")


def lookup(rows=5, width=3) -> onnx.ModelProto:
    """Gather rows of a constant table: index int64 [N, 1] -> rows float32 [N, 1, width]; an index >= rows fails at run time."""
    table = _init("table", np.arange(rows * width).reshape(rows, width))
    node = helper.make_node("Gather", ["table", "index"], ["rows"], axis=0)
    graph = helper.make_graph([node], "lookup", [helper.make_tensor_value_info("index", TensorProto.INT64, ["N", 1])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N", 1, width])], [table])
    return _model(graph)


def _model(graph) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = onnxio.IR_VERSION
    onnx.checker.check_model(model)
    return model


def save(model, path) -> str:
    onnx.save(model, str(path))
    return str(path)


def save_batches(directory, x, per_file=16):
    """Write `x` into `directory` (made if missing) as .npy files of `per_file` samples; return `x`."""
    import numpy as np

    directory.mkdir(exist_ok=True)
    for i in range(0, len(x), per_file):
        np.save(directory / f"{i:03d}.npy", x[i:i + per_file])
    return x
