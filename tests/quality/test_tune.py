"""`trtpipe tune`: the search on a real small conv net and real data, its files, and build reading them."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_rtx

from models import conv_net, save, save_batches, yolo_like
from trtpipe.calibrators.cache import read_cache
from trtpipe.data import Batch
from trtpipe.quality.tune import Config, margins, task_metrics
from trtpipe.spec import ModelSpec, load_exclusions

SPEC = """name = "conv"
task = "classification"
[[inputs]]
name = "input"
shape = [-1, 3, 16, 16]
[shapes]
input = "1x3x16x16/8x3x16x16/8x3x16x16"
[data]
calibration = "calib"
validation = "val"
[thresholds.int8]
cosine = {cosine}
"""


def _workdir(path):
    save(conv_net(batch="N"), path / "conv.onnx")
    rng = np.random.default_rng(0)
    save_batches(path / "calib", rng.normal(0, 1, (64, 3, 16, 16)).astype(np.float32))
    save_batches(path / "val", rng.normal(0, 1, (48, 3, 16, 16)).astype(np.float32))
    return path


@pytest.fixture
def workdir(tmp_path):
    return _workdir(tmp_path)


def _run_tune(cli, workdir, cosine, *extra, spec_extra=""):
    """Return tune's exit code, stdout, stderr and the report it wrote."""
    (workdir / "spec.toml").write_text(SPEC.format(cosine=cosine) + spec_extra)
    code, out, err = cli("tune", workdir / "conv.onnx", "--spec", workdir / "spec.toml", "--precision", "int8",
                         "--budget-min", 2, "-o", workdir / "out" / "conv.int8.tuned.cache", *extra)
    assert code in (0, 1), err
    return code, out, err, json.loads((workdir / "out" / "reports" / "conv.int8.tune.json").read_text())


def _tune(cli, workdir, cosine, *extra, spec_extra="", meets=True):
    """Return stdout, stderr and the report of a tune run that exits 0 (`meets`: what is written meets the spec) or 1."""
    code, out, err, report = _run_tune(cli, workdir, cosine, *extra, spec_extra=spec_extra)
    assert code == (0 if meets else 1), err
    return out, err, report


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    """One tune run with a cosine minimum of 0.99999, shared: (workdir, stdout, stderr, report)."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    workdir = _workdir(tmp_path_factory.mktemp("strict"))

    def cli(*args):
        result = CliRunner().invoke(main, [str(a) for a in args])
        return result.exit_code, result.stdout, result.stderr

    return (workdir, *_tune(cli, workdir, 0.99999))


def test_margin_is_the_worst_check_scaled_by_its_room():
    assert margins({"cosine": 0.995, "top1_agreement": 1.0}, {"cosine": 0.99, "top1_agreement": 0.98})[0] == pytest.approx(0.5)
    assert margins({"cosine": 0.98}, {"cosine": 0.99})[0] == pytest.approx(-1.0)
    assert margins({"snr_db": 25.0}, {"snr_db": 20.0})[0] == pytest.approx(0.25)
    assert margins({"cosine": math.nan}, {"cosine": 0.9})[0] == -math.inf


def test_margins_compare_the_worst_check_first_then_the_next():
    thresholds = {"cosine": 0.99, "top1_agreement": 0.98}
    assert margins({"cosine": 0.995, "top1_agreement": 1.0}, thresholds) == pytest.approx((0.5, 1.0))
    # Every sample agreeing bounds top-1 agreement equally; the cosine tells the two apart.
    counts = {"top1_agreement": 1347}
    coarse = margins({"cosine": 0.99960, "top1_agreement": 1.0}, thresholds, counts, 0.9)
    fine = margins({"cosine": 0.99983, "top1_agreement": 1.0}, thresholds, counts, 0.9)
    assert coarse[0] == fine[0] and fine > coarse


def test_estimates_within_one_kernel_launch_are_won_by_accuracy():
    from trtpipe.quality.tune import LAUNCH_SECONDS, Scales, Search, Trial
    from trtpipe.spec import ModelSpec
    from trtpipe.targets import Precision

    def search(slack):
        # all-FP16 21.7 us, quantizing all four layers saves 0.5 us: digits on the L4
        return Search(None, ModelSpec("m", Path(".")), Precision.FP8, Scales({}), [],
                      lambda quantized: 21.7e-6 - 0.5e-6 * len(quantized) / 4, [], [], {"cosine": 0.99}, slack=slack)

    def trial(index, cosine, seconds):
        return Trial(index, "t", Config("max", exclude=(str(index),)), {"cosine": cosine}, ((cosine - 0.99) / 0.01,),
                     seconds, 1)

    fastest, kept = trial(0, 0.9963, 21.2e-6), trial(1, 0.9998, 21.66e-6)  # 0.46 us slower, more accurate
    beyond = trial(2, 0.99999, 21.2e-6 + 1.5 * LAUNCH_SECONDS)
    default = search(0.1)
    default.trials = [fastest, kept, beyond]
    assert default.best() is kept  # 10% of the saving alone (0.05 us) would have chosen `fastest`
    greedy = search(0.0)
    greedy.trials = [fastest, kept, beyond]
    assert greedy.best() is fastest


def test_a_configurations_table_takes_each_tensors_method_and_the_weights_positions():
    from trtpipe.quality.tune import Scales

    scales = Scales({"entropy": {"a": 1.0, "b": 2.0}, "max": {"a": 3.0, "b": 4.0}}, {"W": (3, 0)})
    config = Config("entropy").with_method("b", "max")
    assert scales.table(config).amax == {"a": 1.0, "b": 4.0}
    assert scales.table(Config("max")).weight_steps == {"W": (3, 0)}  # whatever the activations' method
    assert config.with_method("b", "entropy") == Config("entropy")  # back to the default: no override


def test_tune_finds_what_the_default_misses_and_confirms_on_validation(strict):
    # Entropy calibration clips this net's activations badly (cosine ~0.75): the default fails; a
    # cosine minimum of 0.99999 also needs one layer kept in FP16.
    workdir, out, err, report = strict
    trials = report["trials"]
    steps = [t["step"] for t in trials]
    assert steps[0] == "default" and {"all max", "all percentile", "all mse"} <= set(steps)
    assert not trials[0]["passed"]
    chosen = report["chosen"]
    assert chosen["passed"] and chosen["exclude"] and chosen["metrics"]["cosine"] >= 0.99999
    fastest = min(t["estimated_ms"] for t in trials if t["passed"])
    # Quantizing this small net saves microseconds: one kernel launch (2 us), the cost model's
    # resolution, is the most the choice may give back for accuracy, more than 10% of the saving.
    assert chosen["estimated_ms"] <= fastest + 0.002 + 1e-9
    assert chosen["estimated_ms"] == fastest or "more accurate than the fastest that passes" in out
    assert report["validation"]["samples"] == 48 and report["validation"]["mode"] == "simulated"
    assert report["estimated"] is True and report["gpu"] == "L4"
    # Progress names each trial and the best so far, on stderr; the result on stdout.
    assert "[  0] default" in err and "best: #" in err and "chosen:" in out and "validation (48 samples" in out
    # The verdict names the minimums of what was judged, not every task's defaults.
    assert "'cosine': 0.99999" in out and "pixel_agreement" not in out and "map50" not in out
    # The files build reads: a cache with every tensor, the exclusions as [quantize] exclude.
    table = read_cache(workdir / "out" / "conv.int8.tuned.cache")
    assert set(table.amax) == {"input", "r0", "flat"}
    assert load_exclusions(workdir / "out" / "conv.int8.tuned.toml") == chosen["exclude"]
    assert (workdir / "out" / "reports" / "conv.int8.tune.png").stat().st_size > 1000


def test_tune_exits_1_when_nothing_meets_the_thresholds_and_writes_the_closest(workdir, cli):
    _, err, report = _tune(cli, workdir, 0.9999999, "--budget-min", 0.05, meets=False)
    assert not report["chosen"]["passed"]
    assert "no configuration tried meets the thresholds; the one closest is written" in err
    assert (workdir / "out" / "conv.int8.tuned.cache").exists() and (workdir / "out" / "conv.int8.tuned.toml").exists()


def test_tune_stops_at_the_first_method_when_it_passes(workdir, cli):
    _, _, report = _tune(cli, workdir, 0.99, "--slack", 0)  # the fastest: nothing given back for accuracy
    assert report["chosen"]["passed"] and report["chosen"]["quantized_layers"] >= 2
    assert report["chosen"]["method"] != "entropy"  # entropy fails top-1 agreement here


def test_tune_searches_only_the_layers_min_weights_lets_be_quantized(workdir, cli):
    # conv0 holds 432 weight elements, conv1 2304, fc 256: with min_weights = 300 fc is never quantized
    _, _, report = _tune(cli, workdir, 0.99, spec_extra="[quantize]\nmin_weights = 300\n")
    assert report["chosen"]["quantized_layers"] + len(report["chosen"]["exclude"]) == 2
    assert all("fc" not in trial["exclude"] for trial in report["trials"])
    assert max(trial["quantized_layers"] for trial in report["trials"]) == 2


@needs_rtx
def test_build_reads_the_tuned_cache_and_exclusions(strict, cli):
    workdir, _, _, report = strict
    out = workdir / "out"
    code, _, err = cli("build", workdir / "conv.onnx", "--precision", "int8", "--target", "sm_89",
                            "--backend", "tensorrt-rtx", "--cache", out / "conv.int8.tuned.cache",
                            "--exclude", f"@{out / 'conv.int8.tuned.toml'}", "--shapes", "input:1x3x16x16/8x3x16x16/8x3x16x16",
                            "-o", workdir / "engines")
    assert code == 0, err
    import onnx

    typed = onnx.load(str(next((workdir / "engines").glob("conv.int8*.onnx"))))
    quantized = {n.name for n in typed.graph.node
                 if any(i.endswith("__dq") for i in n.input) and n.op_type in ("Conv", "Gemm")}
    assert quantized and not quantized & set(report["chosen"]["exclude"])


@pytest.mark.parametrize("args, needle", [
    (["--budget-min", "0"], "--budget-min"),
    (["--slack", "2"], "--slack"),
    (["-o", "tuned.txt"], "-o tuned.txt"),
    (["--target", "T4"], "--target sm75"),
])
def test_bad_flags_are_one_line_errors(workdir, cli, args, needle):
    (workdir / "spec.toml").write_text(SPEC.format(cosine=0.99))
    base = ["tune", workdir / "conv.onnx", "--spec", workdir / "spec.toml", "--precision", "int8",
            "-o", workdir / "t.cache"]
    if args[0] == "-o":
        base = base[:-2] + args
        args = []
    code, _, err = cli(*base, *args)
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (workdir / "t.cache").exists()


def test_exclude_file_that_is_missing_is_named(workdir, cli, tmp_path):
    code, _, err = cli("quantize", workdir / "conv.onnx", "--precision", "fp16", "--exclude", f"@{tmp_path / 'no.toml'}",
                       "-o", tmp_path / "x.onnx")
    assert code == 2 and "no.toml" in err and "trtpipe tune" in err


def test_local_noise_is_zero_on_the_grid_and_counts_clipping():
    from trtpipe.calibrators.histogram import StreamingHistogram
    from trtpipe.quality.noise import local_noise

    hist = StreamingHistogram(bins=4)
    hist.update(np.array([1.0, 2.0, 3.0, 4.0], np.float32))  # bins of width 1: centers 0.5 .. 3.5
    assert local_noise(hist, 4.0 * 127 / 127, "int8") < 1e-4  # amax 4: a step of 4/127 fits them closely
    clipped = local_noise(hist, 1.0, "int8")  # everything above 1 clipped to 1
    centers = np.array([0.5, 1.5, 2.5, 3.5])
    assert clipped == pytest.approx(((np.minimum(centers, 1.0) - centers) ** 2).sum() / (centers**2).sum(), rel=1e-3)


def test_ranking_measures_within_its_share_and_places_the_unmeasured_between_halves():
    from trtpipe.calibrators.collect import collect_histograms
    from trtpipe.calibrators.graph import quantized_activations
    from trtpipe.deadline import Deadline
    from trtpipe.quality.sensitivity import layer_sensitivity
    from trtpipe.quality.tune import Scales, Search, amax_by_method
    from trtpipe.spec import ModelSpec
    from trtpipe.targets import Precision

    model = conv_net(batch="N")
    batches = [Batch([f"sample {i}" for i in range(16)],
                     {"input": np.random.default_rng(0).normal(0, 1, (16, 3, 16, 16)).astype(np.float32)})]
    amax = amax_by_method(collect_histograms(model, quantized_activations(model), [b.arrays for b in batches]),
                          Precision.INT8)
    layers = [("conv0", ["input"]), ("conv1", ["r0"]), ("fc", ["flat"])]
    search = Search(model, ModelSpec("conv", Path("."), task="classification"), Precision.INT8, Scales(amax), layers,
                    lambda q: float(len(q)), batches, [], {"cosine": 0.99}, budget_seconds=600,
                    proxy={"conv0": 3.0, "conv1": 1.0, "fc": 2.0})
    search._deadline = Deadline.after(600)
    search.ranking_share = 0.0  # no time to measure: the proxy decides
    assert search.rank_layers(Config("max")) == ["conv0", "fc", "conv1"]
    search.ranking_share = 1.0
    expected = [row.node for row in layer_sensitivity(model, Scales(amax).table(Config("max")), Precision.INT8, batches,
                                                          classifier=True, unquantized="fp32")]
    assert search.rank_layers(Config("max"), chunk=1) == expected  # all measured: by their cosine



def test_ranking_judges_the_layers_as_the_spec_judges_the_outputs(tmp_path):
    """A spec that reads one logit within 0.02 of FP32's: conv1, clipped, moves it past that on every sample
    while fc, clipped harder, moves the logits' cosine most and that logit least. The search keeps the layer
    that breaks the answer first, as `sensitivity` ranks it, not the one with the lowest raw cosine."""
    from trtpipe.calibrators.collect import collect_histograms
    from trtpipe.calibrators.graph import quantized_activations
    from trtpipe.deadline import Deadline
    from trtpipe.quality.tune import Scales, Search, amax_by_method
    from trtpipe.spec import ModelSpec, OutputSpec
    from trtpipe.targets import Precision

    model = conv_net(batch="N")
    batches = [Batch([f"sample {i}" for i in range(32)],
                     {"input": np.random.default_rng(0).random((32, 3, 16, 16), np.float32)})]
    amax = amax_by_method(collect_histograms(model, quantized_activations(model), [b.arrays for b in batches]),
                          Precision.INT8)
    amax["max"]["r0"] /= 4  # conv1's input
    amax["max"]["flat"] /= 3  # fc's input
    (tmp_path / "first.py").write_text("def logit(logits):\n    return logits[:, :1]\n")
    layers = [("conv0", ["input"]), ("conv1", ["r0"]), ("fc", ["flat"])]

    def ranked(outputs):
        search = Search(model, ModelSpec("conv", tmp_path, task="generic", outputs=outputs), Precision.INT8, Scales(amax),
                        layers, lambda q: float(len(q)), batches, [], {"cosine": 0.99}, budget_seconds=600, proxy={})
        search._deadline = Deadline.after(600)
        search.ranking_share = 1.0
        return search.rank_layers(Config("max"), chunk=1)

    assert ranked([OutputSpec("logits", "generic")]) == ["fc", "conv1", "conv0"]  # by the logits' cosine
    assert ranked([OutputSpec("logits", "generic", transform=f"{tmp_path / 'first.py'}:logit", tolerance=0.02)]) == ["conv1", "fc", "conv0"]

def test_share_metrics_pass_by_their_wilson_bound():
    from trtpipe.quality.tune_judge import lower_bound, supported_confidence

    # Wilson's lower bound by hand: z = 1.2816 at 0.9; all of 160 agree -> 1 / (1 + z^2/160).
    z2 = 1.2815515655446004**2
    assert lower_bound(1.0, 160, 0.9) == pytest.approx(1 / (1 + z2 / 160))
    p, n = 159 / 160, 160
    wilson = (p + z2 / (2 * n) - math.sqrt(z2) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))) / (1 + z2 / n)
    assert lower_bound(p, n, 0.9) == pytest.approx(wilson) and 0.979 < wilson < 0.98
    assert lower_bound(0.97, 100, 0.0) == 0.97  # confidence 0: the share itself
    thresholds = {"cosine": 0.99, "top1_agreement": 0.98}
    assert margins({"cosine": 0.999, "top1_agreement": 1.0}, thresholds, {"top1_agreement": 160}, 0.9)[0] > 0
    # One flip in 160 (99.4%) passes the share itself and fails its bound.
    assert margins({"cosine": 0.999, "top1_agreement": 159 / 160}, thresholds)[0] > 0
    assert margins({"cosine": 0.999, "top1_agreement": 159 / 160}, thresholds, {"top1_agreement": 160}, 0.9)[0] < 0
    # 45 confident samples cannot show 99% at 0.9 even when all agree: judged at what they support.
    assert supported_confidence(45, 0.99) < 0.9
    confident = {"confident_top1_agreement": 0.99}
    assert margins({"confident_top1_agreement": 1.0}, confident, {"confident_top1_agreement": 45}, 0.9)[0] >= 0
    assert margins({"confident_top1_agreement": 44 / 45}, confident, {"confident_top1_agreement": 45}, 0.9)[0] < 0


def test_fewest_passing_doubles_then_bisects():
    from trtpipe.quality.tune import fewest_passing

    asked = []

    def passes(count):
        asked.append(count)
        return count >= 11

    assert fewest_passing(49, passes) == 11 and asked == [1, 2, 4, 8, 16, 12, 10, 11]
    asked.clear()
    assert fewest_passing(5, lambda c: asked.append(c) or False) is None and asked == [1, 2, 4, 5]
    assert fewest_passing(1, lambda c: True) == 1


def test_a_choice_that_fails_on_validation_walks_the_ladder(workdir, cli):
    # Validation photos six times brighter than calibration: every quantized tensor clips there.
    rng = np.random.default_rng(1)
    save_batches(workdir / "bright", rng.normal(0, 6, (32, 3, 16, 16)).astype(np.float32))
    code, _, err, report = _run_tune(cli, workdir, 0.99, "--validation", workdir / "bright", "--slack", 0)  # the most quantized
    chosen = report["chosen"]
    assert chosen["passed"] and not report["validation"]["passed"]
    rungs = report["rungs"]
    # 1, 2, 4... more of the search's ranking kept (one layer at least stays quantized), each
    # validated on the same data; the fewest that pass are written.
    assert rungs and rungs[0]["kept_more"] == 1
    assert all(r["validation"]["samples"] == 32 for r in rungs)
    assert all(set(chosen["exclude"]) < set(r["exclude"]) and len(r["exclude"]) == len(chosen["exclude"]) + r["kept_more"]
               for r in rungs)
    assert all(r["kept_more"] < chosen["quantized_layers"] for r in rungs)
    toml = (workdir / "out" / "conv.int8.tuned.toml").read_text()
    written = load_exclusions(workdir / "out" / "conv.int8.tuned.toml")
    confirmed = report["confirmed"]
    assert code == (1 if confirmed is None else 0)
    if confirmed is None:
        assert "no rung" in err and written == chosen["exclude"] and not any(r["validation"]["passed"] for r in rungs)
    else:
        assert confirmed["validation"]["passed"] and 'chosen_by = "validation ladder"' in toml
        assert written == confirmed["exclude"]
        assert not any(r["validation"]["passed"] for r in rungs if r["kept_more"] < confirmed["kept_more"])
        assert confirmed["estimated_ms"] > chosen["estimated_ms"]  # more in FP16 costs more


def test_the_ladder_starts_no_rung_once_the_deadline_has_passed(workdir):
    from trtpipe.deadline import Deadline
    from trtpipe.quality.tune import TuneOptions, tune
    from trtpipe.spec import load_spec
    from trtpipe.targets import Precision, Target

    rng = np.random.default_rng(1)  # brighter validation data than calibration, as above: the ladder is walked
    save_batches(workdir / "bright", rng.normal(0, 6, (32, 3, 16, 16)).astype(np.float32))
    (workdir / "spec.toml").write_text(SPEC.format(cosine=0.9995))
    now = [0.0]  # a clock that moves only when the test moves it: no timing in the test
    rungs_seen = []

    def on_phase(text):
        if "more kept:" in text:  # a rung was judged: the deadline passes now
            rungs_seen.append(text)
            now[0] = 2.0

    options = TuneOptions(validation_dir=workdir / "bright", budget_seconds=120, slack=0, deadline=Deadline(1.0, lambda: now[0]))
    result = tune(workdir / "conv.onnx", load_spec(workdir / "spec.toml"), Precision.INT8, Target.parse("sm_89"),
                  workdir / "calib", options, on_phase=on_phase)
    assert result.chosen.passed and not result.validation.passed  # the search finished: its clock never moved
    assert len(result.rungs) == len(rungs_seen) == 1 and not result.rungs[0].report.passed
    assert result.confirmed is None and "validation ladder, after 1 rung: the budget ran out" in result.stopped
    # Already passed: the search judges the default alone (something must be written), validation is never read.
    result = tune(workdir / "conv.onnx", load_spec(workdir / "spec.toml"), Precision.INT8, Target.parse("sm_89"),
                  workdir / "calib", TuneOptions(validation_dir=workdir / "bright", budget_seconds=120,
                                                 deadline=Deadline(0.0, lambda: 1.0)))
    assert result.validation is None and not result.rungs and "before it" in result.stopped
    assert [t.step for t in result.trials] == ["default"]


def test_a_choice_that_fails_on_validation_without_a_ladder_says_so(workdir, cli):
    rng = np.random.default_rng(1)
    save_batches(workdir / "bright", rng.normal(0, 6, (32, 3, 16, 16)).astype(np.float32))
    _, err, report = _tune(cli, workdir, 0.99, "--validation", workdir / "bright", "--slack", 0, "--no-ladder", meets=False)
    assert report["chosen"]["passed"] and not report["validation"]["passed"] and not report["rungs"]
    assert "fails on validation and no rung was tried (--no-ladder)" in err and "does not meet the spec" in err


def test_the_exclusions_file_is_valid_toml_for_any_layer_and_tensor_name(tmp_path):
    """Names as exporters write them (a '/', a quote, a backslash, a tab, an emoji) come back as written."""
    from trtpipe.calibrators.cache import CalibrationTable
    from trtpipe.quality.tune_config import Trial, TuneResult
    from trtpipe.quality.tune_report import exclusions_toml
    from trtpipe.targets import Precision

    names = ("/model/conv_1/Conv", 'say "hi"', "back\\slash", "tab\there", "emoji \U0001F600")
    config = Config("entropy", (("input \U0001F600", "max"),), tuple(sorted(names)))
    trial = Trial(0, "start", config, {"cosine": 0.99}, (0.1,), 0.001, 3)
    result = TuneResult([trial], trial, CalibrationTable({}), "NVIDIA L4 \"sm89\"", {}, {}, 32, 32)
    (tmp_path / "x.toml").write_text(exclusions_toml(result, Precision.INT8), encoding="utf-8")
    assert load_exclusions(tmp_path / "x.toml") == sorted(names)
    from trtpipe.spec import tomllib

    parsed = tomllib.loads((tmp_path / "x.toml").read_text(encoding="utf-8"))
    assert parsed["tune"]["gpu"] == 'NVIDIA L4 "sm89"' and parsed["tune"]["methods"] == {"input \U0001F600": "max"}


@pytest.mark.parametrize("task_line", ['task = "classification"\n', ""], ids=["spec task", "inferred task"])
def test_tune_refuses_a_named_metric_no_output_judges_as_validate_does(workdir, cli, task_line):
    """Without a task the spec loads (its task is inferred from the model); tune then refused nothing and
    judged snr_db on the logits, which validate refuses for a classifier."""
    spec = SPEC.format(cosine=0.99).replace('task = "classification"\n', task_line) + "snr_db = 200\n"
    (workdir / "spec.toml").write_text(spec + "[thresholds.fp32]\nsnr_db = 200\n")  # validate's candidate is FP32 here
    code, _, err = cli("validate", workdir / "conv.onnx", "--baseline", workdir / "conv.onnx", "--data", workdir / "val",
                       "--spec", workdir / "spec.toml")
    assert code == 2 and "snr_db" in err
    code, _, err = cli("tune", workdir / "conv.onnx", "--spec", workdir / "spec.toml", "--precision", "int8",
                       "--budget-min", 0.05, "-o", workdir / "out" / "t.cache")
    assert code == 2 and "[thresholds.int8] snr_db" in err and "top1_agreement" in err and len(err.strip().splitlines()) == 1
    assert not (workdir / "out").exists()  # refused before anything ran or was written


def test_the_search_judges_only_the_checks_validate_makes():
    """A detector's raw cosine is shown, not judged, by validate; the search judged it against the cosine minimum."""
    import onnxruntime as ort

    model = yolo_like()
    images = np.random.default_rng(3).uniform(0, 1, (16, 3, 64, 64)).astype(np.float32)
    wanted = [dict(zip(["output0"], ort.InferenceSession(model.SerializeToString()).run(None, {"images": images})))]
    thresholds = {"cosine": 0.99, "map50": 0.9, "f1": 0.85, "box_iou": 0.9}
    metrics, _ = task_metrics(model, ModelSpec("yolo", Path("."), task="detection"), [Batch([f"image {i}" for i in range(16)], {"images": images})], wanted,
                              thresholds)
    assert set(metrics) == {"map50", "f1", "box_iou"} and metrics["map50"] == 1.0
