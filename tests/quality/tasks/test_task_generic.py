"""The generic judge sees magnitude: a YOLOv8-style head whose class channels are scaled by 0.2 (boxes
exact), one channel offset or one zeroed fails, while the honest FP16 and INT8 typed ONNX pass (its one Conv,
3 channels in and an 8x8 kernel, is no layer FP8 quantizes)."""

import json

import numpy as np
import onnx
import pytest
from damage import offset_channel, scale_channels, zero_channel

from models import save, save_batches, yolo_like
from trtpipe.quality.validate import DEFAULT_THRESHOLDS, snr_for_cosine

CLASSES = 18
WIDTH = 4 + CLASSES


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    """The FP32 head, its typed FP16/INT8 ONNX, a spec judging output0 as generic, and 64 images."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("head")
    save(yolo_like(CLASSES), root / "head.onnx")
    rng = np.random.default_rng(0)
    save_batches(root / "calib", rng.uniform(0, 1, (64, 3, 64, 64)).astype(np.float32))
    save_batches(root / "val", rng.uniform(0, 1, (64, 3, 64, 64)).astype(np.float32))
    (root / "model.toml").write_text('task = "generic"\n[data]\ncalibration = "calib"\nvalidation = "val"\n')
    for precision in ("fp16", "int8"):
        steps = [["quantize", root / "head.onnx", "--precision", precision, "-o", root / f"head.{precision}.onnx"]]
        if precision != "fp16":
            steps.insert(0, ["calibrate", root / "head.onnx", "--spec", root / "model.toml", "--precision", precision,
                             "-o", root / f"head.{precision}.cache"])
            steps[1] += ["--cache", root / f"head.{precision}.cache"]
        for args in steps:
            result = CliRunner().invoke(main, [str(a) for a in args])
            assert result.exit_code == 0, result.output
    return root


def _validate(cli, head, candidate):
    code, out, err = cli("validate", candidate, "--baseline", head / "head.onnx", "--spec", head / "model.toml", "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_channel_snr_minimum_is_what_the_cosine_minimum_implies():
    # noise uncorrelated with the signal at SNR S gives cosine 1/sqrt(1 + 1/S)
    for precision, limits in DEFAULT_THRESHOLDS.items():
        snr = 10 ** (limits["channel_snr_db_min"] / 10)
        assert limits["channel_cosine_min"] - 1e-3 < 1 / np.sqrt(1 + 1 / snr) <= limits["channel_cosine_min"], precision
    assert snr_for_cosine(0.95) == 9.6 and snr_for_cosine(0.999) == 26.9


@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_honest_typed_onnx_passes(cli, head, precision):
    code, report = _validate(cli, head, head / f"head.{precision}.onnx")
    metrics = report["outputs"]["output0"]
    assert code == 0 and report["passed"], report["decided_by"]
    assert metrics["channel_snr_db_min"] >= DEFAULT_THRESHOLDS[precision]["channel_snr_db_min"]
    assert "channel_snr_db_min" in {c["metric"] for c in report["checks"]}


@pytest.mark.parametrize("damage,channel", [
    (lambda m: scale_channels(m, "output0", WIDTH, {4 + c: 0.2 for c in range(CLASSES)}), None),  # the YOLOv8n
    (lambda m: offset_channel(m, "output0", 6, 0.3, WIDTH), 6),  # a class score 0.3 too high everywhere
    (lambda m: zero_channel(m, "output0", 9, WIDTH), 9),
])
def test_damaged_channel_fails_on_its_snr(cli, head, damage, channel):
    honest = onnx.load(str(head / "head.int8.onnx"))
    save(damage(honest), head / "damaged.int8.onnx")
    code, report = _validate(cli, head, head / "damaged.int8.onnx")
    metrics = report["outputs"]["output0"]
    failed = {c["metric"] for c in report["checks"] if not c["passed"]}
    assert code == 1 and not report["passed"]
    assert "channel_snr_db_min" in failed and metrics["channel_snr_db_min"] < 3.0
    assert metrics["cosine"] > 0.99  # the boxes dominate the tensor: its cosine alone passes all three
    if channel is not None:
        assert metrics["worst_snr_channel"] == channel
    else:
        assert metrics["worst_snr_channel"] >= 4 and metrics["channel_cosine_min"] > 0.95  # scale: cosine is blind


def _bits(op: str, value: float, width: int):
    """A model whose `bits` [N, width] are its input `x` with `value` added (op "Add") or multiplied by it ("Mul")."""
    from onnx import TensorProto, helper, numpy_helper

    import models

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])
    y = helper.make_tensor_value_info("bits", TensorProto.FLOAT, ["N", width])
    b = numpy_helper.from_array(np.array([value], np.float32), "b")
    return models._model(helper.make_graph([helper.make_node(op, ["x", "b"], ["bits"])], "g", [x], [y], [b]))

def test_decisions_at_a_threshold_are_judged_where_the_cosine_passes(cli, tmp_path):
    """rivagan-dec's 32 watermark bits, each set above 0.52: FP8 passed validate at cosine 0.996 and changed
    9 of 64 messages. With `threshold` on the output, the samples whose every decision is FP32's are judged."""
    save(_bits("Add", 0.0, 512), tmp_path / "m.onnx")
    save(_bits("Add", 0.001, 512), tmp_path / "off.onnx")
    save_batches(tmp_path / "data", np.random.default_rng(0).uniform(-2, 3, (64, 512)).astype(np.float32))
    spec = tmp_path / "m.toml"
    spec.write_text('[[outputs]]\nname = "bits"\ntask = "generic"\nlayout = "NC"\n')
    code, out, err = cli("validate", tmp_path / "off.onnx", "--baseline", tmp_path / "m.onnx", "--data", tmp_path / "data",
                         "--spec", spec, "--json")
    assert code == 0, err  # FP32's own minimums see an offset of 0.001 as noise
    assert "decision_agreement" not in json.loads(out)["outputs"]["bits"]
    spec.write_text(spec.read_text() + "threshold = 0.52\n")
    code, out, err = cli("validate", tmp_path / "off.onnx", "--baseline", tmp_path / "m.onnx", "--data", tmp_path / "data",
                         "--spec", spec, "--json")
    bits = json.loads(out)["outputs"]["bits"]
    x = np.random.default_rng(0).uniform(-2, 3, (64, 512)).astype(np.float32)
    agree = ((x + np.float32(0.001) > 0.52) == (x > 0.52)).all(axis=1)
    assert code == 1 and bits["decision_agreement"] == pytest.approx(agree.mean()) and agree.mean() < 0.99
    assert bits["decisions_flipped"] == int(((x + np.float32(0.001) > 0.52) != (x > 0.52)).sum()) > 0



def test_an_answer_read_at_a_threshold_is_judged_by_it_and_the_snr_beside_it_where_named(cli, tmp_path):
    """SwiftF0's FP16 failed on a cosine of 0.9998 while its pitches and voicing were FP32's: a spec that says how
    the answer is read is judged by that reading. The relative metrics are still reported, and a minimum the
    user names for one of them is judged as before."""
    save(_bits("Mul", 1.0, 32), tmp_path / "m.onnx")
    save(_bits("Mul", 3.0, 32), tmp_path / "tripled.onnx")  # every value on the same side of 0, three times as far
    save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (64, 32)).astype(np.float32))
    spec = tmp_path / "m.toml"
    args = ("validate", tmp_path / "tripled.onnx", "--baseline", tmp_path / "m.onnx", "--data", tmp_path / "data",
            "--spec", spec, "--json")
    spec.write_text('[[outputs]]\nname = "bits"\ntask = "generic"\nlayout = "NC"\n')
    code, out, _ = cli(*args)
    assert code == 1 and json.loads(out)["outputs"]["bits"]["channel_snr_db_min"] < 0  # no reading given: the SNR decides
    spec.write_text(spec.read_text() + "threshold = 0.0\n")
    code, out, err = cli(*args)
    report = json.loads(out)
    assert code == 0, err
    assert report["outputs"]["bits"]["decision_agreement"] == 1.0 and report["outputs"]["bits"]["channel_snr_db_min"] < 0
    assert {c["metric"] for c in report["checks"] if c["output"] == "bits"} == {"decision_agreement", "finite"}
    spec.write_text("[thresholds.fp32]\nchannel_snr_db_min = 9.6\n" + spec.read_text())
    code, out, _ = cli(*args)
    failed = {c["metric"] for c in json.loads(out)["checks"] if not c["passed"]}
    assert code == 1 and failed == {"channel_snr_db_min"}

def _parameters(tmp_path, offset):
    """A model that passes its 4 inputs through, plus `offset`: a face model's parameters, the first a scale."""
    from onnx import TensorProto, helper, numpy_helper

    import models

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("params", TensorProto.FLOAT, ["N", 4])
    b = numpy_helper.from_array(np.asarray(offset, np.float32), "b")
    return models._model(helper.make_graph([helper.make_node("Add", ["x", "b"], ["params"])], "g", [x], [y], [b]))


POINTS = '''import numpy as np

TEMPLATE = np.stack([np.cos(np.arange(10)), np.sin(np.arange(10))], axis=1)  # 10 points on a unit circle


def points(params):
    # the scale times the template, bent by the three coefficients: [samples, 10, 2]
    bend = params[:, 1:, None, None] * TEMPLATE[None, None] ** 2
    return params[:, :1, None] * TEMPLATE[None] / 10 + bend.sum(axis=1) / 10
'''


def test_a_transform_judges_what_the_answer_is_read_from(cli, tmp_path):
    """tddfa-mb1's 62 face parameters passed validate while its landmarks moved: a camera scale, large
    beside its error, rates best by its own SNR. Judged through the user's transform of the parameters
    into points, with a tolerance, the same candidate fails."""
    rng = np.random.default_rng(3)
    params = np.concatenate([rng.uniform(5, 15, (64, 1)), rng.normal(0, 0.3, (64, 3))], axis=1).astype(np.float32)
    save_batches(tmp_path / "data", params)
    save(_parameters(tmp_path, [0.0] * 4), tmp_path / "m.onnx")
    save(_parameters(tmp_path, [0.15, 0, 0, 0]), tmp_path / "scaled.onnx")
    (tmp_path / "points.py").write_text(POINTS)
    loose = '[thresholds.fp32]\ncosine = 0.99\ncosine_min = 0.99\nchannel_cosine_min = 0.95\nchannel_snr_db_min = 9.6\n'
    spec = tmp_path / "m.toml"
    spec.write_text(loose + '[[outputs]]\nname = "params"\ntask = "generic"\n')
    args = ("validate", tmp_path / "scaled.onnx", "--baseline", tmp_path / "m.onnx", "--data", tmp_path / "data",
            "--spec", spec, "--json")
    code, out, err = cli(*args)
    assert code == 0, err  # the scale's error is small beside its spread: 37 dB on its channel
    spec.write_text(spec.read_text() + 'transform = "points.py:points"\ntolerance = 0.1\n')
    code, out, err = cli(*args)
    report = json.loads(out)
    judged = report["outputs"]["params"]
    template = np.stack([np.cos(np.arange(10)), np.sin(np.arange(10))], axis=1)
    moved = np.float32(0.15) * np.linalg.norm(template, axis=1).mean() / 10  # every sample's points move alike
    assert code == 0 and judged["within_tolerance"] == 1.0 and moved < 0.1, err  # points within 0.1 pass
    spec.write_text(spec.read_text().replace("tolerance = 0.1", "tolerance = 0.01"))
    code, out, err = cli(*args)
    judged = json.loads(out)["outputs"]["params"]
    assert code == 1 and judged["within_tolerance"] == 0.0 and judged["distance_max"] == pytest.approx(moved, rel=1e-3)
    assert moved > 0.01
    assert "within_tolerance" in {c["metric"] for c in json.loads(out)["checks"] if not c["passed"]}
    code, out, err = cli("validate", tmp_path / "m.onnx", "--baseline", tmp_path / "m.onnx", "--data",
                         tmp_path / "data", "--spec", spec, "--json")
    assert code == 0 and json.loads(out)["outputs"]["params"]["within_tolerance"] == 1.0, err


@pytest.mark.parametrize("transform,source,needle", [
    ("missing.py:points", None, "does not exist"),
    ("points.py", POINTS, "is not FILE.py:FUNCTION"),
    ("points.py:nope", POINTS, "has no function nope"),
    ("points.py:points", "import nothing_of_the_kind\n", "does not run (ModuleNotFoundError"),
    ("points.py:points", "def points(p):\n    raise ValueError('bad\\nsecond line')\n", "raised ValueError: bad on FP32's"),
    ("points.py:points", "def points(p):\n    return p[:1]\n", "returned shape [1, 4] for"),
    ("points.py:points", "import numpy as np\ndef points(p):\n    return p * np.nan\n", "NaN or Inf for FP32's output"),
])
def test_a_transform_that_does_not_work_is_one_line_and_exit_2(cli, tmp_path, transform, source, needle):
    save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (8, 4)).astype(np.float32))
    save(_parameters(tmp_path, [0.0] * 4), tmp_path / "m.onnx")
    if source is not None:
        (tmp_path / "points.py").write_text(source)
    (tmp_path / "m.toml").write_text(f'[[outputs]]\nname = "params"\ntask = "generic"\ntransform = "{transform}"\n')
    code, _out, err = cli("validate", tmp_path / "m.onnx", "--baseline", tmp_path / "m.onnx", "--data", tmp_path / "data",
                         "--spec", tmp_path / "m.toml")
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def _tracker(scale_unvoiced: float, scale_voiced: float = 1.0):
    """A pitch tracker's two outputs from x [N, 8] in 1..2: `conf` = x - 1.5 (voiced above 0) and `pitch` = 100 x,
    times `scale_unvoiced` where conf is not above 0 and `scale_voiced` where it is."""
    from onnx import TensorProto, helper, numpy_helper

    import models

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 8]) for n in ("pitch", "conf")]
    consts = [numpy_helper.from_array(np.float32(v), n) for n, v in
              (("half", 1.5), ("zero", 0.0), ("hz", 100.0), ("su", 100.0 * scale_unvoiced), ("sv", 100.0 * scale_voiced))]
    nodes = [helper.make_node("Sub", ["x", "half"], ["conf"]), helper.make_node("Greater", ["conf", "zero"], ["voiced"]),
             helper.make_node("Mul", ["x", "su"], ["pu"]), helper.make_node("Mul", ["x", "sv"], ["pv"]),
             helper.make_node("Where", ["voiced", "pv", "pu"], ["pitch"])]
    return models._model(helper.make_graph(nodes, "g", [x], outs, consts))


CENTS = '''import numpy as np


def cents(pitch):
    return 1200 * np.log2(pitch)


def voiced_cents(pitch, fp32):
    # a pitch is read where the frame is voiced: judged where FP32 says so, on both sides
    return np.where(fp32["conf"] > 0, 1200 * np.log2(pitch), 0.0)
'''


def test_a_transform_of_two_arguments_reads_where_fp32s_other_output_says(cli, tmp_path):
    """SwiftF0's pitch is read only on voiced frames, which its confidence output marks; an unvoiced frame's
    pitch is noise that moves an octave at FP16 and no one reads. A transform sees one output, so validate
    judged every frame's pitch and failed an FP16 that kept 2812 of 2813 voiced frames within 50 cents.
    A transform of two arguments gets FP32's outputs too: a candidate that moves only unvoiced pitches
    passes, one that moves voiced pitches fails."""
    save_batches(tmp_path / "data", np.random.default_rng(1).uniform(1, 2, (64, 8)).astype(np.float32))
    save(_tracker(1.0), tmp_path / "m.onnx")
    save(_tracker(1.5), tmp_path / "unvoiced.onnx")
    save(_tracker(1.0, 1.5), tmp_path / "voiced.onnx")
    (tmp_path / "cents.py").write_text(CENTS)
    spec = tmp_path / "m.toml"

    def judge(candidate, function):
        spec.write_text(f'[[outputs]]\nname = "pitch"\ntask = "generic"\ntransform = "cents.py:{function}"\n'
                        'tolerance = 50\n')
        code, out, err = cli("validate", tmp_path / candidate, "--baseline", tmp_path / "m.onnx", "--data",
                             tmp_path / "data", "--spec", spec, "--json")
        assert code in (0, 1), err
        return code, json.loads(out)["outputs"]["pitch"]["within_tolerance"]

    assert judge("unvoiced.onnx", "cents") == (1, 0.0)  # every unvoiced pitch read as if it were heard
    assert judge("unvoiced.onnx", "voiced_cents") == (0, 1.0)
    assert judge("voiced.onnx", "voiced_cents") == (1, 0.0)
    assert judge("m.onnx", "voiced_cents") == (0, 1.0)


def _ratings(weights):
    """A rater of three opinion scores a sample ([N, 3], as DNSMOS's SIG, BAK and OVRL): 2.5 + tanh(x . w)."""
    from onnx import TensorProto, helper, numpy_helper

    import models

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
    y = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 3])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["z"]), helper.make_node("Tanh", ["z"], ["t"]),
             helper.make_node("Add", ["t", "b"], ["scores"])]
    inits = [numpy_helper.from_array(weights.astype(np.float32), "w"), numpy_helper.from_array(np.full(3, 2.5, np.float32), "b")]
    return models._model(helper.make_graph(nodes, "g", [x], [y], inits))


def test_a_score_a_sample_is_judged_against_its_spread_not_its_size(cli, tmp_path):
    """DNSMOS's three quality scores sit at 1 to 4 with a spread of about 0.9: its INT8 moved them by 0.36
    to 0.41 (root mean square) and passed at a worst channel of 17.2 dB, the error measured against the scores
    themselves, while its package's ratings moved by 0.2 on average. Against FP32's spread over the
    samples the same error is 7 to 8 dB, under INT8's 9.6; a candidate whose error is small beside the spread passes."""
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 0.25, (16, 3))
    x = rng.normal(0, 1, (64, 16)).astype(np.float32)
    save(_ratings(weights), tmp_path / "m.onnx")
    save_batches(tmp_path / "data", x)
    int8 = DEFAULT_THRESHOLDS["int8"]  # the candidate is an FP32 graph: judged by INT8's minimums, as spec'd
    (tmp_path / "m.toml").write_text('task = "generic"\n[thresholds.fp32]\n' + "".join(
        f"{m} = {int8[m]}\n" for m in ("cosine", "cosine_min", "channel_cosine_min", "channel_snr_db_min")))

    def judged(noise):
        moved = weights + noise * rng.normal(0, 0.25, weights.shape)
        save(_ratings(moved), tmp_path / "moved.onnx")
        code, out, err = cli("validate", tmp_path / "moved.onnx", "--baseline", tmp_path / "m.onnx", "--data",
                             tmp_path / "data", "--spec", tmp_path / "m.toml", "--json")
        assert code in (0, 1), err
        return code, json.loads(out), np.tanh(x.astype(np.float64) @ moved) + 2.5

    want = np.tanh(x.astype(np.float64) @ weights) + 2.5
    code, report, got = judged(0.6)
    scores, noise = report["outputs"]["scores"], ((got - want) ** 2).sum(0)
    against_scores = 10 * np.log10((want ** 2).sum(0) / noise)  # what the SNR was taken against before
    against_spread = 10 * np.log10(((want - want.mean(0)) ** 2).sum(0) / noise)
    assert against_scores.min() > int8["channel_snr_db_min"] > against_spread.min()
    assert scores["cosine"] > 0.99 and scores["channel_cosine_min"] > 0.95  # both blind to it
    assert code == 1 and "channel_snr_db_min" in {c["metric"] for c in report["checks"] if not c["passed"]}
    assert scores["channel_snr_db_min"] == pytest.approx(against_spread.min(), abs=0.01)
    assert scores["channel_snr_about_mean"] == 1
    code, report, _ = judged(0.05)
    assert code == 0, report["checks"]


def _embedding(weights, channel_scales):
    """An embedding ([N, 4]): x @ W, each channel times its scale."""
    from onnx import TensorProto, helper, numpy_helper

    import models

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
    y = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Mul", ["m", "s"], ["z"])]
    inits = [numpy_helper.from_array(weights.astype(np.float32), "w"),
             numpy_helper.from_array(np.asarray(channel_scales, np.float32), "s")]
    return models._model(helper.make_graph(nodes, "g", [x], [y], inits))


@pytest.mark.parametrize(("quiet", "passes"), [(1e-7, True), (1e-2, False)])
def test_a_channel_of_fp32_rounding_residue_is_silent(cli, tmp_path, quiet, passes):
    """atspm-pair's embedding holds channels at 1e-12 of the median channel's energy that its INT8 returned as
    exact zeros: cosine 0 on values no reader sees, and the verdict FAIL. A channel that quiet (here 1e-7 of
    the others' size) is skipped as a channel of zeros is, and counted; one at 1e-2 of their size, zeroed,
    still fails (and one at 1e-4, inverted: test_tasks' worst channel behind a large one)."""
    rng = np.random.default_rng(3)
    weights = rng.normal(0, 0.25, (16, 4))
    save(_embedding(weights, [1, 1, 1, quiet]), tmp_path / "m.onnx")
    save(_embedding(weights * (1 + 0.001 * rng.normal(size=weights.shape)), [1, 1, 1, 0]), tmp_path / "zeroed.onnx")
    save_batches(tmp_path / "data", rng.normal(0, 1, (64, 16)).astype(np.float32))
    int8 = DEFAULT_THRESHOLDS["int8"]
    (tmp_path / "m.toml").write_text('task = "generic"\n[thresholds.fp32]\n' + "".join(
        f"{m} = {int8[m]}\n" for m in ("cosine", "cosine_min", "channel_cosine_min", "channel_snr_db_min")))
    code, out, err = cli("validate", tmp_path / "zeroed.onnx", "--baseline", tmp_path / "m.onnx", "--data",
                         tmp_path / "data", "--spec", tmp_path / "m.toml", "--json")
    assert code == (0 if passes else 1), err
    z = json.loads(out)["outputs"]["z"]
    if passes:
        assert z["silent_channels"] == 1 and z["channel_cosine_min"] > 0.999
    else:
        assert "silent_channels" not in z and z["worst_channel"] == 3 and z["channel_snr_db_min"] < 1
