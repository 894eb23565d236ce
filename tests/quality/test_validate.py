"""`trtpipe validate` and the ONNX Runtime runner: exit codes, reports, thresholds, input checks."""

import json
import re

import numpy as np
import onnxruntime as ort
import pytest

from models import mlp, save, save_batches
from trtpipe.errors import TrtpipeError
from trtpipe.quality.validate import DEFAULT_THRESHOLDS, thresholds_for
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.spec import load_spec


@pytest.fixture
def workdir(tmp_path, cli):
    """An FP32 MLP, its FP16 and INT8 typed ONNX, and 64 samples of data."""
    save(mlp(batch="N"), tmp_path / "mlp.onnx")
    save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (64, 16)).astype(np.float32))
    assert cli("calibrate", tmp_path / "mlp.onnx", "--data", tmp_path / "data", "-o", tmp_path / "mlp.cache")[0] == 0
    for precision in ("fp16", "int8"):
        code, _, err = cli("quantize", tmp_path / "mlp.onnx", "--precision", precision, "--cache", tmp_path / "mlp.cache",
                           "-o", tmp_path / f"mlp.{precision}.onnx")
        assert code == 0, err
    return tmp_path


def test_onnx_runner_matches_onnxruntime_and_reads_precision(workdir):
    x = np.random.default_rng(1).normal(0, 1, (5, 16)).astype(np.float32)
    want = ort.InferenceSession(str(workdir / "mlp.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    with OnnxRunner(workdir / "mlp.onnx") as runner:
        assert (runner.precision, runner.measured) == ("fp32", False)  # no engine ran: never "measured"
        assert [(i.name, i.dtype, i.shape) for i in runner.inputs] == [("x", "float32", (-1, 16))]
        np.testing.assert_array_equal(runner({"x": x})["probs"], want)
        np.testing.assert_array_equal(runner([x])["probs"], want)  # a list in input order
    for precision in ("fp16", "int8"):
        with OnnxRunner(workdir / f"mlp.{precision}.onnx") as runner:
            assert (runner.precision, runner.measured) == (precision, False)
            np.testing.assert_allclose(runner({"x": x})["probs"], want, atol=0.05)


@pytest.mark.parametrize("feeds,message", [
    ({"x": np.zeros((2, 15), np.float32)}, "has shape [2, 15], the model takes [-1, 16]"),
    ({"x": np.zeros((2, 16), np.float64)}, "is float64, the model takes float32"),
    ({"y": np.zeros((2, 16), np.float32)}, "do not match the model's ['x']"),
    ([np.zeros((2, 16), np.float32)] * 2, "got 2 inputs, the model takes 1"),
])
def test_runner_rejects_wrong_inputs(workdir, feeds, message):
    with OnnxRunner(workdir / "mlp.onnx") as runner, pytest.raises(TrtpipeError, match=None) as error:
        runner(feeds)
    assert message in str(error.value) and "mlp.onnx" in str(error.value)


def test_validate_passes_writes_the_report_and_says_simulated(workdir, cli):
    (workdir / "generic.toml").write_text('task = "generic"\n')  # a histogram of errors, whether or not any sample flips
    code, out, err = cli("validate", workdir / "mlp.fp16.onnx", "--baseline", workdir / "mlp.onnx", "--spec", workdir / "generic.toml",
                         "--data", workdir / "data", "--report", workdir / "report", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["passed"] and report["precision"] == "fp16" and report["samples"] == 64
    assert report["mode"] == "simulated" and report["measured"] is False
    assert report["thresholds"] == DEFAULT_THRESHOLDS["fp16"]
    assert report["outputs"]["probs"]["cosine"] > 0.9999
    assert json.loads((workdir / "report" / "mlp.fp16.onnx.json").read_text()) == report
    markdown = (workdir / "report" / "mlp.fp16.onnx.md").read_text()
    assert "simulated" in markdown and "## probs (generic)" in markdown and "**PASS**" in markdown
    assert "Task: the spec's task." in markdown
    assert "| cosine | " in markdown and "| 0.9999 | pass |" in markdown
    assert "![probs](mlp.fp16.onnx.probs.png)" in markdown  # the picture sits under its table
    assert (workdir / "report" / "mlp.fp16.onnx.probs.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_exit_code_1_when_a_threshold_fails(workdir, cli):
    # INT8 of this MLP reaches a cosine near 0.999; asking for 0.99999 must fail, and say which check did.
    (workdir / "generic.toml").write_text('task = "generic"\n')
    code, out, _ = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--spec", workdir / "generic.toml",
                       "--data", workdir / "data", "--threshold", "cosine=0.99999", "--json")
    report = json.loads(out)
    assert code == 1 and not report["passed"]
    failed = [c for c in report["checks"] if not c["passed"]]
    assert [(c["metric"], c["minimum"]) for c in failed] == [("cosine", 0.99999)]
    assert 0.99 < failed[0]["value"] < 0.99999


@pytest.mark.parametrize("args,needle", [
    (["--data", "missing"], "missing"),
    (["--threshold", "cosine=high"], "METRIC=NUMBER"),
    (["--threshold", "speed=1"], "unknown metric"),
    (["--threshold", "map50=0.9"], "--threshold map50: no judged output"),
])
def test_validate_bad_input_exit_code_2(workdir, cli, args, needle):
    args = [a if a != "missing" else workdir / "missing" for a in args]
    if "--data" not in args:
        args += ["--data", workdir / "data"]
    code, _, err = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", *args)
    assert code == 2 and needle in err and "Traceback" not in err


def test_validate_rejects_data_of_the_wrong_shape(workdir, cli):
    (workdir / "wide").mkdir()
    np.save(workdir / "wide" / "0.npy", np.zeros((4, 17), np.float32))
    code, _, err = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "wide")
    assert code == 2 and "0.npy" in err


def test_thresholds_defaults_then_spec_then_command_line(tmp_path):
    spec_path = tmp_path / "model.toml"
    spec_path.write_text('name = "m"\ntask = "classification"\n[thresholds.int8]\ncosine = 0.995\ntop5_agreement = 0.97\n')
    spec = load_spec(spec_path)
    assert thresholds_for("int8") == DEFAULT_THRESHOLDS["int8"]
    assert (thresholds_for("int8")["cosine"], thresholds_for("int8")["top1_agreement"]) == (0.99, 0.98)
    assert thresholds_for("int8", spec) == {**DEFAULT_THRESHOLDS["int8"], "cosine": 0.995, "top5_agreement": 0.97}
    assert thresholds_for("int8", spec, {"cosine": 0.9})["cosine"] == 0.9
    assert thresholds_for("fp16", spec) == DEFAULT_THRESHOLDS["fp16"]


def test_summary_names_the_check_that_failed(workdir, cli):
    for precision, extra in (("fp16", []), ("int8", ["--threshold", "cosine=0.99999"])):
        cli("validate", workdir / f"mlp.{precision}.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
            "--report", workdir / "reports", *extra)
    reports = [workdir / "reports" / f"mlp.{p}.onnx.json" for p in ("fp16", "int8")]
    code, out, _ = cli("summary", *reports)
    fp16, int8 = out.splitlines()[2:]
    assert code == 1  # a report failed
    assert "| mlp | fp16 |" in fp16 and "| pass |" in fp16 and "below minimum" not in fp16
    assert "| FAIL | simulated |" in int8 and "below minimum: " in int8 and "cosine 0.99" in int8 and "< 0.99999" in int8
    assert cli("summary", "--no-fail", *reports)[0] == 0


def test_validate_says_when_one_sample_decides_a_share(workdir, cli):
    """32 samples against top-1 agreement >= 0.98: one flip is 3.1%, more than the 2% allowed, so the
    verdict rests on a single sample and the report says how many samples would not."""
    spec = workdir / "model.toml"
    spec.write_text('task = "classification"\n')
    for limit, coarse in ((32, True), (64, False)):
        args = ["validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
                "--spec", spec, "--limit", str(limit)]
        code, out, err = cli(*args, "--json")
        assert code in (0, 1), err
        top1 = [c for c in json.loads(out)["coarse_checks"] if c["metric"] == "top1_agreement"]
        assert top1 == ([{"output": "probs", "metric": "top1_agreement", "samples": 32, "minimum": 0.98, "needed": 50,
                          "unit": "sample"}]
                        if coarse else [])
        _, markdown, _ = cli(*args)
        assert ("Too few samples for top1_agreement on probs: one sample of 32 is 3.1%, more than the 2.0% "
                "its minimum 0.98 allows" in markdown) == coarse
        assert ("validate on at least 50 samples." in markdown) == coarse


def test_a_threshold_no_task_of_the_spec_judges_is_refused_at_load(workdir, cli):
    """The issue's case: snr_db = 200 on a classifier was ignored and the INT8 build passed."""
    spec = workdir / "model.toml"
    spec.write_text('task = "classification"\n[thresholds.int8]\nsnr_db = 200\n')
    code, _, err = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
                       "--spec", spec)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "[thresholds.int8] snr_db is not judged for task classification" in err
    assert "which judges top1_agreement, confident_top1_agreement, top5_agreement, cosine, accuracy" in err
    spec.write_text('[[outputs]]\nname = "probs"\ntask = "generic"\n[thresholds.int8]\nsnr_db = 200\n')
    code, out, _ = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
                       "--spec", spec, "--json")
    assert code == 1 and {"metric": "snr_db", "minimum": 200.0} in [
        {k: c[k] for k in ("metric", "minimum")} for c in json.loads(out)["checks"] if not c["passed"]]


@pytest.mark.parametrize("where", ["spec", "flag"])
def test_a_named_threshold_the_data_cannot_measure_is_exit_2(workdir, cli, where):
    """accuracy needs labels: a default minimum for it is left out quietly, one the user wrote is not."""
    spec = workdir / "model.toml"
    spec.write_text('task = "classification"\n' + ('[thresholds.int8]\naccuracy = 0.9\n' if where == "spec" else ""))
    flag = ["--threshold", "accuracy=0.9"] if where == "flag" else []
    code, _, err = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
                       "--spec", spec, *flag)
    assert code == 2 and "Traceback" not in err
    assert ("[thresholds.int8] accuracy" if where == "spec" else "--threshold accuracy") in err
    assert "output 'probs' (classification) has no accuracy on this data: no sample has a label" in err


def test_summary_keeps_dots_in_a_model_name_and_digits_that_tell_value_from_minimum(workdir, cli):
    """resnet.v2.int8.onnx is model resnet.v2; a cosine just under a minimum of 0.999999 is not 'cosine 1 < 1'."""
    dotted = workdir / "mlp.v2.int8.onnx"
    dotted.write_bytes((workdir / "mlp.int8.onnx").read_bytes())
    cli("validate", dotted, "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
        "--report", workdir / "reports", "--threshold", "cosine=0.9999999")
    code, out, _ = cli("summary", workdir / "reports" / "mlp.v2.int8.onnx.json")
    row = out.splitlines()[2]
    assert code == 1 and row.startswith("| mlp.v2 | int8 |")
    shown = re.search(r"cosine ([0-9.]+) < ([0-9.]+)", row)
    assert shown and float(shown[1]) < float(shown[2]) == 0.9999999


@pytest.mark.parametrize("passed", ["false", 0, None])
def test_summary_refuses_a_verdict_that_is_not_a_json_bool(workdir, cli, passed):
    cli("validate", workdir / "mlp.fp16.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
        "--report", workdir / "reports")
    path = workdir / "reports" / "mlp.fp16.onnx.json"
    report = json.loads(path.read_text())
    path.write_text(json.dumps({**report, "passed": passed}))
    code, out, err = cli("summary", path)
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"{path}: 'passed' is {json.dumps(passed)}, not true or false" in err


def test_labels_txt_in_the_data_directory_gives_accuracy(workdir, cli):
    spec = workdir / "model.toml"
    spec.write_text('task = "classification"\n')
    args = ["validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
            "--spec", spec, "--json"]
    assert "accuracy" not in json.loads(cli(*args)[1])["outputs"]["probs"]
    x = np.concatenate([np.load(workdir / "data" / f"{i:03d}.npy") for i in range(0, 64, 16)])
    truth = ort.InferenceSession(str(workdir / "mlp.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0].argmax(1)
    truth[:8] = (truth[:8] + 1) % 8  # FP32 wrong on 8 of 64
    (workdir / "data" / "labels.txt").write_text("".join(f"{i // 16 * 16:03d}.npy[{i % 16}] {c}\n" for i, c in enumerate(truth)))
    metrics = json.loads(cli(*args)[1])["outputs"]["probs"]
    assert metrics["baseline_accuracy"] == 56 / 64


def test_data_that_contradicts_a_fixed_input_value_is_exit_2(workdir, cli):
    spec = workdir / "model.toml"
    spec.write_text('[[inputs]]\nname = "x"\nshape = [-1, 16]\nvalue = 0.5\n')
    code, _, err = cli("validate", workdir / "mlp.int8.onnx", "--baseline", workdir / "mlp.onnx", "--data", workdir / "data",
                       "--spec", spec)
    assert code == 2 and "Traceback" not in err
    assert "000.npy: input 'x' holds" in err and "[[inputs]] x value = 0.5 fixes it" in err


def _stream(tmp_path, drift, steps=32):
    """An integrator and a candidate drifting by `drift` a step; one data file of `steps` steps with the states FP32
    carries, and a spec that carries `stateN` to `state` (INT8's minimums for the FP32-typed candidate)."""
    from onnx import numpy_helper

    from models import integrator

    save(integrator(), tmp_path / "fp32.onnx")
    save(integrator(drift), tmp_path / "drifting.onnx")
    x = np.random.default_rng(0).normal(0, 1, (steps, 8)).astype(np.float32)
    w = numpy_helper.to_array(integrator().graph.initializer[0])
    states = np.concatenate([np.zeros((1, 8)), np.cumsum(x @ w, axis=0)[:-1]]).astype(np.float32)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "stream.npz", x=x, state=states)
    int8 = DEFAULT_THRESHOLDS["int8"]
    limits = "".join(f"{m} = {int8[m]}\n" for m in ("cosine", "cosine_min", "channel_cosine_min", "channel_snr_db_min"))
    spec = ('[[inputs]]\nname = "x"\nshape = [-1, 8]\n[[inputs]]\nname = "state"\nshape = [-1, 8]\ncarry = "stateN"\n'
            f'[[outputs]]\nname = "y"\ntask = "generic"\n[[outputs]]\nname = "stateN"\ntask = "generic"\n[thresholds.fp32]\n{limits}')
    (tmp_path / "carried.toml").write_text(spec)
    (tmp_path / "stepwise.toml").write_text(spec.replace('carry = "stateN"\n', ""))
    return tmp_path


def test_a_carried_state_runs_the_stream_and_the_candidate_error_builds_up(cli, tmp_path):
    """Fed FP32's state each step, a state drifting by 0.05 a step passes; run as the model runs, each step
    reading the candidate's own state, the drift piles up over 32 steps and fails. FP32 against itself passes both."""
    where = _stream(tmp_path, drift=0.05)

    def judged(candidate, spec):
        code, out, err = cli("validate", where / candidate, "--baseline", where / "fp32.onnx", "--data", where / "data",
                             "--spec", where / spec, "--json")
        assert code in (0, 1), err
        return json.loads(out)

    stepwise, carried = judged("drifting.onnx", "stepwise.toml"), judged("drifting.onnx", "carried.toml")
    assert stepwise["passed"] and stepwise["carried"] == {}
    assert not carried["passed"] and carried["carried"] == {"state": "stateN"}
    assert carried["outputs"]["stateN"]["cosine"] < 0.99 < stepwise["outputs"]["stateN"]["cosine"]
    assert carried["outputs"]["y"]["channel_snr_db_min"] < 9.6 < stepwise["outputs"]["y"]["channel_snr_db_min"]
    # carried, a cosine's sample is the whole stream (its steps together); stepwise, the first step, from a zero state
    assert carried["outputs"]["stateN"]["worst_sample"] == "stream.npz"
    assert stepwise["outputs"]["stateN"]["worst_sample"] == "stream.npz[0]"
    assert judged("fp32.onnx", "carried.toml")["passed"]


def test_a_carry_that_cannot_run_is_refused_in_one_line(cli, tmp_path):
    where = _stream(tmp_path, drift=0.0)
    spec = (where / "carried.toml").read_text()
    for broken, says in ((spec.replace('carry = "stateN"', 'carry = "stateM"'), "carry 'stateM' is not an output"),
                         (spec.replace('carry = "stateN"', 'carry = "y"'), "output 'y' is [1, 4] and input 'state'"),
                         (spec.replace('carry = "stateN"', 'carry = "stateN"\nbatched = false'), "carry is for an input"),
                         (spec.replace('carry = "stateN"', 'carry = ""'), "carry is empty"),
                         (spec.replace('carry = "stateN"', 'carry = "state"'), "carry 'state' is not an output"),
                         (spec.replace("[-1, 8]", "[4, 8]"), "the model's batch is fixed at 4")):
        (where / "broken.toml").write_text(broken)
        code, _, err = cli("validate", where / "fp32.onnx", "--baseline", where / "fp32.onnx", "--data", where / "data",
                           "--spec", where / "broken.toml")
        assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_tune_and_autos_check_judge_a_carried_state_as_validate_does(tmp_path):
    """tune's search and `auto`'s check at the outputs judge trial graphs on calibration batches of their own
    (judge_model): they stream too, the drift piling up as in validate, where fed FP32's states it passed."""
    import onnx

    from trtpipe import data
    from trtpipe.quality.tune import baseline_outputs
    from trtpipe.quality.tune_judge import task_metrics

    where = _stream(tmp_path, drift=0.05)
    for name, streamed in (("stepwise.toml", False), ("carried.toml", True)):
        spec = load_spec(where / name)
        batches = list(data.iter_batches(spec, where / "data", batch_size=16))
        assert len(batches) == (32 if streamed else 2)  # a stream runs one step at a time
        wanted = baseline_outputs(onnx.load(where / "fp32.onnx"), batches, spec)
        metrics, _ = task_metrics(onnx.load(where / "drifting.onnx"), spec, batches, wanted, thresholds_for("fp32", spec))
        assert (metrics["cosine"] < 0.99) == streamed, (name, metrics)
