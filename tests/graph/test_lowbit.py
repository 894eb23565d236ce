"""INT4 weight-only and NVFP4: the formats against numpy references, the FP4 simulation bit-exact,
AWQ against round-to-nearest, and the typed ONNX built by TensorRT-RTX for the targets that take it."""

import numpy as np
import onnx
import pytest
from conftest import HAS_RTX, needs_rtx
from onnx import TensorProto, helper, numpy_helper

import models
from trtpipe.calibrators.awq import output_error, search_layer
from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.calibrators.lowbit import (
    E4M3_MAX,
    e2m1_round,
    e4m3_round,
    fp4_global_scale,
    fp4_quantize_dequantize,
    quantize_fp4,
    quantize_int4,
)
from trtpipe.errors import TrtpipeError
from trtpipe.graph import onnxio
from trtpipe.graph.awq import awq
from trtpipe.graph.lowbit import fp4_model, int4_model
from trtpipe.graph.simulate import fp4_for_cpu, fp4_qdq_nodes
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.targets import Precision, Target

E2M1_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)


def test_e2m1_rounds_to_nearest_ties_to_even_and_saturates():
    x = np.array([0.24, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.01, 6.0, 7.0, 1e6, -0.75, -5.0], np.float32)
    want = np.array([0, 0, 0.5, 1, 1, 2, 2, 4, 4, 6, 6, 6, 6, -1, -4], np.float32)
    np.testing.assert_array_equal(e2m1_round(x), want)


def test_e4m3_block_scales_saturate_instead_of_nan():
    x = np.array([448, 464, 465, 1e9, 2.0**-9, 2.0**-10, 2.0**-10 * 1.01], np.float32)
    np.testing.assert_array_equal(e4m3_round(x), [448, 448, 448, 448, 2.0**-9, 0, 2.0**-9])


def test_int4_blocks_take_the_block_max_to_seven():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(256, 8)).astype(np.float32)
    q = quantize_int4(w, 128)
    assert q.values.min() >= -7 and q.values.max() <= 7 and q.scales.shape == (2, 8) and q.scales.dtype == np.float16
    assert np.abs(q.values).max(axis=0).min() == 7  # every column's largest weight lands on the last level
    assert np.abs(q.dequantize() - w).max() <= q.scales.astype(np.float32).max() / 2 + 1e-6


def adversarial_blocks(rng) -> np.ndarray:
    """Blocks of 16 built to hit every corner of NVFP4 rounding: ties, subnormals, maxima, zeros."""
    blocks = [
        rng.normal(size=(64, 16)) * rng.uniform(1e-3, 1e3, (64, 1)),  # random, wide range of block scales
        np.tile(np.r_[E2M1_GRID, -E2M1_GRID], (4, 1)),  # exactly on the grid, amax 6
        np.tile(np.r_[6.0, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]] * np.r_[np.ones(8)], (4, 2)),  # ties with amax 6
        np.tile(np.r_[6.0, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]], (4, 2)) * 2.0**-9 * 3,  # ties, FP8 subnormal scales
        np.full((2, 16), 1e-12), np.zeros((2, 16)),  # scale underflows to 0; all-zero block
        np.tile(np.linspace(-1, 1, 16), (2, 1)) * 65504.0,  # the largest FP16 values
        np.tile(np.linspace(-1, 1, 16), (2, 1)) * 1e4,  # beyond the calibrated amax: FP8 scale saturates at 448
    ]
    return np.concatenate([np.asarray(b, np.float32).reshape(-1, 16) for b in blocks])


# 1.0: the tie blocks' scales are exact (6 -> 1, 3 * 2**-9 an FP8 subnormal), so values fall on exact ties;
# amax 1000: scales land anywhere, and blocks beyond 1000 saturate their FP8 scale.
@pytest.mark.parametrize("global_scale", [np.float32(1.0), fp4_global_scale(1000.0)])
def test_fp4_simulation_is_bit_exact_against_numpy(global_scale, tmp_path):
    x = adversarial_blocks(np.random.default_rng(1)).reshape(-1, 2, 32)  # rank 3, blocks along the last axis
    nodes, inits = fp4_qdq_nodes("x", "g", "y", "fp4_")
    inits.append(numpy_helper.from_array(np.array(global_scale, np.float32), "g"))
    graph = helper.make_graph(nodes, "fp4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    onnxio.save(model, tmp_path / "fp4.onnx")
    with OnnxRunner(tmp_path / "fp4.onnx", providers=["CPUExecutionProvider"]) as runner:
        got = runner({"x": x})["y"]
    want = fp4_quantize_dequantize(x, global_scale)
    assert np.array_equal(got, want)  # every element, +0 and -0 alike
    # and the reference is the format: every value is an E2M1 level times its block's scale
    blocks, ref = x.reshape(-1, 16), want.reshape(-1, 16)
    scale = e4m3_round(np.abs(blocks).max(axis=1) / 6 / global_scale) * global_scale
    levels = np.divide(ref, scale[:, None], out=np.zeros_like(ref), where=scale[:, None] > 0)
    assert np.isin(np.abs(levels), E2M1_GRID).all()
    assert (scale <= E4M3_MAX * global_scale).all() and (ref[scale == 0] == 0).all()


def test_fp4_weights_dequantize_through_their_scales():
    w = np.random.default_rng(2).normal(0, 0.02, (64, 48)).astype(np.float32)
    q = quantize_fp4(w)
    assert np.isin(np.abs(q.values), E2M1_GRID).all() and q.scales.max() <= E4M3_MAX
    assert np.float16(q.global_scale) == q.global_scale  # what the graph stores in FP16
    relative = np.linalg.norm(q.dequantize() - w) / np.linalg.norm(w)
    assert 0.03 < relative < 0.15  # four bits: about 8% error, but not nothing


def outlier_layer(seed=0, k=256, n=64, tokens=512):
    """Activations with a few outlier channels (as transformers have) and a weight to quantize."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(tokens, k)).astype(np.float32)
    x[:, rng.choice(k, 4, replace=False)] *= 40.0
    w = rng.normal(0, 0.05, (k, n)).astype(np.float32)
    return x, w


def test_awq_lowers_the_output_error_of_a_layer_with_outliers():
    rows, w = outlier_layer(tokens=1024)
    x, x_new = rows[:512], rows[512:]  # search on half, judge on the half it never saw too
    rtn = output_error(x, w, quantize_int4(w, 128).dequantize())
    result = search_layer(x, np.abs(x).mean(axis=0), [w], 128)
    assert result.rtn_error == pytest.approx(rtn, rel=1e-6)  # alpha 0 is round-to-nearest
    assert result.alpha > 0 and result.awq_error < 0.7 * rtn
    s = result.scales
    awq_w = quantize_int4(w * s[:, None], 128, result.clips[0]).dequantize()
    assert output_error(x_new / s, w * s[:, None], awq_w) < 0.7 * output_error(x_new, w, quantize_int4(w, 128).dequantize())


def two_layer_model(k=256, hidden=256, n=64, seed=0):
    rng = np.random.default_rng(seed)
    inits = [models._init("w0", rng.normal(0, 0.05, (k, hidden))), models._init("b0", rng.normal(0, 0.1, hidden)),
             models._init("w1", rng.normal(0, 0.05, (hidden, n))), models._init("emb", rng.normal(0, 1, (1024, k)))]  # MIN_TABLE_ROWS: quantized
    nodes = [helper.make_node("Gather", ["emb", "ids"], ["e"], name="embed"),
             helper.make_node("Mul", ["e", "gain"], ["x"], name="outliers"),
             helper.make_node("MatMul", ["x", "w0"], ["h0"], name="fc0"),
             helper.make_node("Add", ["h0", "b0"], ["h1"], name="bias0"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("MatMul", ["h2", "w1"], ["y"], name="fc1")]
    gain = np.ones(k, np.float32)
    gain[rng.choice(k, 4, replace=False)] = 30.0
    inits.append(models._init("gain", gain))
    graph = helper.make_graph(nodes, "two_layer", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 8, n])], inits)
    return models._model(graph)


def run(model, feeds, tmp_path, name):
    path = onnxio.save(model, tmp_path / f"{name}.onnx")
    with OnnxRunner(path, providers=["CPUExecutionProvider"]) as runner:
        return runner(feeds)["y"], runner.precision


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_awq_model_beats_round_to_nearest_end_to_end(tmp_path):
    model = two_layer_model()
    rng = np.random.default_rng(3)
    calib = [{"ids": rng.integers(0, 512, (16, 8))} for _ in range(4)]
    val = {"ids": rng.integers(0, 512, (32, 8))}
    ref, _ = run(model, val, tmp_path, "fp32")
    scaled, summary = awq(model, calib, block=128)
    assert summary.error_ratio() < 1.0 and set(summary.layers) == {"x", "h2"}
    rtn, precision = run(int4_model(model)[0], val, tmp_path, "rtn")
    awq_out, _ = run(int4_model(scaled)[0], val, tmp_path, "awq")
    assert precision == "int4"
    assert cosine(awq_out, ref) > cosine(rtn, ref)
    assert np.linalg.norm(awq_out - ref) < 0.8 * np.linalg.norm(rtn - ref)


def test_int4_model_is_the_issue_pattern():
    typed, report = int4_model(two_layer_model(), block=64)
    inits = {i.name: i for i in typed.graph.initializer}
    dqs = [n for n in typed.graph.node if n.op_type == "DequantizeLinear"]
    assert onnxio.opset(typed) == 21 and typed.ir_version == 10
    assert report.layers == ["fc0", "fc1"] and report.embeddings == ["embed"]
    for node in dqs:
        attrs = {a.name: a.i for a in node.attribute}
        assert len(node.input) == 2  # no zero point
        assert inits[node.input[0]].data_type == TensorProto.INT4 and inits[node.input[1]].data_type == TensorProto.FLOAT16
        assert attrs["block_size"] == 64
    assert report.quantized_bytes < 0.3 * report.fp16_bytes
    with pytest.raises(TrtpipeError, match="--block-size 48"):
        int4_model(two_layer_model(), block=48)


@pytest.mark.parametrize("alpha, quantized", [(None, True), (1.0, True), (0.5, False)])
def test_a_gemm_stating_alpha_1_is_quantized_as_one_without_it(alpha, quantized):
    """torch.onnx writes alpha = 1.0 on every Linear's Gemm: openWakeWord's three were left FP16, and INT4
    said there was nothing to quantize."""
    weight = np.random.default_rng(0).normal(0, 0.05, (64, 256))
    gemm = helper.make_node("Gemm", ["x", "w"], ["y"], name="fc", transB=1, **({} if alpha is None else {"alpha": alpha}))
    graph = helper.make_graph([gemm], "linear", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 256])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 64])], [models._init("w", weight)])
    if quantized:
        assert int4_model(models._model(graph))[1].layers == ["fc"]
    else:
        with pytest.raises(TrtpipeError, match="nothing was quantized to int4"):
            int4_model(models._model(graph))


def test_fp4_model_needs_activation_amax():
    with pytest.raises(TrtpipeError, match="calibrate this model"):
        fp4_model(two_layer_model(), CalibrationTable({}))


def test_fp4_model_simulates_close_to_fp32(tmp_path):
    model = two_layer_model()
    val = {"ids": np.random.default_rng(4).integers(0, 512, (8, 8))}
    ref, _ = run(model, val, tmp_path, "fp32")
    typed, report = fp4_model(model, CalibrationTable({"x": 120.0, "h2": 60.0}))
    assert report.layers == ["fc0", "fc1"]
    assert any(n.op_type == "TRT_FP4DynamicQuantize" and n.domain == "trt" for n in typed.graph.node)
    simulated = fp4_for_cpu(typed)
    assert not any(i.data_type == TensorProto.FLOAT4E2M1 for i in simulated.graph.initializer)
    out, precision = run(typed, val, tmp_path, "fp4")
    assert precision == "fp4" and 0.97 < cosine(out, ref) < 0.9999


def build(path, sm, shapes=((1, 8), (4, 8), (8, 8))):
    from trtpipe.backend import TENSORRT_RTX, load
    from trtpipe.build import BuildOptions, build_engine

    options = BuildOptions(target=Target.parse(sm), backend="tensorrt-rtx", shapes={"ids": shapes})
    return build_engine(path, path.with_suffix(f".{sm}.engine"), Precision.INT4, options, load(TENSORRT_RTX), path)


@needs_rtx
@pytest.mark.parametrize("precision,builds,refused", [
    ("int4", ["sm_80", "sm_89", "sm_120"], {"sm_75": "HW-specific datatypes: int4"}),
    ("fp4", ["sm_120"], {"sm_89": "fp4_e2m1"}),
])
def test_tensorrt_rtx_builds_the_pattern_where_it_runs(precision, builds, refused, tmp_path, capfd):
    model = two_layer_model()
    typed = (int4_model(model)[0] if precision == "int4"
             else fp4_model(model, CalibrationTable({"x": 120.0, "h2": 60.0}))[0])
    path = onnxio.save(typed, tmp_path / f"m.{precision}.onnx")
    for sm in builds:
        info = build(path, sm)
        assert (tmp_path / info.engine).stat().st_size > 0
    for sm, reason in refused.items():
        with pytest.raises(TrtpipeError) as err:
            build(path, sm)
        assert "\n" not in str(err.value) and "failed to build" in str(err.value)
        assert reason in str(err.value)  # TensorRT's own words, quoted: the planning table's fact still holds


@pytest.mark.parametrize("target,backend,int4,fp4", [
    ("T4", "tensorrt", "compute capability 8.0", "compute capability 10.0"),
    ("A100", "tensorrt-rtx", "", "compute capability 10.0"),
    ("L4", "tensorrt", "", "compute capability 10.0"),
    ("RTX5090", "tensorrt-rtx", "", ""),
    ("B200", "tensorrt", "", ""),
    ("B200", "tensorrt-rtx", "does not run on compute capability 10.0", "does not run on compute capability 10.0"),
])
def test_plan_says_which_targets_take_int4_and_fp4(cli, target, backend, int4, fp4):
    import json

    code, out, _ = cli("plan", "--target", target, "--backend", backend, "--json")
    assert code == 0
    rows = {r["precision"]: r for r in json.loads(out)["precisions"]}
    auto = json.loads(out)["auto"]
    for precision, why in (("int4", int4), ("fp4", fp4)):
        assert rows[precision]["supported"] == (why == "") and why in rows[precision]["reason"]
        assert (precision in auto) == (why == "")


def test_cli_refuses_fp4_for_ada_in_one_line(cli, tmp_path):
    model = models.save(two_layer_model(), tmp_path / "m.onnx")
    code, _, err = cli("build", model, "--precision", "fp4", "--target", "sm_89", "--backend", "tensorrt-rtx",
                       "-o", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1 and "fp4 needs compute capability 10.0" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not HAS_RTX, reason="tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
def test_cli_awq_then_int4_build(cli, tmp_path):
    model = models.save(two_layer_model(), tmp_path / "m.onnx")
    data = tmp_path / "calib"
    data.mkdir()
    rng = np.random.default_rng(5)
    for i in range(2):
        np.save(data / f"{i}.npy", rng.integers(0, 512, (16, 8)))
    code, out, err = cli("awq", model, "--data", data, "--block-size", "64", "-o", tmp_path / "awq" / "m.onnx")
    assert code == 0, err
    assert "round-to-nearest" in out
    scaled = onnx.load(str(tmp_path / "awq" / "m.onnx"))
    assert {p.key: p.value for p in scaled.metadata_props}["trtpipe.awq.block_size"] == "64"
    code, out, err = cli("build", tmp_path / "awq" / "m.onnx", "--precision", "int4", "--target", "sm_86",
                         "--backend", "tensorrt-rtx", "--shapes", "ids:1x8/4x8/8x8", "-o", tmp_path / "out")
    assert code == 0, err
    typed = onnx.load(str(tmp_path / "out" / "m.int4.onnx"))
    assert {a.i for n in typed.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute
            if a.name == "block_size"} == {64}


def test_cli_round_to_nearest_baseline_only_records_the_block(cli, tmp_path):
    original = two_layer_model()
    model = models.save(original, tmp_path / "m.onnx")
    code, out, err = cli("awq", model, "--block-size", "32", "--round-to-nearest", "-o", tmp_path / "rtn.onnx")
    assert code == 0 and "nothing searched" in out, err
    rtn = onnx.load(str(tmp_path / "rtn.onnx"))
    assert {p.key: p.value for p in rtn.metadata_props}["trtpipe.awq.block_size"] == "32"
    assert [i.raw_data for i in rtn.graph.initializer] == [i.raw_data for i in original.graph.initializer]
    typed, _ = int4_model(rtn)
    assert {a.i for n in typed.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute
            if a.name == "block_size"} == {32}


def dq_blocks(path) -> set[int]:
    typed = onnx.load(str(path))
    return {a.i for n in typed.graph.node if n.op_type == "DequantizeLinear" for a in n.attribute if a.name == "block_size"}


def test_cli_block_size_from_the_flag_then_the_spec_then_128(cli, tmp_path):
    model = models.save(two_layer_model(), tmp_path / "m.onnx")
    spec = tmp_path / "model.toml"
    spec.write_text("[quantize]\nblock_size = 32\n")
    for args, block in ((["--block-size", "64"], 64), (["--spec", spec], 32), ([], 128),
                        (["--spec", spec, "--block-size", "128"], 128)):
        out = tmp_path / f"q{len(args)}_{block}.onnx"
        code, _, err = cli("quantize", model, "--precision", "int4", *args, "-o", out)
        assert code == 0, err
        assert dq_blocks(out) == {block}


def test_cli_block_size_refused_in_one_line(cli, tmp_path):
    model = models.save(two_layer_model(), tmp_path / "m.onnx")
    code, _, err = cli("quantize", model, "--precision", "int4", "--block-size", "48", "-o", tmp_path / "q.onnx")
    assert code == 2 and err.count("\n") == 1 and "--block-size" in err and "48" in err
    spec = tmp_path / "model.toml"
    spec.write_text("[quantize]\nblock_size = 48\n")
    code, _, err = cli("quantize", model, "--precision", "int4", "--spec", spec, "-o", tmp_path / "q.onnx")
    assert code == 2 and err.count("\n") == 1 and "block_size is 48" in err and "32, 64, 128" in err
    # An AWQ model searched for blocks of 32 is not quantized in others: its clips were chosen for 32.
    assert cli("awq", model, "--block-size", "32", "--round-to-nearest", "-o", tmp_path / "rtn.onnx")[0] == 0
    for command in (["quantize", tmp_path / "rtn.onnx", "-o", tmp_path / "q.onnx"],
                    ["build", tmp_path / "rtn.onnx", "--target", "sm_89", "--backend", "tensorrt-rtx",
                     "--shapes", "ids:1x8/4x8/8x8", "-o", tmp_path / "out"]):
        code, _, err = cli(*command, "--precision", "int4", "--block-size", "64")
        assert code == 2 and err.count("\n") == 1 and "AWQ-scaled for blocks of 32" in err, err
    assert not (tmp_path / "q.onnx").exists() and not (tmp_path / "out").exists()


@pytest.mark.skipif(not HAS_RTX, reason="tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
def test_cli_build_takes_block_size(cli, tmp_path):
    model = models.save(two_layer_model(), tmp_path / "m.onnx")
    code, _, err = cli("build", model, "--precision", "int4", "--block-size", "32", "--target", "sm_80",
                       "--backend", "tensorrt-rtx", "--shapes", "ids:1x8/4x8/8x8", "-o", tmp_path / "out")
    assert code == 0, err
    assert dq_blocks(tmp_path / "out" / "m.int4.onnx") == {32}
    assert (tmp_path / "out" / "m.int4.sm80.engine").stat().st_size > 0


def two_table_model(rows=1024, width=64, n=32, seed=0):
    """A word table (rows x width) and a 2-row token-type table added together, then a MatMul."""
    rng = np.random.default_rng(seed)
    inits = [models._init("word", rng.normal(0, 1, (rows, width))), models._init("types", rng.normal(0, 1, (2, width))),
             models._init("w", rng.normal(0, 0.05, (width, n))), models._init("zero", np.zeros((1, 8)))]
    nodes = [helper.make_node("Gather", ["word", "ids"], ["e"], name="word_lookup"),
             helper.make_node("Cast", ["zero"], ["type_ids"], to=TensorProto.INT64, name="types_zero"),
             helper.make_node("Gather", ["types", "type_ids"], ["t"], name="type_lookup"),
             helper.make_node("Add", ["e", "t"], ["x"], name="sum"),
             helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "tables", [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 8, n])], inits)
    return models._model(graph)


def test_small_tables_stay_fp16_and_the_word_table_is_clipped_to_its_least_error():
    from trtpipe.graph.awq import clip_tables
    from trtpipe.graph.lowbit import MIN_TABLE_ROWS

    model = two_table_model(rows=MIN_TABLE_ROWS)
    _, report = int4_model(model, block=32)
    assert report.embeddings == ["word_lookup"]  # every token reads the 2-row table: a bias, kept FP16
    original = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    assert clip_tables(model, 32) == ["word"]
    clipped_ = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    np.testing.assert_array_equal(clipped_["types"], original["types"])
    word = original["word"]

    def error(table):  # INT4 in blocks along each row, against the original values
        return float(np.sum((quantize_int4(table.T, 32).dequantize().T - word) ** 2))

    assert error(clipped_["word"]) < 0.95 * error(word)
