"""Small ONNX models the tests share, made with onnx.helper: a conv net with BatchNorm and a
residual Add, an MLP, a model with a dynamic batch (the MLP with batch -1), a table lookup whose index
can be out of range, a YOLOv8-style head and a CenterNet-style face head."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtpipe.graph import onnxio

OPSET = 17


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array, np.float32), name)


def conv_net(batch=1, seed=0, height=16, width=16) -> onnx.ModelProto:
    """Conv-BN-Relu, Conv-BN, residual Add, Relu, global pool, Gemm: 3x16x16 -> 16 classes (16 a side: INT8 and FP8
    quantize the Gemm, graph.qdq's small-GEMM rule leaves narrower ones out).

    `batch`, `height` and `width` may be names (dynamic): the global pool takes any image size."""
    rng = np.random.default_rng(seed)
    c = 16
    inits = [
        _init("conv0.w", rng.normal(0, 0.3, (c, 3, 3, 3))), _init("conv0.b", rng.normal(0, 0.1, c)),
        _init("conv1.w", rng.normal(0, 0.2, (c, c, 3, 3))), _init("conv1.b", np.zeros(c)),
        _init("fc.w", rng.normal(0, 0.3, (16, c))), _init("fc.b", rng.normal(0, 0.1, 16)),
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
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, height, width])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 16])], inits)
    return _model(graph)


def mlp(batch=4, seed=1, hidden=32, classes=8) -> onnx.ModelProto:
    """MatMul-Add-Relu-MatMul-Add-Softmax, 16 features to `classes` (8: INT8 and FP8 leave the 32x8 head out,
    graph.qdq's small-GEMM rule); `batch` may be a name (dynamic)."""
    rng = np.random.default_rng(seed)
    inits = [_init("w0", rng.normal(0, 0.3, (16, hidden))), _init("b0", rng.normal(0, 0.1, hidden)),
             _init("w1", rng.normal(0, 0.3, (hidden, classes))), _init("b1", rng.normal(0, 0.1, classes))]
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["h0"], name="fc0"),
        helper.make_node("Add", ["h0", "b0"], ["h1"], name="bias0"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w1"], ["h3"], name="fc1"),
        helper.make_node("Add", ["h3", "b1"], ["h4"], name="bias1"),
        helper.make_node("Softmax", ["h4"], ["probs"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, classes])], inits)
    return _model(graph)


def integrator(drift: float = 0.0, seed: int = 3) -> onnx.ModelProto:
    """A streaming model: `state` [N, 8] in, `stateN` = state + x @ W + `drift` (the state the next step reads)
    and `y` = stateN @ V out; a candidate with a `drift` errs a little each step, and a stream piles it up."""
    rng = np.random.default_rng(seed)
    inits = [_init("w", rng.normal(0, 0.5, (8, 8))), _init("v", rng.normal(0, 0.5, (8, 4))), _init("drift", np.full(8, drift))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["step"]), helper.make_node("Add", ["state", "step"], ["moved"]),
             helper.make_node("Add", ["moved", "drift"], ["stateN"]), helper.make_node("MatMul", ["stateN", "v"], ["y"])]
    graph = helper.make_graph(nodes, "integrator", [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 8])
                                                    for n in ("x", "state")],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
                               helper.make_tensor_value_info("stateN", TensorProto.FLOAT, ["N", 8])], inits)
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


def renamed_input(model: onnx.ModelProto, old: str, new: str) -> onnx.ModelProto:
    """Return `model` with graph input `old` renamed `new` everywhere it is read."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for value in model.graph.input:
        if value.name == old:
            value.name = new
    for node in model.graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
    return model


def yolo_like(classes=18, layout="yolov8", box_pixels=64.0, seed=2) -> onnx.ModelProto:
    """A YOLO-style head on 3x64x64 images: an 8x8 stride-8 Conv to box, (objectness,) and class channels on an
    8x8 grid, Sigmoid, box channels scaled to pixels (cx, cy in [0, box_pixels], w, h in [0, box_pixels / 4]),
    written as YOLOv8's [batch, 4+classes, 64] or, with layout "yolov5", YOLOv5/YOLOX's [batch, 64, 5+classes]."""
    rng = np.random.default_rng(seed)
    width = 4 + (layout == "yolov5") + classes
    scale = np.array([box_pixels] * 2 + [box_pixels / 4] * 2 + [1] * (width - 4), np.float32).reshape(1, width, 1, 1)
    inits = [_init("head.w", rng.normal(0, 0.15, (width, 3, 8, 8))), _init("head.b", rng.normal(-1, 0.5, width)),
             _init("pixels", scale), numpy_helper.from_array(np.array([0, width, 64], np.int64), "flat_shape")]
    nodes = [
        helper.make_node("Conv", ["images", "head.w", "head.b"], ["head"], strides=[8, 8], name="head"),
        helper.make_node("Sigmoid", ["head"], ["sig"], name="sigmoid"),
        helper.make_node("Mul", ["sig", "pixels"], ["scaled"], name="to_pixels"),
        helper.make_node("Reshape", ["scaled", "flat_shape"], ["output0" if layout == "yolov8" else "flat"], name="flatten"),
    ]
    shape = ["N", width, 64]
    if layout == "yolov5":
        nodes.append(helper.make_node("Transpose", ["flat"], ["output0"], perm=[0, 2, 1], name="boxes_first"))
        shape = ["N", 64, width]
    graph = helper.make_graph(nodes, "yolo_like",
                              [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 64, 64])],
                              [helper.make_tensor_value_info("output0", TensorProto.FLOAT, shape)], inits)
    return _model(graph)


def yolox_like(classes=3, seed=8) -> onnx.ModelProto:
    """YOLOX's head as its export writes it undecoded, on 3x64x64 images: one Conv per stride 8, 16, 32 (kernel =
    stride) to x, y (offsets in the cell), log w, log h (in cells), objectness and classes, all Sigmoid, each
    level's cells in rows, concatenated: `output` [batch, 84, 5+classes]."""
    rng = np.random.default_rng(seed)
    width = 5 + classes
    inits, nodes, levels = [], [], []
    for stride in (8, 16, 32):
        inits += [_init(f"head{stride}.w", rng.normal(0, 0.15, (width, 3, stride, stride)) * 8 / stride),
                  _init(f"head{stride}.b", [0, 0, 0, 0, 1.0] + [0.0] * classes),
                  numpy_helper.from_array(np.array([0, width, -1], np.int64), f"flat{stride}")]
        nodes += [helper.make_node("Conv", ["images", f"head{stride}.w", f"head{stride}.b"], [f"conv{stride}"],
                                   strides=[stride, stride], name=f"head{stride}"),
                  helper.make_node("Sigmoid", [f"conv{stride}"], [f"sig{stride}"], name=f"sigmoid{stride}"),
                  helper.make_node("Reshape", [f"sig{stride}", f"flat{stride}"], [f"level{stride}"], name=f"flatten{stride}")]
        levels.append(f"level{stride}")
    nodes += [helper.make_node("Concat", levels, ["levels"], axis=2, name="levels"),
              helper.make_node("Transpose", ["levels"], ["output"], perm=[0, 2, 1], name="boxes_first")]
    graph = helper.make_graph(nodes, "yolox_like", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 64, 64])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 84, width])], inits)
    return _model(graph)


def separate_boxes(classes=18) -> onnx.ModelProto:
    """`yolo_like`'s head with its boxes decoded: `boxes` [batch, 64, 4] as x1, y1, x2, y2, `scores` [batch, 64]
    (the best class's) and `labels` [batch, 64] (int64), as detectors with NMS outputs write them."""
    model = yolo_like(classes)
    graph = model.graph
    corners = np.array([[1, 0, 1, 0], [0, 1, 0, 1], [-0.5, 0, 0.5, 0], [0, -0.5, 0, 0.5]], np.float32)  # cxcywh -> xyxy
    graph.initializer.extend([_init("corners", corners)] + [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
                                                            (("at0", [0]), ("at4", [4]), ("at_end", [4 + classes]), ("last", [2]))])
    graph.node.extend([
        helper.make_node("Transpose", ["output0"], ["rows"], perm=[0, 2, 1], name="rows"),
        helper.make_node("Slice", ["rows", "at0", "at4", "last"], ["cxcywh"], name="box_values"),
        helper.make_node("MatMul", ["cxcywh", "corners"], ["boxes"], name="to_corners"),
        helper.make_node("Slice", ["rows", "at4", "at_end", "last"], ["class_scores"], name="class_values"),
        helper.make_node("ReduceMax", ["class_scores"], ["scores"], axes=[2], keepdims=0, name="best_score"),
        helper.make_node("ArgMax", ["class_scores"], ["labels"], axis=2, keepdims=0, name="best_class"),
    ])
    del graph.output[:]
    graph.output.extend([helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["N", 64, 4]),
                         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 64]),
                         helper.make_tensor_value_info("labels", TensorProto.INT64, ["N", 64])])
    onnx.checker.check_model(model)
    return model


def picodet_like(classes=3, bins=8, seed=9) -> onnx.ModelProto:
    """PicoDet's heads as PaddleDetection's export writes them, on 3x64x48 images: per stride 8 and 16 a Conv
    (kernel = stride) to Sigmoid class scores `scores8`/`scores16` [batch, cells, classes] and one to box
    distribution logits `boxes8`/`boxes16` [batch, cells, 4*bins] (left, top, right, bottom), cells in rows."""
    rng = np.random.default_rng(seed)
    inits, nodes, outputs = [], [], []
    for stride in (8, 16):
        cells = (64 // stride) * (48 // stride)
        for kind, width in (("scores", classes), ("boxes", 4 * bins)):
            name = f"{kind}{stride}"
            inits += [_init(f"{name}.w", rng.normal(0, 0.3 if kind == "boxes" else 0.15, (width, 3, stride, stride)) * 8 / stride),
                      _init(f"{name}.b", np.zeros(width) if kind == "boxes" else np.full(width, -1.0)),
                      numpy_helper.from_array(np.array([0, width, -1], np.int64), f"{name}.flat")]
            nodes.append(helper.make_node("Conv", ["images", f"{name}.w", f"{name}.b"], [f"{name}.conv"],
                                          strides=[stride, stride], name=f"{name}.conv"))
            head = f"{name}.conv"
            if kind == "scores":
                nodes.append(helper.make_node("Sigmoid", [head], [f"{name}.sig"], name=f"{name}.sigmoid"))
                head = f"{name}.sig"
            nodes += [helper.make_node("Reshape", [head, f"{name}.flat"], [f"{name}.cells"], name=f"{name}.flatten"),
                      helper.make_node("Transpose", [f"{name}.cells"], [name], perm=[0, 2, 1], name=f"{name}.cells_first")]
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", cells, width]))
    graph = helper.make_graph(nodes, "picodet_like", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 64, 48])],
                              outputs, inits)
    return _model(graph)


def ctc_head(steps=24, features=8, classes=12, seed=4) -> onnx.ModelProto:
    """A CTC recognizer's last layer: features [batch, steps, features] -> MatMul-Add -> Softmax ->
    `probs` [batch, steps, classes], class 0 the blank."""
    rng = np.random.default_rng(seed)
    inits = [_init("w", rng.normal(0, 1.0, (features, classes))), _init("b", rng.normal(0, 0.3, classes))]
    nodes = [helper.make_node("MatMul", ["features", "w"], ["mm"], name="fc"),
             helper.make_node("Add", ["mm", "b"], ["logits"], name="bias"),
             helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax")]
    graph = helper.make_graph(nodes, "ctc_head",
                              [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", steps, features])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", steps, classes])], inits)
    return _model(graph)


def ctc_reader(favour: float = 0.0, steps=24, features=8, classes=12, seed=4) -> onnx.ModelProto:
    """ctc_head reading itself out in the graph, as TrueOCR's recognizer does: the class picked at each step
    `ids` [batch, steps] (int64, an ArgMax) and its probability `conf` [batch, steps]; `favour` is added to
    class 3's bias (a candidate whose scores moved a little)."""
    model = ctc_head(steps, features, classes, seed)
    bias = next(t for t in model.graph.initializer if t.name == "b")
    raised = numpy_helper.to_array(bias).copy()
    raised[3] += favour
    bias.CopyFrom(_init("b", raised))
    model.graph.node.extend([helper.make_node("ArgMax", ["probs"], ["ids"], axis=-1, keepdims=0, name="pick"),
                             helper.make_node("ReduceMax", ["probs"], ["conf"], axes=[-1], keepdims=0, name="confidence")])
    del model.graph.output[:]
    model.graph.output.extend([helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", steps]),
                               helper.make_tensor_value_info("conf", TensorProto.FLOAT, ["N", steps])])
    onnx.checker.check_model(model)
    return model


def tagger(table: np.ndarray) -> onnx.ModelProto:
    """A per-token tagger as slovorez is one: int32 token ids `ids` [batch, steps] (0 is padding) -> Gather of
    `table` [vocabulary, tags] -> Softmax -> `tags` [batch, steps, tags]; row 0 is what it emits on padding."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["logits"], axis=0, name="embed"),
             helper.make_node("Softmax", ["logits"], ["tags"], axis=-1, name="softmax")]
    graph = helper.make_graph(nodes, "tagger", [helper.make_tensor_value_info("ids", TensorProto.INT32, ["N", "T"])],
                              [helper.make_tensor_value_info("tags", TensorProto.FLOAT, ["N", "T", table.shape[1]])],
                              [_init("table", table)])
    return _model(graph)


def face_head(seed=6) -> onnx.ModelProto:
    """A CenterNet-style face head as CenterFace writes it, on 3x32x32 images: a 4x4 stride-4 Conv to 15
    channels on an 8x8 grid, split into `heatmap` [N, 1, 8, 8] (Sigmoid; a cell's mean brightness above 0.6
    is a face), `scale` [N, 2, 8, 8] (log box height and width in cells, about 2 cells), `offset` [N, 2, 8, 8]
    and `landmarks` [N, 10, 8, 8] (Sigmoid)."""
    rng = np.random.default_rng(seed)
    weights = rng.normal(0, 0.2, (15, 3, 4, 4))
    weights[0] = 20 / 48  # the heatmap: 20 x the cell's mean, less 12
    weights[1:3] *= 0.1
    bias = np.concatenate([[-12.0], [np.log(2.0)] * 2, rng.normal(0, 0.2, 12)])
    inits = [_init("head.w", weights), _init("head.b", bias),
             numpy_helper.from_array(np.array([1, 2, 2, 10], np.int64), "split")]
    nodes = [helper.make_node("Conv", ["images", "head.w", "head.b"], ["head"], strides=[4, 4], name="head"),
             helper.make_node("Split", ["head", "split"], ["heat_logit", "scale", "offset_logit", "landmark_logit"], axis=1,
                              name="split")]
    nodes += [helper.make_node("Sigmoid", [f"{name}_logit"], [name], name=f"{name}_sigmoid")
              for name in ("heat", "offset", "landmark")]
    nodes += [helper.make_node("Identity", ["heat"], ["heatmap"], name="heatmap"),
              helper.make_node("Identity", ["landmark"], ["landmarks"], name="landmarks")]
    outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", channels, 8, 8])
               for name, channels in (("heatmap", 1), ("scale", 2), ("offset", 2), ("landmarks", 10))]
    graph = helper.make_graph(nodes, "face_head", [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              outputs, inits)
    return _model(graph)


def face_images(count=32, seed=7) -> np.ndarray:
    """Return `count` dark 3x32x32 images (0..0.5), each with two bright 4x4 squares, one cell of the 4-pixel grid: the
    faces `face_head` finds."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 0.5, (count, 3, 32, 32)).astype(np.float32)
    for image in images:
        for y, x in rng.choice(8, (2, 2)) * 4:
            image[:, y:y + 4, x:x + 4] = rng.uniform(0.9, 1.0, (3, 1, 1))
    return images


def unbatched(length=16, seed=5) -> onnx.ModelProto:
    """A per-character scorer with no batch axis, as a word segmenter writes it: x [length] -> sigmoid(x*w+b) [length]."""
    rng = np.random.default_rng(seed)
    inits = [_init("w", rng.normal(1, 0.2, length)), _init("b", rng.normal(0, 0.2, length))]
    nodes = [helper.make_node("Mul", ["chars", "w"], ["scaled"], name="scale"),
             helper.make_node("Add", ["scaled", "b"], ["logits"], name="bias"),
             helper.make_node("Sigmoid", ["logits"], ["boundaries"], name="sigmoid")]
    graph = helper.make_graph(nodes, "unbatched", [helper.make_tensor_value_info("chars", TensorProto.FLOAT, [length])],
                              [helper.make_tensor_value_info("boundaries", TensorProto.FLOAT, [length])], inits)
    return _model(graph)


def per_sample(scale=2.0, shift=1.0) -> onnx.ModelProto:
    """One number per sample, the batch its only axis: x float32 [N] -> sigmoid(x*scale+shift) [N]."""
    inits = [_init("scale", np.float32(scale)), _init("shift", np.float32(shift))]
    nodes = [helper.make_node("Mul", ["x", "scale"], ["scaled"], name="scale"),
             helper.make_node("Add", ["scaled", "shift"], ["logit"], name="shift"),
             helper.make_node("Sigmoid", ["logit"], ["score"], name="sigmoid")]
    graph = helper.make_graph(nodes, "per_sample", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                              [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N"])], inits)
    return _model(graph)


def dynamic_mlp() -> onnx.ModelProto:
    return mlp(batch="N")


def unranked_mlp() -> onnx.ModelProto:
    """The MLP with no shape on its input and output (any rank), as some exporters write them: ONNX Runtime
    runs it, ONNX's checker refuses it (so it is not checked here)."""
    model = mlp(batch="N")
    for value in list(model.graph.input) + list(model.graph.output):
        value.type.tensor_type.ClearField("shape")
    return model


def lookup(rows=5, width=3) -> onnx.ModelProto:
    """Gather rows of a constant table: index int64 [N, 1] -> rows float32 [N, 1, width]; an index >= rows fails at run time."""
    table = _init("table", np.arange(rows * width).reshape(rows, width))
    node = helper.make_node("Gather", ["table", "index"], ["rows"], axis=0)
    graph = helper.make_graph([node], "lookup", [helper.make_tensor_value_info("index", TensorProto.INT64, ["N", 1])],
                              [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["N", 1, width])], [table])
    return _model(graph)


def conv_det(batch="N", size=8) -> onnx.ModelProto:
    """A Conv, then the determinant of each channel's map (Det): x [batch, 3, size, size] -> [batch, 4]. ONNX Runtime
    runs it; TensorRT's ONNX parser has no Det, so TensorRT refuses it in every precision (as TensorRT-RTX refuses
    slanet-table's Loop), while the Conv gives INT8 a layer to calibrate (3 channels in: none for FP8)."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Det", ["c"], ["det"], name="det")]
    graph = helper.make_graph(nodes, "conv_det", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, size, size])],
                              [helper.make_tensor_value_info("det", TensorProto.FLOAT, [batch, 4])],
                              [_init("w", rng.normal(0, 0.3, (4, 3, 3, 3)))])
    return _model(graph)


def attention(tokens=128, width=32, seed=9, moved=False) -> onnx.ModelProto:
    """One head of self-attention over `tokens` [batch, tokens, width]: q, k and v by MatMul, q k^T scaled,
    Softmax, its probabilities times v (`av`), an output projection. The scores are mild, so a row's weights
    spread over many tokens, as a ViT's do (about 1/tokens each). `moved`: the probabilities go through a
    Reshape there and back before `av`, as exporters split heads."""
    rng = np.random.default_rng(seed)
    inits = [_init(name, rng.normal(0, 1 / np.sqrt(width), (width, width))) for name in ("wq", "wk", "wv", "wo")]
    inits += [_init("scale", 1 / np.sqrt(width)), numpy_helper.from_array(np.array([-1, tokens * tokens], np.int64), "flat"),
              numpy_helper.from_array(np.array([-1, tokens, tokens], np.int64), "square")]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"], name="q"),
             helper.make_node("MatMul", ["x", "wk"], ["k"], name="k"),
             helper.make_node("MatMul", ["x", "wv"], ["v"], name="v"),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
             helper.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
             helper.make_node("Mul", ["qk", "scale"], ["scores"], name="scaled"),
             helper.make_node("Softmax", ["scores"], ["probs"], axis=-1, name="softmax")]
    if moved:
        nodes += [helper.make_node("Reshape", ["probs", "flat"], ["probs_flat"], name="heads_out"),
                  helper.make_node("Reshape", ["probs_flat", "square"], ["weights"], name="heads_in")]
    nodes += [helper.make_node("MatMul", ["weights" if moved else "probs", "v"], ["attended"], name="av"),
              helper.make_node("MatMul", ["attended", "wo"], ["y"], name="out")]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", tokens, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", tokens, width])], inits)
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
