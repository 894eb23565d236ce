"""Q/DQ reaches every weight of Conv, ConvTranspose, MatMul and Gemm, with the output-channel axis right."""

import cases
import numpy as np
import onnx
import pytest
from conftest import needs_rtx
from helpers import build_engines, cosine, run, table_for
from onnx import TensorProto

from trtpipe.graph.qdq import insert_qdq, quantize_weight
from trtpipe.graph.typed import typed_graph
from trtpipe.targets import Precision

CASES = ["constant_node_weights", "conv_transpose", "matmul_weights_both_sides", "gemm_trans_b"]


def weight_dequantizers(model) -> dict[str, tuple[int | None, list[int]]]:
    """Return {layer: (DQ axis, scale shape)} for each layer whose weight is a DequantizeLinear of int8 or fp8."""
    inits = {i.name: i for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    found = {}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
            continue
        for name in node.input[:2]:
            dq = producers.get(name)
            if dq is not None and dq.op_type == "DequantizeLinear" and dq.input[0] in inits \
                    and inits[dq.input[0]].data_type in (TensorProto.INT8, TensorProto.FLOAT8E4M3FN):
                axis = next((a.i for a in dq.attribute if a.name == "axis"), None)
                found[node.name] = (axis, list(inits[dq.input[1]].dims))
    return found


def quantized_fraction(model) -> float:
    """Return the fraction of Conv/ConvTranspose/MatMul/Gemm weight elements stored as int8."""
    inits = {i.name: i for i in model.graph.initializer}
    int8 = sum(int(np.prod(i.dims)) for i in inits.values() if i.data_type == TensorProto.INT8 and i.dims)
    float_weights = 0
    for node in model.graph.node:
        if node.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm"):
            for name in node.input[:2]:
                if name in inits and inits[name].data_type in (TensorProto.FLOAT, TensorProto.FLOAT16):
                    float_weights += int(np.prod(inits[name].dims))
    return int8 / (int8 + float_weights)


@pytest.mark.parametrize("case,axes", [
    ("constant_node_weights", {"conv": (0, [16]), "fc": (1, [20])}),
    ("conv_transpose", {"pre": (0, [8]), "up": (1, [4])}),
    ("matmul_weights_both_sides", {"fc_right": (1, [24]), "fc_left": (0, [6])}),
    ("gemm_trans_b", {"fc_transposed": (0, [32]), "fc_plain": (1, [16])}),
])
def test_every_weight_gets_per_channel_qdq_on_its_output_axis(case, axes, tmp_path):
    model, feeds = getattr(cases, case)()
    table = table_for(model, feeds)
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    for unquantized in ("fp16", "fp32"):
        typed = typed_graph(model, Precision.INT8, table, unquantized=unquantized)
        assert weight_dequantizers(typed.model) == axes
        assert quantized_fraction(typed.model) == 1.0
        got, = run(typed.model, feeds, tmp_path / f"int8-{unquantized}.onnx")
        assert cosine(got, expected) >= 0.99


def test_without_cleanup_constant_node_weights_are_quantized_too():
    model, feeds = cases.constant_node_weights()
    typed, quantized = insert_qdq(model, table_for(model, feeds), Precision.INT8)
    assert quantized == ["conv", "fc"]
    assert weight_dequantizers(typed)["conv"] == (0, [16])  # straight from the Constant node
    assert not [n for n in typed.graph.node if n.op_type == "Constant" and n.name == "conv_w_const"]


def test_per_channel_scales_follow_the_axis():
    weight = np.stack([np.full((3, 2), 0.01), np.full((3, 2), 1.0)], axis=1).astype(np.float32)  # [3, 2ch, 2]
    q, scale = quantize_weight(weight, 1, Precision.INT8)
    np.testing.assert_allclose(scale, [0.01 / 127, 1.0 / 127], rtol=1e-6)
    assert np.abs(q).max() == 127
    q, scale = quantize_weight(weight, None, Precision.INT8)  # one scale for a 1-D MatMul operand
    assert scale.shape == () and np.isclose(scale, 1.0 / 127)


@needs_rtx
@pytest.mark.parametrize("case", CASES)
def test_int8_and_fp8_engines_build(case, tmp_path):
    model, feeds = getattr(cases, case)()
    # conv_transpose's two layers have 3 to 8 channels a side: FP8 has no layer of it (graph.qdq's FP8 rule)
    precisions = ["fp16", "int8"] + (["fp8"] if case != "conv_transpose" else [])
    results = build_engines(model, feeds, tmp_path, precisions)
    assert [r.info.precision for r in results] == precisions
    for result in results[1:]:
        assert result.engine.stat().st_size > 10_000
        assert weight_dequantizers(onnx.load(str(result.typed_onnx)))  # the engine was built from Q/DQ weights


@pytest.mark.parametrize("precision", [Precision.INT8, Precision.FP8])
def test_a_weight_only_a_loop_body_reads_survives_qdq(precision, tmp_path):
    """A TorchScript export's refinement Loop reads its weight from the outer scope: Q/DQ, quantizing the MatMul
    outside, dropped that weight as unread (ONNX Runtime refused the typed graph: 'topologically sorted')."""
    model, feeds = cases.loop_reading_outer_weight()
    expected, = run(model, feeds, tmp_path / "fp32.onnx")
    typed = typed_graph(model, precision, table_for(model, feeds))
    assert "w_step" in {i.name for i in typed.model.graph.initializer}
    got, = run(typed.model, feeds, tmp_path / f"{precision}.onnx")
    assert cosine(got, expected) >= 0.99


def test_a_weight_scale_beyond_fp16_is_refused_not_written_as_inf():
    """A scale over 65504 cast to FP16 is inf, which TensorRT builds and runs into NaN: refused in one line."""
    from trtpipe.errors import TrtpipeError

    with pytest.raises(TrtpipeError, match="beyond FP16's range.*--unquantized fp32"):
        quantize_weight(np.full((2, 4), 1e10, np.float32), 0, Precision.INT8, scales_fit_fp16=True)
    assert np.isfinite(quantize_weight(np.full((2, 4), 1e10, np.float32), 0, Precision.INT8)[1]).all()
