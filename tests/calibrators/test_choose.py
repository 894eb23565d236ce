"""The `auto` method's choice: its Q/DQ arithmetic, its layer-output error and its tie rules against
hand-computed cases, and on a real model against TensorRT's entropy."""

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtpipe.calibrators.choose import CANDIDATES, CLIP_FLOOR, choose, distinct, floored, layer_errors, method_of, quantize_signed

ROOT = Path(__file__).resolve().parents[2]


def test_int8_rounds_half_to_even_and_clips_at_127_steps():
    # amax 1.27: steps of 0.01. 0.5 and 1.5 steps go to the even step; beyond amax clips.
    x = np.array([0.004, 0.005, 0.015, -0.026, 2.0, -2.0], np.float32)
    got = quantize_signed(x, 1.27, "int8")
    np.testing.assert_allclose(got, [0.0, 0.0, 0.02, -0.03, 1.27, -1.27], atol=1e-7)


def test_fp8_is_e4m3_with_amax_at_448():
    # amax 448: scale 1. [1, 2) has steps of 1/8 and [16, 32) steps of 2 (halves go to the even
    # mantissa); 2**-9 is the least subnormal; 0.75 of it rounds up to it; past 448 saturates.
    x = np.array([1.0625, 1.1875, 17.0, 19.0, 2.0**-9, 0.75 * 2.0**-9, 500.0, -500.0], np.float32)
    got = quantize_signed(x, 448.0, "fp8")
    np.testing.assert_array_equal(got, [1.0, 1.25, 16.0, 20.0, 2.0**-9, 2.0**-9, 448.0, -448.0])


def test_fp8_scale_follows_amax():
    # amax 44.8: scale 0.1. 1.0625 is 10.625 units, in [8, 16) whose steps are 1: 11 units, 1.1.
    # -3.0 is -30 units, in [16, 32) whose steps are 2: kept.
    np.testing.assert_allclose(quantize_signed(np.array([1.0625, -3.0], np.float32), 44.8, "fp8"), [1.1, -3.0], rtol=1e-6)


def test_an_all_zero_amax_quantizes_to_zero():
    assert not quantize_signed(np.array([0.5, -1.0], np.float32), 0.0, "int8").any()


def test_least_error_wins_and_ties_go_to_the_first_candidate():
    assert choose({"entropy": 0.2, "max": 0.1, "mse": 0.3}) == "max"
    assert choose({"mse": 0.1, "max": 0.1, "entropy": 0.1}) == "entropy"
    assert choose({"mse": 0.1, "percentile 99.999": 0.1}) == "percentile 99.999"


def test_candidates_of_equal_amax_are_measured_once():
    assert distinct({"mse": 2.0, "max": 2.0, "entropy": 1.0, "percentile 99.99": 1.0}) == {"entropy": 1.0, "max": 2.0}


def test_a_candidate_names_its_method():
    assert [method_of(c) for c in CANDIDATES] == ["entropy", "max", "percentile", "percentile", "mse"]


def matmul_model(weight: np.ndarray) -> onnx.ModelProto:
    """x [n, 2] @ W [2, 2]: one layer, its weight a constant."""
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="layer")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
                              [numpy_helper.from_array(weight.astype(np.float32), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_the_error_is_the_relative_squared_error_of_the_layer_output():
    # W = I (exact on INT8's per-channel grid), so y = q(x). x = [[1, 0], [0, 0.2]]: amax 1.27 (steps of
    # 0.01) keeps both exactly; amax 0.635 (steps of 0.005) clips 1.0 to 0.635:
    # ||y_q - y||^2 / ||y||^2 = 0.365^2 / (1 + 0.2^2) = 0.128101.
    x = np.array([[1.0, 0.0], [0.0, 0.2]], np.float32)
    errors = layer_errors(matmul_model(np.eye(2)), {"x": {"max": 1.27, "entropy": 0.635}}, [{"x": x}], "int8")
    assert errors["x"]["max"] == pytest.approx(0.0, abs=1e-12)
    assert errors["x"]["entropy"] == pytest.approx(0.365**2 / 1.04, rel=1e-5)


def test_the_error_of_a_layer_whose_outputs_square_past_float32_is_finite():
    """Inception v1 as the onnx wheel ships it (every weight 0.02, so activations grow layer by layer): the
    squared norms, summed in float32, overflowed to inf ('RuntimeWarning: overflow encountered in dot' on
    every batch) and every candidate's error was inf / inf. They are summed in float64 now."""
    x = np.array([[3e19, 0.0], [0.0, 1e19]], np.float32)  # y = x: each square is past float32's 3.4e38
    with np.errstate(over="raise"):
        errors = layer_errors(matmul_model(np.eye(2)), {"x": {"max": 3e19, "entropy": 1.5e19}}, [{"x": x}], "int8")
    assert errors["x"]["max"] < 1e-4 and 0 < errors["x"]["entropy"] < 1
    assert choose(errors["x"]) == "max"


@pytest.mark.parametrize(("outlier_weight", "expected"), [(100.0, "max"), (0.01, "entropy")])
def test_the_layer_weights_decide_whether_clipping_an_outlier_pays(outlier_weight, expected):
    # Channel 0: 1000 values of 0.1234; channel 1: one 1.0. amax 0.127 (steps of 0.001) keeps 0.123
    # of 0.1234 and clips 1.0 to 0.127; amax 1.27 (steps of 0.01) keeps 0.12 and 1.0. Squared output
    # errors with W = diag(1, w): clipping 1000 * 0.0004^2 + (0.873 w)^2, max 1000 * 0.0034^2 = 0.01156.
    # w = 100: clipping costs 7621, max wins; w = 0.01: clipping costs 2.36e-4 and wins. A histogram of
    # x alone cannot tell these apart: the same tensor, two layers.
    x = np.zeros((1001, 2), np.float32)
    x[:1000, 0] = 0.1234
    x[1000, 1] = 1.0
    weight = np.diag([1.0, outlier_weight])
    errors = layer_errors(matmul_model(weight), {"x": {"entropy": 0.127, "max": 1.27}}, [{"x": x}], "int8")
    norm = 1000 * 0.1234**2 + outlier_weight**2
    clipped = 1000 * 0.0004**2 + (0.873 * outlier_weight) ** 2
    assert errors["x"]["entropy"] == pytest.approx(clipped / norm, rel=1e-3)
    assert errors["x"]["max"] == pytest.approx(1000 * 0.0034**2 / norm, rel=1e-3)
    assert choose(errors["x"]) == expected


def test_int8_never_clips_below_the_floor_percentile():
    candidates = {"entropy": 0.5, "max": 4.0, CLIP_FLOOR: 1.0, "percentile 99.999": 2.0, "mse": 1.5}
    assert floored(candidates, "entropy") == CLIP_FLOOR  # the least layer error, but it clips more
    assert floored(candidates, "mse") == "mse" and floored(candidates, "max") == "max"
    assert floored({"max": 0.0}, "max") == "max"  # an empty histogram has no percentile


def test_fp8_candidates_reach_past_the_tensors_max_and_round_inside_it_as_before():
    """Each FP8 candidate is raised by powers of two to FP8_HEADROOM times the tensor's max: every value a candidate
    held in E4M3's normal range rounds to the same point, the values it clipped are kept, and INT8's candidates are
    as they were."""
    from trtpipe.calibrators.amax import compute_amax
    from trtpipe.calibrators.choose import FP8_HEADROOM, candidate_amax, covering
    from trtpipe.calibrators.histogram import StreamingHistogram

    x = np.random.default_rng(0).standard_t(3, 100_000).astype(np.float32)  # heavy tails: clipping methods clip
    hist = StreamingHistogram()
    hist.update(x)
    int8, fp8 = candidate_amax(hist, "int8"), candidate_amax(hist, "fp8")
    found = {**int8, "mse": compute_amax(hist, "mse", "fp8")}  # MSE measures against the grid; the others do not
    assert any(amax < hist.max for amax in found.values())
    for name, amax in found.items():
        raised = fp8[name]
        assert raised / amax == 2.0 ** round(np.log2(raised / amax))
        assert FP8_HEADROOM * hist.max <= raised < 2 * FP8_HEADROOM * hist.max
        before, after = quantize_signed(x, amax, "fp8"), quantize_signed(x, raised, "fp8")
        normal = np.abs(x) * 448.0 / amax >= 2.0 ** -6 * raised / amax  # in the normal range of both grids
        inside = np.abs(x) <= amax
        np.testing.assert_array_equal(after[normal & inside], before[normal & inside])
        assert (np.abs(after[~inside] - x[~inside]) <= np.abs(before[~inside] - x[~inside])).all()
    assert covering(3.0, 10.0 / FP8_HEADROOM, "fp8") == 12.0 and covering(10.0, 10.0 / FP8_HEADROOM, "fp8") == 10.0
    assert covering(0.0, 1.0, "fp8") == 0.0 and covering(3.0, 10.0, "int8") == 3.0  # INT8's amax is its own


def test_a_tensor_feeding_two_layers_sums_their_errors():
    # Two MatMuls read x, with W = I and W = 2I: each has the relative error of the first case.
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "A"], ["a"], name="first"),
                               helper.make_node("MatMul", ["x", "B"], ["b"], name="second"),
                               helper.make_node("Add", ["a", "b"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
                              [numpy_helper.from_array(np.eye(2, dtype=np.float32), "A"),
                               numpy_helper.from_array(2 * np.eye(2, dtype=np.float32), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    x = np.array([[1.0, 0.0], [0.0, 0.2]], np.float32)
    errors = layer_errors(model, {"x": {"entropy": 0.635}}, [{"x": x}], "int8")
    assert errors["x"]["entropy"] == pytest.approx(2 * 0.365**2 / 1.04, rel=1e-5)


def test_auto_is_not_worse_than_entropy_on_ppocr_rec(tmp_path, cli):
    """PP-OCRv4's recognizer from its wheel, on text lines the zoo makes: entropy, TensorRT's method,
    clips the inputs of two 1x1 convolutions whose few large channels meet the largest weights."""
    import importlib.util

    from zoo import wheel_model

    model = wheel_model("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx")
    maker = importlib.util.spec_from_file_location("zoo_inputs", ROOT / "models" / "zoo" / "inputs.py")
    inputs = importlib.util.module_from_spec(maker)
    maker.loader.exec_module(inputs)
    for split, seed in (("calib", 1), ("val", 2)):
        (tmp_path / split).mkdir()
        inputs.make("text_lines", tmp_path / split, 16, seed, size=[48, 320])
    spec = tmp_path / "model.toml"
    text = (ROOT / "models" / "zoo" / "ppocr-rec" / "model.toml").read_text()
    spec.write_text(text.split("[data]")[0] + '[data]\ncalibration = "calib"\nvalidation = "val"\n')
    cosine = {}
    for method in ("entropy", "auto"):
        cache, typed = tmp_path / f"{method}.cache", tmp_path / f"{method}.onnx"
        assert cli("calibrate", model, "--spec", spec, "--method", method, "-o", cache)[0] == 0
        assert cli("quantize", model, "--precision", "int8", "--cache", cache, "--spec", spec, "-o", typed)[0] == 0
        code, out, _ = cli("validate", typed, "--baseline", model, "--spec", spec, "--json")
        assert code in (0, 1)
        cosine[method] = json.loads(out)["outputs"]["softmax_11.tmp_0"]["cosine"]
    assert cosine["auto"] >= cosine["entropy"]
    assert cosine["auto"] > 0.95  # entropy: 0.37 on the zoo's 32 lines
    chosen = json.loads((tmp_path / "auto.cache.json").read_text())["methods"]
    assert set(chosen.values()) <= set(CANDIDATES) and len(set(map(method_of, chosen.values()))) > 1


def _photo_net(tmp_path, thresholds: str = ""):
    """A conv net, 24 crops of scikit-image's astronaut, and a spec with `thresholds` appended."""
    from skimage import data

    import models

    models.save(models.conv_net(batch="N"), tmp_path / "m.onnx")
    photo = data.astronaut().astype(np.float32).transpose(2, 0, 1) / 255
    crops = np.stack([photo[:, r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] for r in range(4, 10) for c in range(8, 12)])
    models.save_batches(tmp_path / "data", crops, per_file=8)
    (tmp_path / "m.toml").write_text('[data]\ncalibration = "data"\nvalidation = "data"\n' + thresholds)
    return tmp_path / "m.onnx", tmp_path / "m.toml"


def test_auto_that_passes_at_the_outputs_is_kept_and_judged_alone(tmp_path, cli):
    model, spec = _photo_net(tmp_path)
    code, _out, err = cli("calibrate", model, "--spec", spec, "-o", tmp_path / "auto.cache")
    assert code == 0, err
    check = json.loads((tmp_path / "auto.cache.json").read_text())["outputs_check"]
    assert check["chosen"] == "auto" and list(check["margins"]) == ["auto"] and check["margins"]["auto"] >= 0
    code, out, _err = cli("calibrate", model, "--spec", spec, "-o", tmp_path / "auto.cache")
    assert code == 0 and "; judged at the outputs on 16 samples" in out and out.rstrip().endswith("kept auto")


def test_auto_that_fails_at_the_outputs_takes_whichever_judges_best(tmp_path, cli):
    """u2netp INT8: auto's least error at each layer gave mask IoU 0.18 where entropy alone gave 0.67.
    With a minimum nothing meets (snr_db 90), every method alone is judged and the best margin taken,
    and the cache then holds that method's own scales."""
    from trtpipe.calibrators.cache import read_cache

    model, spec = _photo_net(tmp_path, "[[outputs]]\nname = \"logits\"\ntask = \"generic\"\n[thresholds.int8]\nsnr_db = 90\n")
    code, _out, err = cli("calibrate", model, "--spec", spec, "-o", tmp_path / "auto.cache")
    assert code == 0, err
    check = json.loads((tmp_path / "auto.cache.json").read_text())["outputs_check"]
    margins = check["margins"]
    assert list(margins) == ["auto", "entropy", "max", "percentile", "mse"] and all(m < 0 for m in margins.values())
    assert check["chosen"] == max(margins, key=margins.get)
    if check["chosen"] != "auto":
        code, _out, err = cli("calibrate", model, "--spec", spec, "--method", check["chosen"], "-o", tmp_path / "one.cache")
        assert code == 0, err
        assert read_cache(tmp_path / "auto.cache").amax == read_cache(tmp_path / "one.cache").amax
        assert f"kept {check['chosen']}" in cli("calibrate", model, "--spec", spec, "-o", tmp_path / "auto.cache")[1]
