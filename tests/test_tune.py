"""`trtpipe tune`: the search on a real small conv net and real data, its files, and build reading them."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_rtx

from calibrators.cache import read_cache
from models import conv_net, save, save_batches
from trtpipe.config import load_exclusions
from trtpipe.quality.tune import Config, margin

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


def _tune(cli, workdir, cosine, *extra):
    (workdir / "spec.toml").write_text(SPEC.format(cosine=cosine))
    code, out, err = cli("tune", workdir / "conv.onnx", "--spec", workdir / "spec.toml", "--precision", "int8",
                         "--budget-min", 2, "-o", workdir / "out" / "conv.int8.tuned.cache", *extra)
    assert code == 0, err
    report = json.loads((workdir / "out" / "reports" / "conv.int8.tune.json").read_text())
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
    assert margin({"cosine": 0.995, "top1_agreement": 1.0}, {"cosine": 0.99, "top1_agreement": 0.98}) == pytest.approx(0.5)
    assert margin({"cosine": 0.98}, {"cosine": 0.99}) == pytest.approx(-1.0)
    assert margin({"snr_db": 25.0}, {"snr_db": 20.0}) == pytest.approx(0.25)
    assert margin({"cosine": math.nan}, {"cosine": 0.9}) == -math.inf


def test_config_table_takes_each_tensors_method():
    amax = {"entropy": {"a": 1.0, "b": 2.0}, "max": {"a": 3.0, "b": 4.0}}
    config = Config("entropy").with_method("b", "max")
    assert config.table(amax).amax == {"a": 1.0, "b": 4.0}
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
    assert chosen["estimated_ms"] <= fastest * 1.01  # slack gives back at most 10% of a small saving
    assert report["validation"]["samples"] == 48 and report["validation"]["mode"] == "simulated"
    assert report["estimated"] is True and report["gpu"] == "L4"
    # Progress names each trial and the best so far, on stderr; the result on stdout.
    assert "[  0] default" in err and "best: #" in err and "chosen:" in out and "validation (48 samples" in out
    # The files build reads: a cache with every tensor, the exclusions as [quantize] exclude.
    table = read_cache(workdir / "out" / "conv.int8.tuned.cache")
    assert set(table.amax) == {"input", "r0", "flat"}
    assert load_exclusions(workdir / "out" / "conv.int8.tuned.toml") == chosen["exclude"]
    assert (workdir / "out" / "reports" / "conv.int8.tune.png").stat().st_size > 1000


def test_tune_stops_at_the_first_method_when_it_passes(workdir, cli):
    _, _, report = _tune(cli, workdir, 0.99)
    assert report["chosen"]["passed"] and report["chosen"]["quantized_layers"] >= 2
    assert report["chosen"]["method"] != "entropy"  # entropy fails top-1 agreement here


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
    from calibrators.histogram import StreamingHistogram
    from trtpipe.quality.noise import local_noise

    hist = StreamingHistogram(bins=4)
    hist.update(np.array([1.0, 2.0, 3.0, 4.0], np.float32))  # bins of width 1: centers 0.5 .. 3.5
    assert local_noise(hist, 4.0 * 127 / 127, "int8") < 1e-4  # amax 4: a step of 4/127 fits them closely
    clipped = local_noise(hist, 1.0, "int8")  # everything above 1 clipped to 1
    centers = np.array([0.5, 1.5, 2.5, 3.5])
    assert clipped == pytest.approx(((np.minimum(centers, 1.0) - centers) ** 2).sum() / (centers**2).sum(), rel=1e-3)


def test_ranking_measures_within_its_share_and_places_the_unmeasured_between_halves():
    import time

    from calibrators.collect import collect_histograms
    from calibrators.graph import quantized_activations
    from trtpipe.config import ModelSpec
    from trtpipe.quality.sensitivity import layer_sensitivity
    from trtpipe.quality.tune import Search, amax_by_method
    from trtpipe.targets import Precision

    model = conv_net(batch="N")
    batches = [{"input": np.random.default_rng(0).normal(0, 1, (16, 3, 16, 16)).astype(np.float32)}]
    amax = amax_by_method(collect_histograms(model, quantized_activations(model), batches), Precision.INT8)
    layers = [("conv0", ["input"]), ("conv1", ["r0"]), ("fc", ["flat"])]
    search = Search(model, ModelSpec("conv", Path("."), task="classification"), Precision.INT8, amax, layers,
                    lambda q: float(len(q)), batches, [], {"cosine": 0.99}, budget_seconds=600,
                    proxy={"conv0": 3.0, "conv1": 1.0, "fc": 2.0})
    search._deadline = time.monotonic() + 600
    search.ranking_share = 0.0  # no time to measure: the proxy decides
    assert search.rank_layers(Config("max")) == ["conv0", "fc", "conv1"]
    search.ranking_share = 1.0
    expected = [row["node"] for row in layer_sensitivity(model, Config("max").table(amax), Precision.INT8, batches,
                                                          classifier=True, unquantized="fp32")]
    assert search.rank_layers(Config("max"), chunk=1) == expected  # all measured: by their cosine
