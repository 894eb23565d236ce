"""Where Q/DQ goes beyond "every weight": the placement rules that keep INT8 plans small on TensorRT-RTX."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from conftest import needs_rtx
from helpers import cosine, run, table_for
from onnx import TensorProto, helper, numpy_helper

from trtpipe.calibrators.cache import render
from trtpipe.calibrators.graph import constant_names
from trtpipe.errors import NothingToQuantize
from trtpipe.graph import onnxio
from trtpipe.graph.half import convert
from trtpipe.graph.qdq import depthwise, float_constants, insert_qdq, weight_elements
from trtpipe.graph.typed import typed_graph, unquantized_layers
from trtpipe.quality.sensitivity import quantizable_layers
from trtpipe.targets import Precision

rng = np.random.default_rng(3)


def mobile_block(channels=32, size=64):
    """Conv 3->C, a depthwise 3x3 (group C), a pointwise C->C: a MobileNet block at a static shape."""
    def f(name, shape, std):
        return numpy_helper.from_array(rng.normal(0, std, shape).astype(np.float32), name)

    inits = [f("stem.w", (channels, 3, 3, 3), 0.3), f("stem.b", (channels,), 0.1),
             f("dw.w", (channels, 1, 3, 3), 0.3), f("dw.b", (channels,), 0.1),
             f("pw.w", (channels, channels, 1, 1), 0.2), f("pw.b", (channels,), 0.1)]
    nodes = [
        helper.make_node("Conv", ["x", "stem.w", "stem.b"], ["s"], pads=[1, 1, 1, 1], name="stem"),
        helper.make_node("Relu", ["s"], ["s_act"], name="stem_relu"),
        helper.make_node("Conv", ["s_act", "dw.w", "dw.b"], ["d"], pads=[1, 1, 1, 1], group=channels, name="dw"),
        helper.make_node("Relu", ["d"], ["d_act"], name="dw_relu"),
        helper.make_node("Conv", ["d_act", "pw.w", "pw.b"], ["y"], name="pw"),
    ]
    graph = helper.make_graph(nodes, "mobile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, channels, size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnxio.IR_VERSION
    onnx.checker.check_model(model)
    return model, {"x": rng.uniform(0, 1, (1, 3, size, size)).astype(np.float32)}


def dequantized_weights(model) -> set[str]:
    """Return the names of the layers whose weight input comes from a DequantizeLinear."""
    made_by = {out: node for node in model.graph.node for out in node.output}
    return {node.name for node in model.graph.node if node.op_type == "Conv"
            and made_by.get(node.input[1]) is not None and made_by[node.input[1]].op_type == "DequantizeLinear"}


def test_the_rule_names_grouped_convs_with_fewer_than_four_channels_per_group():
    model, _ = mobile_block()
    values = float_constants(model)
    assert [n.name for n in model.graph.node if depthwise(n, values)] == ["dw"]
    grouped = helper.make_node("Conv", ["x", "g.w"], ["y"], group=4)  # 4 channels per group: TensorRT-RTX takes it as is
    assert not depthwise(grouped, {"g.w": np.zeros((16, 4, 3, 3), np.float32)})


def test_depthwise_convs_stay_unquantized_unless_asked():
    model, feeds = mobile_block()
    table = table_for(model, feeds)
    typed, quantized = insert_qdq(model, table, Precision.INT8)
    assert quantized == ["stem", "pw"] and dequantized_weights(typed) == {"stem", "pw"}
    typed, quantized = insert_qdq(model, table, Precision.INT8, quantize_depthwise=True)
    assert quantized == ["stem", "dw", "pw"] and dequantized_weights(typed) == {"stem", "dw", "pw"}


def conv_chain(shapes: list[tuple[int, int, int]], size=16):
    """A chain of Convs named c0, c1...: (input channels, output channels, kernel side) each, Relu between."""
    inits, nodes, x = [], [], "x"
    for i, (cin, cout, k) in enumerate(shapes):
        inits.append(numpy_helper.from_array(rng.normal(0, 0.2, (cout, cin, k, k)).astype(np.float32), f"c{i}.w"))
        nodes += [helper.make_node("Conv", [x, f"c{i}.w"], [f"y{i}"], pads=[k // 2] * 4, name=f"c{i}"),
                  helper.make_node("Relu", [f"y{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, shapes[0][0], size, size])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, shapes[-1][1], size, size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnxio.IR_VERSION
    return model, {"x": rng.uniform(0, 1, (1, shapes[0][0], size, size)).astype(np.float32)}


def test_fp8_leaves_convs_of_few_channels_or_large_kernels_unquantized():
    """Model Optimizer's FP8 rule: at most 16 channels on either side, or a kernel over 32 elements."""
    model, feeds = conv_chain([(3, 32, 3), (32, 16, 3), (16, 17, 1), (17, 17, 5), (17, 32, 7), (32, 32, 3)])
    table = table_for(model, feeds)
    typed, quantized = insert_qdq(model, table, Precision.FP8)
    assert quantized == ["c3", "c5"] and dequantized_weights(typed) == {"c3", "c5"}
    assert [(layer["node"], layer["reason"]) for layer in unquantized_layers(typed)] == [
        ("c0", "fp8: 3 input and 32 output channels per group, at most 16 on one side"),
        ("c1", "fp8: 32 input and 16 output channels per group, at most 16 on one side"),
        ("c2", "fp8: 16 input and 17 output channels per group, at most 16 on one side"),
        ("c4", "fp8: a kernel of 49 elements, over 32")]
    assert insert_qdq(model, table, Precision.INT8)[1] == [f"c{i}" for i in range(6)]


def test_fp8_holds_conv_transposes_to_the_same_rule():
    """GTCRN's decoder: a transposed convolution of few channels stays in FP16 as a Conv does (weight [C_in, C_out/g, k...])."""
    def f(name, shape):
        return numpy_helper.from_array(rng.normal(0, 0.2, shape).astype(np.float32), name)

    inits = [f("c0.w", (32, 32, 3, 3)), f("wide.w", (32, 32, 2, 2)), f("narrow.w", (32, 8, 2, 2))]
    nodes = [helper.make_node("Conv", ["x", "c0.w"], ["y0"], pads=[1, 1, 1, 1], name="c0"),
             helper.make_node("Relu", ["y0"], ["r0"], name="relu0"),
             helper.make_node("ConvTranspose", ["r0", "wide.w"], ["y1"], strides=[2, 2], name="wide"),
             helper.make_node("Relu", ["y1"], ["r1"], name="relu1"),
             helper.make_node("ConvTranspose", ["r1", "narrow.w"], ["y"], strides=[2, 2], name="narrow")]
    graph = helper.make_graph(nodes, "decoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = onnxio.IR_VERSION
    table = table_for(model, {"x": rng.uniform(0, 1, (1, 32, 8, 8)).astype(np.float32)})
    typed, quantized = insert_qdq(model, table, Precision.FP8)
    assert quantized == ["c0", "wide"]
    assert [(layer["node"], layer["reason"]) for layer in unquantized_layers(typed)] == [
        ("narrow", "fp8: 32 input and 8 output channels per group, at most 16 on one side")]
    assert insert_qdq(model, table, Precision.INT8)[1] == ["c0", "wide", "narrow"]


@pytest.mark.parametrize("shapes", [[(3, 8, 3), (8, 16, 3), (16, 4, 7)], [(3, 32, 7), (32, 32, 7), (32, 8, 7)]],
                         ids=["few-channels", "large-kernels"])
def test_fp8_has_no_layer_in_a_model_of_small_convs(shapes, tmp_path):
    """Basic Pitch's case (every Conv at most 16 channels a side) and RivaGAN's decoder's (11x11 kernels, two
    stems of 3 channels): the rule does not step aside, so FP8 quantizes nothing and says to build FP16, before
    calibration reads any data. Quantized anyway, both zoo models failed where FP16 passes."""
    from trtpipe.calibrate import CalibrationOptions, calibrate

    model, feeds = conv_chain(shapes)
    table = table_for(model, feeds)
    with pytest.raises(NothingToQuantize, match=r"no layer to quantize in fp8: each of the model's convolutions \(3\) .*"
                                                r"build it in fp16 instead"):
        insert_qdq(model, table, Precision.FP8)
    assert quantizable_layers(model, table, precision=Precision.FP8) == []
    assert insert_qdq(model, table, Precision.INT8)[1] == ["c0", "c1", "c2"]
    path, cache = tmp_path / "small.onnx", tmp_path / "small.fp8.cache"
    onnx.save(model, path)
    with pytest.raises(NothingToQuantize, match=f"^{re.escape(str(path))}: no layer to quantize in fp8"):
        calibrate(path, tmp_path / "no-data", cache, CalibrationOptions(grid="fp8"))
    assert not cache.exists()
    wide, wide_feeds = conv_chain([(3, 32, 3), (32, 32, 3)])  # one wide Conv of a small kernel: it is quantized
    assert insert_qdq(wide, table_for(wide, wide_feeds), Precision.FP8)[1] == ["c1"]


@pytest.mark.parametrize("precision", [Precision.INT8, Precision.FP8])
def test_a_gemm_under_16_a_side_stays_unquantized_unless_nothing_else_would_be(precision):
    """Model Optimizer's small-GEMM rule: spindle-eeg's heads (51x3, 64x1) rounded in INT8 moved 1 window
    in 32 off FP32's spindles; left in FP16, 1 in 128. A model of narrow GEMMs alone is quantized whole."""
    import models

    feeds = {"x": rng.normal(size=(32, 16)).astype(np.float32)}
    head = models.mlp(batch=32, hidden=64, classes=3)
    typed, quantized = insert_qdq(head, table_for(head, feeds), precision)
    assert quantized == ["fc0"]
    assert [(layer["node"], layer["reason"]) for layer in unquantized_layers(typed)] == [
        ("fc1", "a GEMM of K 64 and N 3, under 16 on one side (Model Optimizer's small-GEMM rule)")]
    assert [n.name for n in quantizable_layers(head, table_for(head, feeds), precision=precision)] == ["fc0"]
    narrow = models.mlp(batch=32, hidden=8, classes=3)  # fc0 is 16x8: nothing would be left
    assert insert_qdq(narrow, table_for(narrow, feeds), precision)[1] == ["fc0", "fc1"]


@pytest.mark.parametrize("moved", [False, True])
def test_int8_leaves_a_softmaxs_probabilities_unquantized_and_fp8_does_not(moved):
    """An attention's weights times V: INT8's uniform grid rounds a weight of a row spread over 128 tokens
    to 0 or a step of 1/127; E4M3 holds it. Through the Reshapes an exporter splits heads with, too."""
    import models

    model = models.attention(moved=moved)
    table = table_for(model, {"x": rng.normal(0, 1, (8, 128, 32)).astype(np.float32)})
    typed, quantized = insert_qdq(model, table, Precision.INT8)
    read = "weights" if moved else "probs"
    assert quantized == ["q", "k", "v", "qk", "out"]
    assert [(layer["node"], layer["reason"]) for layer in unquantized_layers(typed)] == [
        ("av", f"int8: reads '{read}', a Softmax's probabilities, whose small values INT8's uniform grid rounds to 0")]
    assert [n.name for n in quantizable_layers(model, table, precision=Precision.INT8)] == quantized
    assert insert_qdq(model, table, Precision.FP8)[1] == ["q", "k", "v", "qk", "av", "out"]


@pytest.mark.parametrize("precision", [Precision.INT8, Precision.FP8])
def test_a_layer_reading_beyond_fp16_stays_unquantized_in_a_graph_computing_in_fp16(precision):
    """terrain-cm's UNet calibrates 73 of its 201 tensors beyond FP16 (up to 2.6e10): their scales were written
    as inf into the FP16 graph, and its FP8 gave NaN on every sample. Such a layer stays unquantized there;
    a graph computing in FP32 (--unquantized fp32) holds the scale and quantizes it."""
    import models

    model = models.mlp(batch=32, hidden=32, classes=32)
    table = table_for(model, {"x": rng.normal(0, 1, (32, 16)).astype(np.float32)})
    table.amax["x"] = 1e6  # fc0's input, as terrain-cm's decoder reads its concatenations
    typed, quantized = insert_qdq(model, table, precision, scales_fit_fp16=True)
    assert quantized == ["fc1"]
    [(node, reason)] = [(layer["node"], layer["reason"]) for layer in unquantized_layers(typed)]
    assert node == "fc0" and reason.startswith("reads 'x', calibrated to 1e+06, beyond what FP16 holds (16376")
    scales = [numpy_helper.to_array(i) for i in typed.graph.initializer if "scale" in i.name]
    assert scales and all(np.isfinite(s).all() for s in scales)
    assert insert_qdq(model, table, precision)[1] == ["fc0", "fc1"]


def test_the_probabilities_left_unquantized_keep_int8_closer_to_fp32(tmp_path, monkeypatch):
    """The rule's reason, measured: the same scales with the probabilities quantized lose about 6 dB."""
    import models
    from trtpipe.graph import qdq

    model = models.attention()
    feeds = {"x": rng.normal(0, 1, (8, 128, 32)).astype(np.float32)}
    table = table_for(model, feeds)
    reference, = run(model, feeds, tmp_path / "fp32.onnx")

    def snr(typed, name) -> float:
        out, = run(typed, feeds, tmp_path / name)
        return float(10 * np.log10(np.sum(reference ** 2) / np.sum((out - reference) ** 2)))

    kept = snr(insert_qdq(model, table, Precision.INT8)[0], "kept.onnx")
    monkeypatch.setattr(qdq, "probabilities", lambda graph: set())
    rounded = snr(insert_qdq(model, table, Precision.INT8)[0], "rounded.onnx")
    assert kept > rounded + 3, (kept, rounded)


def test_leaving_the_depthwise_conv_out_keeps_the_typed_graph_close(tmp_path):
    model, feeds = mobile_block()
    table = table_for(model, feeds)
    reference, = run(model, feeds, tmp_path / "fp32.onnx")
    typed = typed_graph(model, Precision.INT8, table).model
    out, = run(typed, feeds, tmp_path / "int8.onnx")
    assert cosine(out, reference) > 0.995


def int8_plan(model, table, path, **placement) -> bytes:
    """Return the sm_89 TensorRT-RTX plan of `model` in INT8 (the rest FP16), Q/DQ placed with `placement`."""
    from trtpipe.backend import TENSORRT_RTX, load
    from trtpipe.build import BuildOptions, build_engine
    from trtpipe.targets import Target

    typed, _ = insert_qdq(onnxio.with_opset(model, 19), table, Precision.INT8, scales_fit_fp16=True, **placement)
    onnx_path = onnxio.save(convert(typed, Precision.FP16).model, path)
    engine = path.with_suffix(".engine")
    build_engine(onnx_path, engine, Precision.INT8, BuildOptions(target=Target.parse("sm_89"), backend="tensorrt-rtx"),
                 load(TENSORRT_RTX), onnx_path)
    return engine.read_bytes()


@needs_rtx
def test_a_quantized_depthwise_conv_pads_the_plan_on_tensorrt_rtx(tmp_path):
    """TensorRT-RTX pads each group of an INT8 depthwise conv to 4 channels; at a static shape the
    padding is a constant of 3 * C * H * W zero bytes in the plan. Left in FP16, it is not there."""
    channels, size = 32, 64
    model, feeds = mobile_block(channels, size)
    table = table_for(model, feeds)
    sizes, zeros = {}, {}
    for name, quantize_depthwise in (("default", False), ("depthwise", True)):
        plan = int8_plan(model, table, tmp_path / f"{name}.onnx", quantize_depthwise=quantize_depthwise)
        sizes[name] = len(plan)
        zeros[name] = max((len(m.group(0)) for m in re.finditer(rb"\x00{1024,}", plan)), default=0)
        assert dequantized_weights(onnx.load(str(tmp_path / f"{name}.onnx"))) == \
            ({"stem", "dw", "pw"} if quantize_depthwise else {"stem", "pw"})
    padding = 3 * channels * size * size  # int8 zeros: 3 more channels for each of the C groups
    assert zeros["depthwise"] >= padding > 10 * zeros["default"], zeros
    assert sizes["depthwise"] - sizes["default"] > 0.9 * padding, sizes


def test_weight_elements_counts_the_constant_operand_only():
    model, _ = mobile_block()
    constants, values = constant_names(model), float_constants(model)
    assert {n.name: weight_elements(n, constants, values) for n in model.graph.node if n.op_type == "Conv"} == \
        {"stem": 32 * 3 * 3 * 3, "dw": 32 * 3 * 3, "pw": 32 * 32}
    scores = helper.make_node("MatMul", ["q", "k"], ["s"])  # attention's Q.K^T: two activations, no weight
    assert weight_elements(scores, constants, values) == 0


def test_layers_under_min_weights_stay_unquantized():
    precision = Precision.INT8  # FP8 leaves the 3-channel stem out whatever min_weights says
    model, feeds = mobile_block()  # stem: 864 weight elements, pw: 1024
    table = table_for(model, feeds)
    assert insert_qdq(model, table, Precision.FP8, min_weights=1024)[1] == ["pw"]
    assert insert_qdq(model, table, precision, min_weights=864)[1] == ["stem", "pw"]
    typed, quantized = insert_qdq(model, table, precision, min_weights=865)
    assert quantized == ["pw"] and dequantized_weights(typed) == {"pw"}
    assert unquantized_layers(typed) == [
        {"node": "stem", "op": "Conv", "reason": "864 weight elements, under min_weights 865"},
        {"node": "dw", "op": "Conv", "reason": "depthwise convolution: TensorRT-RTX pads a quantized one's groups to 4 channels"}]
    with pytest.raises(NothingToQuantize, match=r"each of the model's layers \(3\) is under min_weights 1025; "
                                                r"build it in fp16 instead, or lower min_weights \(\[quantize\] or --min-weights\)"):
        insert_qdq(model, table, precision, min_weights=1025)


@needs_rtx
def test_min_weights_takes_a_small_layers_kernel_out_of_the_tensorrt_rtx_plan(tmp_path):
    """A quantized layer costs the plan a generated kernel's CUDA source (~145 KB) and saves one byte
    per weight element: leaving the 864-weight stem in FP16 makes the plan smaller, not larger."""
    model, feeds = mobile_block()
    table = table_for(model, feeds)
    every = int8_plan(model, table, tmp_path / "every.onnx")
    large_only = int8_plan(model, table, tmp_path / "large.onnx", min_weights=865)
    assert len(every) - len(large_only) > 100_000, (len(every), len(large_only))


def block_with_cache_and_spec(tmp_path):
    """Return the mobile block saved as m.onnx, its INT8 cache, and a spec setting min_weights = 1000."""
    model, feeds = mobile_block()
    source = onnxio.save(model, tmp_path / "m.onnx")
    cache = tmp_path / "m.cache"
    cache.write_text(render(table_for(model, feeds)))
    spec = tmp_path / "model.toml"
    spec.write_text("[quantize]\nmin_weights = 1000\n")
    return source, cache, spec


def test_cli_min_weights_from_the_flag_then_the_spec(cli, tmp_path):
    source, cache, spec = block_with_cache_and_spec(tmp_path)
    for args, layers in (([], {"stem", "pw"}), (["--spec", spec], {"pw"}), (["--spec", spec, "--min-weights", "0"], {"stem", "pw"}),
                         (["--min-weights", "865"], {"pw"})):
        out = tmp_path / f"q{len(args)}.onnx"
        code, _, err = cli("quantize", source, "--precision", "int8", "--cache", cache, *args, "-o", out)
        assert code == 0, err
        assert dequantized_weights(onnx.load(str(out))) == layers, args
    spec.write_text("[quantize]\nmin_weights = -1\n")
    code, _, err = cli("quantize", source, "--precision", "int8", "--cache", cache, "--spec", spec, "-o", tmp_path / "bad.onnx")
    assert code == 2 and err.count("\n") == 1 and "min_weights" in err and not (tmp_path / "bad.onnx").exists()


@needs_rtx
def test_cli_build_takes_min_weights_from_the_spec_and_records_it(cli, tmp_path):
    source, cache, spec = block_with_cache_and_spec(tmp_path)
    code, _, err = cli("build", source, "--precision", "int8", "--cache", cache, "--spec", spec, "--target", "sm_89",
                       "--backend", "tensorrt-rtx", "-o", tmp_path / "out")
    assert code == 0, err
    assert dequantized_weights(onnx.load(str(tmp_path / "out" / "m.int8.onnx"))) == {"pw"}
    sidecar = json.loads((tmp_path / "out" / "m.int8.sm89.engine.json").read_text())
    assert sidecar["options"]["min_weights"] == 1000
    assert [(layer["node"], layer["reason"]) for layer in sidecar["unquantized_layers"]] == [
        ("stem", "864 weight elements, under min_weights 1000"),
        ("dw", "depthwise convolution: TensorRT-RTX pads a quantized one's groups to 4 channels")]
    code, out, _ = cli("inspect", tmp_path / "out" / "m.int8.sm89.engine")
    assert code == 0 and "reason=864 weight elements, under min_weights 1000" in out
