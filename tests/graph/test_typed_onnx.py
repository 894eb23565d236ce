"""Typed ONNX: every one runs in ONNX Runtime on a CPU and stays close to FP32."""

import numpy as np
import pytest

import models
from trtpipe.calibrators.amax import compute_amax
from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.calibrators.collect import collect_histograms
from trtpipe.calibrators.graph import quantized_activations
from trtpipe.graph import onnxio
from trtpipe.graph.half import to_half
from trtpipe.graph.qdq import insert_qdq
from trtpipe.graph.typed import unquantized_layers
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.targets import Precision

rng = np.random.default_rng(0)
CASES = {
    "conv_net": (models.conv_net(batch=8), {"input": rng.random((8, 3, 16, 16), np.float32)}),
    "mlp": (models.dynamic_mlp(), {"x": rng.normal(size=(32, 16)).astype(np.float32)}),
}


def run(model, feeds, tmp_path, name):
    path = tmp_path / f"{name}.onnx"
    onnxio.save(model, path)
    with OnnxRunner(path) as runner:
        return next(iter(runner(feeds).values())), runner.measured


def table_for(model, feeds, method="max"):
    hists = collect_histograms(model, quantized_activations(model), [feeds])
    return CalibrationTable({k: compute_amax(h, method) for k, h in hists.items()})


def cosine(a, b):
    return float((a * b).sum() / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("precision,minimum", [(Precision.FP16, 0.9999), (Precision.BF16, 0.999)])
def test_half_runs_and_stays_close(case, precision, minimum, tmp_path):
    model, feeds = CASES[case]
    ref, _ = run(model, feeds, tmp_path, "fp32")
    out, measured = run(to_half(model, precision), feeds, tmp_path, str(precision))
    assert not measured  # a typed ONNX in ONNX Runtime is a simulation
    assert cosine(out, ref) >= minimum


def test_bf16_of_an_opset_12_model_is_raised_to_opset_13_and_runs(tmp_path):
    """Cast takes bfloat16 from opset 13 on: at 12 ONNX Runtime refused the BF16 graph (PP-OCR's recognizer)."""
    old, feeds = models.conv_net(batch=8), CASES["conv_net"][1]
    old.opset_import[0].version = 12
    bf16 = to_half(old, Precision.BF16)
    assert onnxio.opset(bf16) == 13 and onnxio.opset(old) == 12  # the model given is not changed
    ref, _ = run(old, feeds, tmp_path, "fp32")
    out, _ = run(bf16, feeds, tmp_path, "bf16")
    assert cosine(out, ref) >= 0.999


def test_typed_precision_is_read_from_the_graph():
    model, feeds = CASES["conv_net"]
    table = table_for(model, feeds)
    assert onnxio.typed_precision(model) == "fp32"
    assert onnxio.typed_precision(to_half(model, Precision.FP16)) == "fp16"
    assert onnxio.typed_precision(to_half(model, Precision.BF16)) == "bf16"
    assert onnxio.typed_precision(insert_qdq(model, table, Precision.INT8)[0]) == "int8"
    assert onnxio.typed_precision(insert_qdq(model, table, Precision.FP8)[0]) == "fp8"


def test_half_keeps_io_fp32_and_casts_everything_else():
    from onnx import TensorProto

    half = to_half(CASES["conv_net"][0], Precision.FP16)
    assert half.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert half.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert all(init.data_type == TensorProto.FLOAT16 for init in half.graph.initializer)


def test_keep_runs_node_in_fp32():
    from onnx import TensorProto

    half = to_half(CASES["mlp"][0], Precision.FP16, keep=["softmax"])
    softmax = next(n for n in half.graph.node if n.name == "softmax")
    producer = {o: n for n in half.graph.node for o in n.output}[softmax.input[0]]
    assert producer.op_type == "Cast" and producer.attribute[0].i == TensorProto.FLOAT


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("precision", [Precision.INT8, Precision.FP8])
def test_qdq_runs_and_stays_close(case, precision, tmp_path):
    model, feeds = CASES[case]
    ref, _ = run(model, feeds, tmp_path, "fp32")
    typed, quantized = insert_qdq(model, table_for(model, feeds), precision)
    # Both leave the MLP's 32x8 head out, FP8 conv_net's two 16-channel convolutions (graph.qdq's small_layer)
    assert len(quantized) == (1 if case == "mlp" else 3 if precision is Precision.INT8 else 1)
    assert onnxio.opset(typed) >= (19 if precision is Precision.FP8 else 13)
    out, _ = run(typed, feeds, tmp_path, str(precision))
    assert cosine(out, ref) >= 0.995


def test_qdq_layout_matches_tensorrt_fusion():
    model, feeds = CASES["conv_net"]
    typed, _ = insert_qdq(model, table_for(model, feeds), Precision.INT8)
    nodes = {n.name: n for n in typed.graph.node}
    inits = {i.name: i for i in typed.graph.initializer}
    weight_dq = nodes["conv0.w/DequantizeLinear"]
    assert next(a.i for a in weight_dq.attribute if a.name == "axis") == 0
    assert list(inits["conv0.w__scale"].dims) == [16]  # per output channel
    assert list(inits["input__scale"].dims) == []  # per tensor
    assert "conv0.b" in nodes["conv0"].input  # bias stays float
    assert next(a.i for a in nodes["fc.w/DequantizeLinear"].attribute if a.name == "axis") == 0  # Gemm transB=1


def test_exclude_by_name_regex_and_op_type():
    model, feeds = CASES["conv_net"]
    table = table_for(model, feeds)
    assert insert_qdq(model, table, Precision.INT8, exclude=["fc"])[1] == ["conv0", "conv1"]
    assert insert_qdq(model, table, Precision.INT8, exclude=["conv[01]"])[1] == ["fc"]
    typed, quantized = insert_qdq(model, table, Precision.INT8, exclude=["Conv"])
    assert quantized == ["fc"]
    reason = "excluded (--exclude or the spec's [quantize] exclude)"
    assert unquantized_layers(typed) == [{"node": "conv0", "op": "Conv", "reason": reason},
                                         {"node": "conv1", "op": "Conv", "reason": reason}]


def test_a_layer_without_a_scale_is_left_unquantized_and_named():
    model, feeds = CASES["conv_net"]
    table = table_for(model, feeds)
    fc_input = next(n for n in model.graph.node if n.name == "fc").input[0]
    del table.amax[fc_input]
    typed, quantized = insert_qdq(model, table, Precision.INT8)
    assert quantized == ["conv0", "conv1"]
    assert unquantized_layers(typed) == [{"node": "fc", "op": "Gemm", "reason": f"no scale for '{fc_input}' in the cache"}]


def test_opset_is_raised_for_old_models():
    from onnx import helper

    model = helper.make_model(models.conv_net(batch=8).graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = onnxio.IR_VERSION
    feeds = CASES["conv_net"][1]
    typed, _ = insert_qdq(model, table_for(model, feeds), Precision.INT8)
    assert onnxio.opset(typed) == 13
    typed, _ = insert_qdq(model, table_for(model, feeds), Precision.FP8)
    assert onnxio.opset(typed) == 19


@pytest.mark.parametrize("precision", [Precision.INT8, Precision.FP8])
def test_unquantized_layers_compute_in_fp16_by_default(precision, tmp_path):
    from onnx import TensorProto

    from trtpipe.graph.typed import write_typed_onnx

    model, feeds = CASES["conv_net"]
    table = table_for(model, feeds)
    ref, _ = run(model, feeds, tmp_path, "fp32")
    # INT8 quantizes the convolutions only; FP8 the fc only (it leaves 8-channel convolutions out itself)
    exclude = ["fc"] if precision is Precision.INT8 else []
    mixed = onnxio.load(write_typed_onnx(model, precision, tmp_path / "mixed.onnx", table, exclude=exclude))
    plain = onnxio.load(write_typed_onnx(model, precision, tmp_path / "plain.onnx", table, exclude=exclude,
                                         unquantized="fp32"))
    types = {name: onnxio.tensor_types(m) for name, m in (("mixed", mixed), ("plain", plain))}
    # the residual Add and the pool before the excluded fc: FP16 in the mixed graph, FP32 in the other
    for tensor in ("res", "pool"):
        assert types["mixed"][tensor] == TensorProto.FLOAT16
        assert types["plain"][tensor] == TensorProto.FLOAT
    assert onnxio.typed_precision(mixed) == str(precision)
    for typed in (mixed, plain):
        out, _ = run(typed, feeds, tmp_path, "typed")
        assert cosine(out, ref) >= 0.995


def test_scales_for_fp16_graphs_are_positive_fp16_values_never_smaller():
    from trtpipe.graph.qdq import fp16_scale, quantize_weight

    scales = np.array([1e-9, 1e-7, 3.3e-5, 0.5, 1 / 127], np.float32)
    fitted = fp16_scale(scales)
    assert (fitted > 0).all() and (fitted >= scales).all()
    np.testing.assert_array_equal(fitted.astype(np.float16).astype(np.float32), fitted)  # exact in FP16
    # A channel of tiny weights (EfficientNet has them) still quantizes without clipping.
    weight = np.stack([np.full(9, 1e-6), np.linspace(-0.5, 0.5, 9)]).astype(np.float32)
    q, scale = quantize_weight(weight, 0, Precision.INT8, scales_fit_fp16=True)
    assert (scale > 0).all() and np.abs(q).max() <= 127
    np.testing.assert_allclose(q * scale[:, None], weight, rtol=0.02, atol=1e-7)


def test_a_typed_onnx_records_the_precision_it_was_written_for(tmp_path):
    """Its types alone can mislead (an FP16 graph whose weights sit in Constant nodes read as fp32)."""
    from trtpipe.graph.typed import write_typed_onnx

    path = write_typed_onnx(models.mlp(), Precision.FP16, tmp_path / "m.fp16.onnx", None)
    assert onnxio.typed_precision(onnxio.load(path)) == "fp16"
    assert onnxio.typed_precision(models.mlp()) == "fp32"
