"""`auto`'s FP8 weight placement: each weight channel's largest |w| on the one of 16 positions in E4M3's
top octave that gives that channel's output the least error, checked against a brute force that runs
the layer once per position and reads each channel's output by hand; and its way through the cache's
sidecar into the typed ONNX."""

import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtpipe.calibrators.choose import choose_weight_steps
from trtpipe.graph import sessions
from trtpipe.graph.qdq import WEIGHT_STEPS, fp16_scale


def one_layer(op: str, weight: np.ndarray, weight_first: bool = False, **attributes) -> onnx.ModelProto:
    """x -> one `op` with the constant `weight` (its first input when `weight_first`) and, for a Conv, a bias."""
    inputs = ["W", "x"] if weight_first else ["x", "W"]
    inits = [numpy_helper.from_array(weight.astype(np.float32), "W")]
    if op in ("Conv", "ConvTranspose"):
        channels = weight.shape[0] if op == "Conv" else weight.shape[1] * attributes.get("group", 1)
        inits.append(numpy_helper.from_array(np.linspace(-1, 1, channels).astype(np.float32), "b"))
        inputs.append("b")
    graph = helper.make_graph([helper.make_node(op, inputs, ["y"], name="layer", **attributes)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def at_step(weight: np.ndarray, axis: int, step: int) -> np.ndarray:
    """The weight after FP8 Q/DQ with every channel's largest |w| at 448 x 2^(-step/16), written out by hand."""
    amax = np.abs(np.moveaxis(weight, axis, 0)).reshape(weight.shape[axis], -1).max(axis=1)
    shape = [1] * weight.ndim
    shape[axis] = -1
    scale = (amax / (448 * 2.0 ** (-step / 16))).astype(np.float32).reshape(shape)
    return (weight / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale


def brute_force(model, x: np.ndarray, axis: int, channel_errors) -> np.ndarray:
    """Each channel's best step: the layer run with every channel at each step, `channel_errors(y_q - y)`
    reading each weight channel's squared error from the output."""
    errors = brute_force_errors(model, x, axis, channel_errors)
    assert (errors.min(axis=0) < errors[0]).any(), "448 is every channel's best here: the case tests nothing"
    return errors.argmin(axis=0)


def brute_force_errors(model, x: np.ndarray, axis: int, channel_errors) -> np.ndarray:
    """[step, channel]: each weight channel's squared output error with every channel at each step."""
    weight = numpy_helper.to_array(model.graph.initializer[0])
    reference = sessions.session(model).run(None, {"x": x})[0]
    errors = []
    for step in range(WEIGHT_STEPS):
        placed = onnx.ModelProto()
        placed.CopyFrom(model)
        placed.graph.initializer[0].CopyFrom(numpy_helper.from_array(at_step(weight, axis, step), "W"))
        difference = sessions.session(placed).run(None, {"x": x})[0].astype(np.float64) - reference
        errors.append(channel_errors(difference ** 2))
    return np.array(errors)


rng = np.random.default_rng(11)
CASES = {
    # name: (model, input, the weight's channel axis, each weight channel's squared error from the output's)
    "Conv": (one_layer("Conv", rng.normal(0, 0.2, (6, 4, 3, 3)), pads=[1, 1, 1, 1]), rng.normal(0, 1, (2, 4, 7, 7)),
             0, lambda sq: sq.sum(axis=(0, 2, 3))),
    "grouped Conv": (one_layer("Conv", rng.normal(0, 0.2, (6, 2, 3, 3)), group=2), rng.normal(0, 1, (2, 4, 7, 7)),
                     0, lambda sq: sq.sum(axis=(0, 2, 3))),
    # a grouped ConvTranspose's output channel g*3+k comes from weight channel k of group g's rows
    "grouped ConvTranspose": (one_layer("ConvTranspose", rng.normal(0, 0.2, (4, 3, 2, 2)), group=2, strides=[2, 2]),
                              rng.normal(0, 1, (2, 4, 5, 5)), 1,
                              lambda sq: sq.sum(axis=(0, 2, 3)).reshape(2, 3).sum(axis=0)),
    "Gemm transB": (one_layer("Gemm", rng.normal(0, 0.2, (5, 8)), transB=1), rng.normal(0, 1, (40, 8)),
                    0, lambda sq: sq.sum(axis=0)),
    "MatMul": (one_layer("MatMul", rng.normal(0, 0.2, (8, 5))), rng.normal(0, 1, (3, 40, 8)),
               1, lambda sq: sq.sum(axis=(0, 1))),
    # a constant first operand A [M, K]: output row m comes from A's row m
    "MatMul of a constant A": (one_layer("MatMul", rng.normal(0, 0.2, (5, 8)), weight_first=True),
                               rng.normal(0, 1, (8, 40)), 0, lambda sq: sq.sum(axis=1)),
}


@pytest.mark.parametrize("case", CASES)
def test_each_weight_channel_takes_the_position_whose_output_error_is_least(case):
    model, x, axis, channel_errors = CASES[case]
    chosen = choose_weight_steps(model, [{"x": x.astype(np.float32)}])
    assert list(chosen) == ["W"]
    assert list(chosen["W"]) == list(brute_force(model, x.astype(np.float32), axis, channel_errors))


def test_a_weight_of_a_layer_not_named_is_not_placed():
    model, x, _, _ = CASES["Conv"]
    assert choose_weight_steps(model, [{"x": x.astype(np.float32)}], only={"another"}) == {}


def _photo_net(tmp_path):
    """The tests' conv net (FP8 quantizes its 16x16 Gemm, not its Convs of 16 channels or fewer) and crops of
    scikit-image's astronaut."""
    from skimage import data

    import models

    models.save(models.conv_net(batch="N"), tmp_path / "m.onnx")
    photo = data.astronaut().astype(np.float32).transpose(2, 0, 1) / 255
    crops = np.stack([photo[:, r * 16:(r + 1) * 16, c * 16:(c + 1) * 16] for r in range(4, 10) for c in range(8, 12)])
    models.save_batches(tmp_path / "data", crops, per_file=8)
    (tmp_path / "m.toml").write_text('[data]\ncalibration = "data"\nvalidation = "data"\n')
    return tmp_path / "m.onnx", tmp_path / "m.toml"


def weight_scales(typed) -> dict[str, np.ndarray]:
    model = onnx.load(typed)
    values = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    return {node.input[0].removesuffix("__quantized"): values[node.input[1]].astype(np.float64)
            for node in model.graph.node
            if node.op_type == "DequantizeLinear" and node.input[0].endswith("__quantized")}


def test_an_fp8_cache_carries_its_weight_positions_into_the_typed_onnx(tmp_path, cli):
    model, spec = _photo_net(tmp_path)
    code, out, err = cli("calibrate", model, "--spec", spec, "--precision", "fp8", "-o", tmp_path / "fp8.cache")
    assert code == 0, err
    written = json.loads((tmp_path / "fp8.cache.json").read_text())
    steps = written["weight_steps"]
    assert list(steps) == ["fc.w"] and len(steps["fc.w"]) == 16 and set(steps["fc.w"]) != {"0"}
    assert "fp8 weight channels" in written["auto_rule"]
    placed = sum(c != "0" for c in steps["fc.w"])
    assert out.rstrip().endswith(f"; FP8 weights: {placed} of 16 channels placed under 448")
    code, out, err = cli("inspect", tmp_path / "fp8.cache", "--json")
    assert code == 0, err
    assert json.loads(out)["weight_steps"] == steps
    code, _out, err = cli("quantize", model, "--spec", spec, "--precision", "fp8", "--cache", tmp_path / "fp8.cache",
                          "-o", tmp_path / "fp8.onnx")
    assert code == 0, err
    scales = weight_scales(tmp_path / "fp8.onnx")["fc.w"]
    weight = numpy_helper.to_array(next(i for i in onnx.load(model).graph.initializer if i.name == "fc.w"))
    amax = np.abs(weight).max(axis=1)  # [16 out, 16 in] read with transB: a channel is a row
    expected = amax / (448 * 2.0 ** (-np.array([int(c, 16) for c in steps["fc.w"]]) / 16))
    assert scales == pytest.approx(fp16_scale(expected), rel=1e-6)  # the graph computes in FP16: its scales are FP16's
    # the same cache without its sidecar is TensorRT's own: every channel's largest |w| at 448
    (tmp_path / "fp8.cache.json").unlink()
    code, _out, err = cli("quantize", model, "--precision", "fp8", "--cache", tmp_path / "fp8.cache",
                          "-o", tmp_path / "plain.onnx")
    assert code == 0, err
    assert weight_scales(tmp_path / "plain.onnx")["fc.w"] == pytest.approx(fp16_scale(amax / 448), rel=1e-6)


def test_fp8_tunes_cache_carries_the_positions_it_judged_into_the_graph_quantize_writes(tmp_path, cli):
    """tune judged its FP8 configurations with the weights placed, then wrote a cache without a sidecar:
    `quantize`/`build --cache` of it put every channel's largest |w| back on 448, another graph than the
    one its verdict was of."""
    model, spec = _photo_net(tmp_path)
    code, _out, err = cli("calibrate", model, "--spec", spec, "--precision", "fp8", "-o", tmp_path / "fp8.cache")
    assert code == 0, err
    code, _out, err = cli("tune", model, "--spec", spec, "--precision", "fp8", "--target", "sm_89", "--budget-min", 0.2,
                          "-o", tmp_path / "t" / "m.fp8.tuned.cache")
    assert code in (0, 1), err
    tuned = json.loads((tmp_path / "t" / "m.fp8.tuned.cache.json").read_text())
    assert tuned["options"]["grid"] == "fp8"
    assert tuned["weight_steps"] == json.loads((tmp_path / "fp8.cache.json").read_text())["weight_steps"]
    for cache, typed in ((tmp_path / "fp8.cache", "calibrated.onnx"), (tmp_path / "t" / "m.fp8.tuned.cache", "tuned.onnx")):
        code, _out, err = cli("quantize", model, "--spec", spec, "--precision", "fp8", "--cache", cache, "-o", tmp_path / typed)
        assert code == 0, err
    assert weight_scales(tmp_path / "tuned.onnx")["fc.w"] == pytest.approx(weight_scales(tmp_path / "calibrated.onnx")["fc.w"])
    code, _out, err = cli("quantize", model, "--precision", "int8", "--cache", tmp_path / "t" / "m.fp8.tuned.cache",
                          "-o", tmp_path / "int8.onnx")
    assert code == 2 and "fp8" in err, err  # its amax are FP8's: the sidecar says so


def test_positions_for_another_count_of_channels_leave_the_weight_at_448():
    """A sidecar's positions for a weight of another shape (a model re-exported under the same names) are not
    this weight's: they are left, not stretched or cut to fit."""
    from trtpipe.graph.qdq import chosen_steps
    from trtpipe.targets import Precision

    recorded = {"W": (3, 5)}
    weight = np.ones((4, 3), np.float32)
    assert chosen_steps(recorded, "W", weight, 0, Precision.FP8) is None
    assert chosen_steps(recorded, "W", weight[:2], 0, Precision.FP8) == (3, 5)
    assert chosen_steps(recorded, "W", weight[:2], 0, Precision.INT8) is None  # INT8's grid is even: no positions


def test_an_int8_cache_places_no_weights(tmp_path, cli):
    model, spec = _photo_net(tmp_path)
    code, _out, err = cli("calibrate", model, "--spec", spec, "-o", tmp_path / "int8.cache")
    assert code == 0, err
    assert "weight_steps" not in json.loads((tmp_path / "int8.cache.json").read_text())


@pytest.mark.parametrize("damage", [{"fc.w": "g0"}, {"fc.w": ""}, {"fc.w": 7}, ["0f"]])
def test_a_sidecar_whose_weight_positions_are_damaged_is_named(tmp_path, cli, damage):
    model, spec = _photo_net(tmp_path)
    code, _out, err = cli("calibrate", model, "--spec", spec, "--precision", "fp8", "-o", tmp_path / "fp8.cache")
    assert code == 0, err
    sidecar = tmp_path / "fp8.cache.json"
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "weight_steps": damage}))
    code, _out, err = cli("quantize", model, "--spec", spec, "--precision", "fp8", "--cache", tmp_path / "fp8.cache",
                         "-o", tmp_path / "fp8.onnx")
    assert code == 2 and "Traceback" not in err
    assert str(sidecar) in err and "weight_steps" in err and "recalibrate" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "fp8.onnx").exists()


def _shared(second_reads_transposed: bool) -> onnx.ModelProto:
    """x [n, 8] @ W [8, 8] -> a; then a @ W again, or W @ a^T (W read along its other axis)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["a"], name="first")]
    if second_reads_transposed:
        nodes += [helper.make_node("Transpose", ["a"], ["at"], name="t"),
                  helper.make_node("MatMul", ["W", "at"], ["y"], name="second")]
    else:
        nodes += [helper.make_node("MatMul", ["a", "W"], ["y"], name="second")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rng.normal(0, 0.3, (8, 8)).astype(np.float32), "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def test_a_weight_two_layers_read_along_one_axis_is_placed_once_for_both():
    model = _shared(second_reads_transposed=False)
    x = rng.normal(0, 1, (64, 8)).astype(np.float32)
    a = x @ numpy_helper.to_array(model.graph.initializer[0])
    chosen = choose_weight_steps(model, [{"x": x}])
    assert list(chosen) == ["W"] and len(chosen["W"]) == 8
    # both layers' errors decide: the brute force over the two layers' outputs, summed per column
    both = one_layer("MatMul", numpy_helper.to_array(model.graph.initializer[0]))
    first = brute_force_errors(both, x, 1, lambda sq: sq.sum(axis=0))
    second = brute_force_errors(both, a.astype(np.float32), 1, lambda sq: sq.sum(axis=0))
    assert list(chosen["W"]) == list((first + second).argmin(axis=0))


def test_a_weight_read_along_two_axes_keeps_448_and_the_typed_graph_runs(tmp_path):
    from trtpipe.calibrators.cache import CalibrationTable
    from trtpipe.graph.typed import typed_model
    from trtpipe.targets import Precision

    model = _shared(second_reads_transposed=True)
    x = rng.normal(0, 1, (64, 8)).astype(np.float32)
    assert choose_weight_steps(model, [{"x": x}]) == {}
    table = CalibrationTable(amax={"x": 4.0, "at": 8.0}, weight_steps={"W": tuple(range(8))})  # a stale sidecar's
    typed = typed_model(model, Precision.FP8, table)
    onnx.checker.check_model(typed, full_check=True)
    got = sessions.session(typed, optimization="none").run(None, {"x": x[:4]})[0]  # as validate runs a typed graph
    want = sessions.session(model).run(None, {"x": x[:4]})[0]
    assert np.isfinite(got).all() and np.abs(got - want).max() < 0.2 * np.abs(want).max()
