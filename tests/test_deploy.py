"""`trtpipe deploy` end to end on a small real model: TensorRT-RTX builds real sm_89 engines on this CPU,
validation simulates them (their typed ONNX in ONNX Runtime) on real photos."""

import json

import numpy as np
import pytest
from conftest import needs_rtx

import models
from trtpipe.backend import SPECS, plan_precisions
from trtpipe.data import list_files
from trtpipe.deadline import Deadline
from trtpipe.deploy import SIZE_TIE, WIDTH_RANK, DeployOptions, deploy
from trtpipe.spec import load_spec
from trtpipe.targets import Precision, Target

pytestmark = needs_rtx
RTX = ("--target", "sm_89", "--backend", "tensorrt-rtx")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A conv net that takes any image size, and six of scikit-image's photos cropped to 64x96."""
    from PIL import Image
    from skimage import data

    root = tmp_path_factory.mktemp("deploy")
    models.save(models.conv_net(batch="N", height="H", width="W"), root / "m.onnx")
    (root / "photos").mkdir()
    for name in ("astronaut", "coffee", "chelsea", "rocket", "immunohistochemistry", "hubble_deep_field"):
        Image.fromarray(np.ascontiguousarray(getattr(data, name)()[:64, :96, :3])).save(root / "photos" / f"{name}.png")
    return root


def test_deploy_leaves_only_passing_engines_a_summary_and_a_triton_repository(cli, workdir):
    out = workdir / "out"
    code, stdout, err = cli("deploy", workdir / "m.onnx", "--data", workdir / "photos", *RTX, "-o", out)
    assert code == 0, stdout + err
    spec = load_spec(out / "m.toml")  # written as init writes it, sized from the photos
    assert spec.preprocess.size == (64, 96)
    # Every 4th photo by name is held out: calibration never reads what validation judges on.
    photos = list_files(workdir / "photos")
    calibrated, validated = ([p.resolve() for p in list_files(d)] for d in (spec.calibration, spec.validation))
    assert validated == [photos[3]] and calibrated == [p for p in photos if p != photos[3]]
    assert spec.calibration == (out / "data" / "calibration").resolve()
    assert f"validation on 1 of the 6 files of {workdir / 'photos'}, held out" in stdout
    reports = sorted((out / "reports").glob("m.*.onnx.json"))
    verdicts = {json.loads(p.read_text())["precision"]: json.loads(p.read_text())["passed"] for p in reports}
    assert {"fp16", "bf16", "int8", "fp8"} <= set(verdicts)  # int4: no layer as wide as a block
    engines = {p.name.split(".")[1] for p in out.glob("*.engine")}
    assert engines == {p for p, passed in verdicts.items() if passed}
    assert all((out / f"m.{p}.sm89.engine.json").is_file() for p in engines)
    auto = [str(p) for p in plan_precisions(["auto"], Target(8, 9), SPECS["tensorrt-rtx"])]
    code, table, _ = cli("summary", *sorted(reports, key=lambda p: auto.index(p.name.split(".")[1])))
    assert (out / "summary.md").read_text() == table  # the same table as 'trtpipe summary'
    # --prefer size (the default): the smallest engine file, the narrowest precision among those within 5%.
    size = {p: (out / f"m.{p}.sm89.engine").stat().st_size for p in engines}
    small = [p for p in engines if size[p] <= min(size.values()) * (1 + SIZE_TIE)]
    chosen = stdout.split("chose ")[1].split(".")[1]
    assert chosen in small and WIDTH_RANK[Precision(chosen)] == min(WIDTH_RANK[Precision(p)] for p in small)
    assert "the smallest engine that passes" in stdout
    served = [p.parent.name for p in (out / "triton").glob("*/config.pbtxt")]
    assert served == [f"m_{chosen}"]
    assert (out / "triton" / served[0] / "1" / "model.sm89.plan").is_file()
    # --prefer precision: the narrowest, whatever its size (a rerun reads the spec and split written above).
    code, stdout, err = cli("deploy", workdir / "m.onnx", "--data", workdir / "photos", *RTX, "--prefer", "precision",
                            "-o", out)
    assert code == 0, stdout + err
    engines = {p.name.split(".")[1] for p in out.glob("*.engine")}
    narrowest = min(WIDTH_RANK[Precision(p)] for p in engines)
    assert WIDTH_RANK[Precision(stdout.split("chose ")[1].split(".")[1])] == narrowest
    assert "the narrowest precision that passes" in stdout and "using the spec written by an earlier deploy" in err


STRICT = ('[preprocess]\nsize = [64, 96]\n\n[shapes]\ninput = "1x3x64x96/8x3x64x96/32x3x64x96"\n\n'
          '[data]\ncalibration = "photos"\n\n[thresholds.int8]\ncosine = 0.9999999\n')


def test_deploy_tunes_what_fails_and_leaves_no_failing_engine(cli, workdir):
    spec = workdir / "strict.toml"  # a minimum no INT8 configuration of this model reaches
    spec.write_text(STRICT)
    out = workdir / "strict"
    code, stdout, err = cli("deploy", workdir / "m.onnx", "--spec", spec, *RTX, "--precision", "int8",
                            "--budget-min", "1", "-o", out)
    assert code == 1, stdout + err
    assert "tuning it" in err and "int8: tuned" in stdout and "no precision passes" in stdout
    assert (out / "m.int8.tuned.cache").is_file() and (out / "m.int8.tuned.toml").is_file()
    assert not list(out.glob("*.engine")) and not list(out.glob("*.engine.json")) and not (out / "triton").exists()
    assert "FAIL" in (out / "summary.md").read_text()  # exit 1 keeps the verdicts, and says where
    assert f"the verdicts are in {out / 'summary.md'}" in stdout


def test_no_step_starts_once_the_budget_is_spent(workdir):
    """The deadline passes when INT8 is judged (a clock the test moves, no timing): FP8 is neither
    calibrated nor built, INT8 is not tuned, and deploy says so, keeping the engines that passed before."""
    (workdir / "strict.toml").write_text(STRICT)
    now = [0.0]

    def on_step(text):
        if text.startswith("int8: "):
            now[0] = 2.0

    options = DeployOptions(Target(8, 9), backend="tensorrt-rtx", deadline=Deadline(1.0, lambda: now[0]))
    out = workdir / "spent"
    result = deploy(workdir / "m.onnx", out, options, spec_path=workdir / "strict.toml", on_step=on_step)
    outcomes = {str(o.precision): o for o in result.outcomes}
    assert outcomes["fp16"].passed and outcomes["int8"].report is not None and not outcomes["int8"].passed
    assert outcomes["int8"].note == "fails; not tried: the budget ran out before tuning"
    assert outcomes["fp8"].note == "not tried: the budget ran out before its build" and outcomes["fp8"].report is None
    assert "ran out before: fp8 calibration, fp8 build, " in result.notes[-1] and "int8 tuning" in result.notes[-1]
    assert not list(out.glob("*.tuned.cache")) and not list(out.glob("m.int8.*engine*")) and not (out / "m.int8.onnx").exists()
    assert not list(out.glob("m.fp8.*")) and (out / "m.fp16.sm89.engine").is_file()  # fp8 not even calibrated
    assert result.chosen is not None and result.chosen.engine.is_file() and (out / "triton").is_dir()


def test_bf16_of_an_opset_12_model_is_built_and_judged_as_any_other(cli, workdir, tmp_path):
    """At opset 12 the BF16 graph's Casts from bfloat16 were not valid ONNX (Cast takes it from opset 13)
    and ONNX Runtime refused it, as on PP-OCR's recognizer: the BF16 pass now raises the opset."""
    model = models.conv_net(batch="N", height="H", width="W")
    model.opset_import[0].version = 12
    models.save(model, tmp_path / "m12.onnx")
    code, stdout, err = cli("deploy", tmp_path / "m12.onnx", "--data", workdir / "photos", *RTX, "--precision", "bf16",
                            "-o", tmp_path / "out")
    assert code == 0, stdout + err
    assert "| bf16 |" in stdout and "not validated" not in stdout and (tmp_path / "out" / "m12.bf16.sm89.engine").is_file()


@pytest.mark.parametrize("batch", [1, 16])
def test_samples_of_their_own_sizes_deploy(cli, tmp_path, batch):
    """romanizer-enc's name units, each its own length: deploy's range pass and calibration batched
    them by 8 and 16 whatever --batch-size said, and stopped with exit 2 ('pad samples to one shape').
    A batch now holds the samples of one shape in a row, at any --batch-size."""
    from skimage import data

    models.save(models.conv_net(batch="N", height="H", width="W"), tmp_path / "m.onnx")
    (tmp_path / "samples").mkdir()
    photo = data.astronaut().astype(np.float32).transpose(2, 0, 1) / 255
    for i, (height, width) in enumerate([(64, 96), (64, 96), (48, 80), (56, 72), (64, 64), (40, 96)]):
        np.save(tmp_path / "samples" / f"{i}.npy", photo[None, :, i * 8:i * 8 + height, :width])
    code, stdout, err = cli("deploy", tmp_path / "m.onnx", "--data", tmp_path / "samples", *RTX, "--precision", "int8",
                            "--batch-size", batch, "-o", tmp_path / "out")
    assert code == 0, stdout + err
    assert (tmp_path / "out" / "m.int8.sm89.engine").is_file()


def test_a_budget_of_zero_starts_nothing_and_says_so(cli, workdir):
    out = workdir / "zero"
    code, stdout, err = cli("deploy", workdir / "m.onnx", "--data", workdir / "photos", *RTX, "--budget-min", "0",
                            "-o", out)
    assert code == 1, stdout + err
    assert "ran out before: fp16 build, bf16 build, int8 calibration, int8 build, fp8 calibration" in stdout
    assert "no precision passes" in stdout and not list(out.glob("*.engine")) and not list(out.glob("*.cache"))


@pytest.mark.parametrize("args,message", [
    (("--data", "{w}/no-such-dir", *RTX), "--data {w}/no-such-dir: no such directory"),
    (("--data", "{w}/photos", "--target", "sm_80", "--backend", "tensorrt-rtx", "--precision", "fp8"),
     "fp8 needs compute capability 8.9"),
    (("--data", "{w}/photos", *RTX, "--budget-min", "-1"), "--budget-min"),
    (("--data", "{w}/wrong-shape", *RTX), "{w}/wrong-shape/000.npy: input 'input' has shape [4, 5]"),  # after init wrote
    (("--data", "{w}/one-file", *RTX), "--data {w}/one-file: one file holds every sample"),
    (("--data", "{w}/photos", "--validation", "{w}/no-such-dir", *RTX), "--validation {w}/no-such-dir: no such directory"),
    (("--spec", "{w}/wrong.toml", *RTX), "{w}/wrong-shape/000.npy: input 'input' has shape [4, 5]"),  # after the split
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, workdir, args, message):
    models.save_batches(workdir / "wrong-shape", np.zeros((8, 5), np.float32), per_file=4)
    models.save_batches(workdir / "one-file", np.zeros((4, 3, 64, 96), np.float32))
    (workdir / "wrong.toml").write_text('[data]\ncalibration = "wrong-shape"\n')  # no validation: deploy splits it
    out = workdir / "bad"
    code, _out, err = cli("deploy", workdir / "m.onnx", *[a.format(w=workdir) for a in args], "-o", out)
    errors = [line for line in err.splitlines() if not line.startswith("-- ")]  # "-- " lines are progress
    assert code == 2 and len(errors) == 1 and message.format(w=workdir) in errors[0]
    assert not out.exists()


def test_a_spent_deadline_stops_calibration_between_batches_and_deploy_says_so(workdir):
    """40 crops of a photo calibrate in batches of 16; the clock (moved by the test, no timing) passes
    the deadline after INT8's first batch: no INT8 cache, FP16 kept and served, the cut named."""
    from PIL import Image
    from skimage import data

    photo = data.astronaut()
    many = workdir / "many"
    many.mkdir(exist_ok=True)
    for row in range(8):
        for col in range(5):
            crop = np.ascontiguousarray(photo[row * 64:(row + 1) * 64, col * 96:(col + 1) * 96])
            Image.fromarray(crop).save(many / f"{row}{col}.png")
    spec = workdir / "many.toml"
    spec.write_text(STRICT.replace('"photos"', '"many"\nvalidation = "photos"').replace("0.9999999", "0.99"))
    armed, batches, at_cut = [False], [0], []

    def clock() -> float:
        if not armed[0]:
            return 0.0
        batches[0] += 1  # one check before each batch of the histogram pass
        return 0.0 if batches[0] == 1 else 2.0

    def on_step(text):
        armed[0] = armed[0] or text.startswith("calibrating int8")
        if text.startswith("int8 calibration: stopped"):
            at_cut.append(batches[0])

    options = DeployOptions(Target(8, 9), backend="tensorrt-rtx", deadline=Deadline(1.0, clock))
    out = workdir / "cut"
    steps = []
    result = deploy(workdir / "m.onnx", out, options, spec_path=spec, on_step=lambda t: (on_step(t), steps.append(t)))
    outcomes = {str(o.precision): o for o in result.outcomes}
    assert at_cut == [2]  # the first batch ran, the second was refused
    assert outcomes["int8"].note == "not tried: the budget ran out during its int8 calibration, which wrote no cache"
    assert "int8 calibration (cut short), int8 build, fp8 calibration, fp8 build" in result.notes[-1]
    assert not list(out.glob("*.cache")) and not list(out.glob("m.int8.*")) and not list(out.glob("m.fp8.*"))
    assert outcomes["fp16"].passed and result.chosen is not None and (out / "triton").is_dir()


def test_bad_data_late_in_the_directory_stops_deploy_before_its_builds(cli, workdir):
    """40 crops of a photo, then a file of the wrong shape: the probe and FP16/BF16's range pass (the first
    RANGE_SAMPLES samples) read only crops, FP16 and BF16 were built, and INT8's calibration met the bad
    file (exit 2, nothing left). The probe now reads every file once: exit 2 before any build."""
    from skimage import data

    from trtpipe.calibrate import RANGE_SAMPLES

    photo = data.astronaut().astype(np.float32).transpose(2, 0, 1) / 255
    crops = np.stack([photo[:, r * 64:(r + 1) * 64, c * 96:(c + 1) * 96] for r in range(8) for c in range(5)])
    assert len(crops) > RANGE_SAMPLES
    models.save_batches(workdir / "late-bad", crops[:36], per_file=4)
    np.save(workdir / "late-bad" / "zzz.npy", np.zeros((4, 5), np.float32))
    models.save_batches(workdir / "late-ok", crops[36:], per_file=4)
    spec = workdir / "late.toml"
    spec.write_text('[shapes]\ninput = "1x3x64x96/8x3x64x96/32x3x64x96"\n\n'
                    '[data]\ncalibration = "late-bad"\nvalidation = "late-ok"\n')
    out = workdir / "late"
    code, stdout, err = cli("deploy", workdir / "m.onnx", "--spec", spec, *RTX, "-o", out)
    errors = [line for line in err.splitlines() if not line.startswith("-- ")]
    assert code == 2 and len(errors) == 1 and "zzz.npy" in errors[0], stdout + err
    assert "-- built " not in err and not out.exists()


def test_a_model_with_nothing_to_quantize_deploys_its_half_precisions(cli, tmp_path):
    """A model with no Conv, MatMul or Gemm (an element-wise scorer; skl2onnx's tree ensembles):
    deploy built and passed FP16 and BF16, then INT8's calibration raised 'nothing to quantize' and
    the whole deploy stopped with exit 2, deleting them. INT8 and FP8 are now skipped as INT4 is."""
    models.save(models.per_sample(), tmp_path / "m.onnx")
    (tmp_path / "samples").mkdir()
    rng = np.random.default_rng(0)
    for i in range(8):
        np.save(tmp_path / "samples" / f"{i}.npy", rng.normal(0, 1, 16).astype(np.float32))
    code, stdout, err = cli("deploy", tmp_path / "m.onnx", "--data", tmp_path / "samples", *RTX, "-o", tmp_path / "out")
    assert code == 0, stdout + err
    assert "| fp16 |" in stdout and (tmp_path / "out" / "m.fp16.sm89.engine").is_file()
    assert "int8: nothing to quantize" in stdout + err and "fp8: nothing to quantize" in stdout + err


def test_a_graph_no_half_precision_builds_is_not_calibrated_for_int8_or_fp8(cli, tmp_path):
    """slanet-table: TensorRT-RTX refused its Loop in FP16 and BF16, then deploy calibrated INT8 and FP8 (142 s and
    189 s) for graphs that keep every layer they do not quantize in FP16, and TensorRT refused those the same way.
    A Det (which TensorRT's parser does not take, in any precision) after a Conv: once FP16 and BF16 fail to build,
    the narrower precisions are neither calibrated nor built, and the note says how to try one anyway."""
    models.save(models.conv_det(), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (16, 3, 8, 8)).astype(np.float32),
                        per_file=4)
    common = ("--data", tmp_path / "data", *RTX)
    code, stdout, err = cli("deploy", tmp_path / "m.onnx", *common, "-o", tmp_path / "out")
    assert code == 1, stdout + err
    assert "fp16: does not build" in stdout and "bf16: does not build" in stdout and "Det" in stdout
    for precision in ("int8", "fp8"):
        assert (f"{precision}: not tried (no calibration, no build): fp16 and bf16 did not build, and the {precision} "
                f"graph keeps every layer it does not quantize in FP16; 'trtpipe deploy --precision {precision}' "
                "tries it alone") in stdout
    assert "calibrating" not in err and not list((tmp_path / "out").glob("*.cache"))
    # --precision int8 has no half precision before it: it is calibrated and built, and TensorRT refuses it.
    code, stdout, err = cli("deploy", tmp_path / "m.onnx", *common, "--precision", "int8", "-o", tmp_path / "int8")
    assert code == 1 and "calibrating int8" in err and "int8: does not build" in stdout, stdout + err


def test_a_tuned_choice_says_how_much_of_it_is_in_its_precision_and_is_as_narrow_as_that(tmp_path):
    """A tuned INT8 that keeps 5 of its 6 layers in FP16 is no FP16 engine's equal in what it quantizes: deploy's
    reason for serving it says so (silero-vad's, streamed, was chosen as "narrower" and said nothing of it). Keeping
    most of its layers in FP16 it is FP16's width: beside FP16's plan of its size the nearer FP32 is served (gtcrn's
    tuned INT8, 24 of 25 layers in FP16, was served over FP16's plan as the narrower)."""
    from trtpipe.deploy import Outcome, choose
    from trtpipe.quality.validate import Check, Report

    def outcome(precision, megabytes, cosine=0.9999, minimum=0.99, **kwargs):
        engine = tmp_path / f"m.{precision}.{megabytes}.{cosine}.engine"
        engine.write_bytes(b"\0" * int(megabytes * 1e6))
        report = Report("c", "b", precision, False, 8, checks=[Check("cosine", "y", cosine, minimum)])
        return Outcome(Precision(precision), engine=engine, report=report, **kwargs)

    note = "tuned (1 of 6 layers kept in FP16, method entropy): passes"
    tuned = outcome("int8", 1.9, 0.995, tuned=True, kept_share=1 / 6, note=note)
    for prefer in ("size", "precision"):
        best, why = choose([outcome("fp16", 1.9), tuned], prefer)
        assert best is tuned and why.endswith(f"; {note}"), why
    # its margin against INT8's minimum is the smaller, FP16's against FP16's the larger: FP16 all the same
    mostly_kept = outcome("int8", 1.85, 0.9999, tuned=True, kept_share=5 / 6, note=note.replace("1 of", "5 of"))
    for prefer in ("size", "precision"):
        best, why = choose([mostly_kept, outcome("fp16", 1.9, 0.9995, minimum=0.999)], prefer)
        assert best.precision is Precision.FP16 and "kept in FP16" not in why, why
    best, why = choose([outcome("fp16", 1.9), outcome("int8", 1.9)])
    assert best.precision is Precision.INT8 and "kept in FP16" not in why  # the default, untuned: nothing kept
