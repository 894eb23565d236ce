"""GPTQ's error compensation for INT4 (trtpipe/calibrators/gptq.py) and its use in the AWQ pass."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
from trtpipe.calibrators.awq import output_error
from trtpipe.calibrators.gptq import gptq_int4, gram, inverse_hessian_factor
from trtpipe.calibrators.lowbit import int4_block_amax, quantize_int4
from trtpipe.graph.awq import awq
from trtpipe.graph.lowbit import int4_model
from trtpipe.runtime.onnxrt import OnnxRunner


def correlated_rows(tokens, k=256, rank=16, seed=0):
    """Activations whose channels mix a few common factors (as a transformer's hidden states do)."""
    rng = np.random.default_rng(seed)
    mix = rng.normal(size=(rank, k))
    return (rng.normal(size=(tokens, rank)) @ mix + 0.3 * rng.normal(size=(tokens, k))).astype(np.float32)


def test_gptq_beats_round_to_nearest_on_correlated_inputs_with_the_same_scales():
    rows = correlated_rows(4096)
    x, x_new = rows[:2048], rows[2048:]  # H from one half, judged on the other as well
    w = np.random.default_rng(1).normal(0, 0.05, (256, 64)).astype(np.float32)
    rtn = quantize_int4(w, 32)
    g = gptq_int4(w, gram(x), 32)
    np.testing.assert_array_equal(g.scales, rtn.scales)  # the same format: only the rounding differs
    assert np.abs(g.values).max() <= 7 and g.values.dtype == np.int8
    assert (g.values != rtn.values).mean() > 0.05  # a tenth of the values moved one step, against the error
    assert output_error(x, w, g.dequantize()) < 0.2 * output_error(x, w, rtn.dequantize())
    assert output_error(x_new, w, g.dequantize()) < 0.2 * output_error(x_new, w, rtn.dequantize())


def test_gptq_is_round_to_nearest_when_channels_are_uncorrelated():
    # A diagonal H has nothing to compensate with: each row's error moves nowhere.
    w = np.random.default_rng(2).normal(0, 0.05, (128, 32)).astype(np.float32)
    hessian = np.diag(np.random.default_rng(3).uniform(0.5, 4.0, 128))
    np.testing.assert_array_equal(gptq_int4(w, hessian, 64).values, quantize_int4(w, 64).values)


def test_gptq_keeps_a_given_clip_and_survives_dead_channels():
    x = correlated_rows(1024, k=128)
    x[:, 5] = 0.0  # a channel the data never lights up: H[5, 5] = 0
    w = np.random.default_rng(4).normal(0, 0.05, (128, 32)).astype(np.float32)
    amax = 0.8 * int4_block_amax(w, 32)
    g = gptq_int4(w, gram(x), 32, amax)
    np.testing.assert_array_equal(g.scales, quantize_int4(w, 32, amax).scales)
    u = inverse_hessian_factor(gram(x))
    assert np.all(np.isfinite(u)) and np.allclose(np.triu(u), u)
    with pytest.raises(ValueError, match="Hessian"):
        gptq_int4(w, gram(x[:, :64]), 32)


def low_rank_model(k=128, hidden=256, n=32, seed=0):
    """Gather from a low-rank table (correlated channels) -> MatMul -> Relu -> MatMul."""
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(512, 8)) @ rng.normal(size=(8, k)) + 0.2 * rng.normal(size=(512, k))
    inits = [models._init("emb", table), models._init("w0", rng.normal(0, 0.05, (k, hidden))),
             models._init("w1", rng.normal(0, 0.05, (hidden, n)))]
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["x"], name="embed"),
             helper.make_node("MatMul", ["x", "w0"], ["h0"], name="fc0"),
             helper.make_node("Relu", ["h0"], ["h1"], name="relu"),
             helper.make_node("MatMul", ["h1", "w1"], ["y"], name="fc1")]
    graph = helper.make_graph(nodes, "low_rank", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 8, n])], inits)
    return models._model(graph)


def run(model, feeds, tmp_path, name):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    with OnnxRunner(path, providers=["CPUExecutionProvider"]) as runner:
        return runner(feeds)["y"]


def test_awq_with_gptq_beats_awq_alone_in_the_int4_graph(tmp_path):
    model = low_rank_model()
    rng = np.random.default_rng(5)
    calib = [{"ids": rng.integers(0, 512, (16, 8))} for _ in range(8)]
    val = {"ids": rng.integers(0, 512, (32, 8))}
    ref = run(model, val, tmp_path, "fp32")
    plain, _ = awq(model, calib, block=32)
    compensated, summary = awq(model, calib, block=32, gptq=True)
    assert summary.error_ratio() < 0.7 * summary.error_ratio(gptq=False)
    # The folded weights are INT4 values times their scales: int4 rounds them back to exactly those.
    folded = {i.name: numpy_helper.to_array(i) for i in compensated.graph.initializer}
    for name in ("w0", "w1"):
        q = quantize_int4(folded[name], 32)
        assert np.mean(q.dequantize() == folded[name]) > 0.99
    errors = {}
    for label, scaled in (("awq", plain), ("gptq", compensated)):
        out = run(int4_model(scaled, embeddings=False)[0], val, tmp_path, label)
        errors[label] = float(np.linalg.norm(out.astype(np.float32) - ref))
    assert errors["gptq"] < 0.8 * errors["awq"]
