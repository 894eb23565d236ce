"""From an ONNX model and a data directory to a passing engine that Triton serves: `trtpipe deploy`.

    spec (given, or started as `init` starts one) -> validation data held out of the calibration data
    -> calibrate the INT8/FP8 caches -> build every precision the target runs -> validate each against
    FP32 ONNX Runtime -> tune the INT8/FP8 that fail and rebuild them -> delete the engines that fail
    -> OUT/summary.md and OUT/triton/ (a Triton model repository of the engine chosen among those that pass)

Every step is the library function the single command calls (build, calibrate, compare, tune,
write_repository), so a change to one of them changes deploy too. One Deadline (`--budget-min`) bounds
the whole run: no step starts after it, and what it left untried is said.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trtpipe import data
from trtpipe.build import BuildOptions, build, caches_for
from trtpipe.calibrate import DEFAULT_METHOD, CalibrationOptions, calibrate
from trtpipe.deadline import Deadline, OutOfTime
from trtpipe.errors import NothingToQuantize, TrtpipeError
from trtpipe.files import check_output, check_output_dir, ensure_dir, sidecar_path, write_text
from trtpipe.graph import onnxio
from trtpipe.spec import ModelSpec, decided_inputs, load_spec, resolve_inputs
from trtpipe.targets import Precision, Target

# How narrow a precision is: the fewest bits a value is computed in first (weight-only INT4 keeps FP16
# activations, so it comes after INT8 and FP8).
WIDTH_RANK = {Precision.FP4: 0, Precision.INT8: 1, Precision.FP8: 1, Precision.INT4: 2, Precision.FP16: 3,
              Precision.BF16: 3, Precision.TF32: 4, Precision.FP32: 5}
TUNABLE = (Precision.INT8, Precision.FP8)  # what `tune` searches
# The half precisions: every narrower precision's typed graph (INT8, FP8, INT4, FP4) keeps the layers it does
# not quantize in FP16, so when every half precision deploy tried failed to build, the graph is what TensorRT
# refuses (slanet-table's Loop, in every precision), and the narrower ones are not calibrated or built.
HALVES = (Precision.FP16, Precision.BF16)
# What deploy chooses among the engines that pass. size: the smallest engine file (a narrower precision
# is not always smaller: TensorRT-RTX's INT8 plans built on a CPU embed more kernel source than FP16's,
# docs/zoo.md "Engine size"); engines within SIZE_TIE of the smallest count as equally small, and among
# them the narrowest precision, then the one nearer FP32, wins. precision: the narrowest precision,
# then the one nearer FP32.
PREFERENCES = ("size", "precision")
# YOLOv8n's BF16 plan is 3% smaller than its FP16 plan (9.7 against 10.0 MB) and further from FP32
# (F1 0.972 against 0.999 on 128 photos): a few percent of size is not worth the accuracy.
SIZE_TIE = 0.05
# When no validation data apart from the calibration data is given, every HOLD_OUT_EVERY-th data
# file by name validates and calibration never reads it: the same files on every run.
HOLD_OUT_EVERY = 4


@dataclass
class DeployOptions:
    """What deploy builds, how long it may take and what it prefers; None precision: every one the target
    runs but FP32."""

    target: Target
    backend: str = "auto"
    precision: str | None = None
    budget_minutes: float = 10.0  # the whole run: no step starts after it
    batch_size: int = 16
    prefer: str = "size"  # PREFERENCES
    deadline: Deadline | None = None  # None: `budget_minutes` from when deploy() starts
    verbose: bool = False  # TensorRT's own log on each build, as build --verbose shows it

    def __post_init__(self):
        if self.prefer not in PREFERENCES:
            raise TrtpipeError(f"--prefer {self.prefer}: use one of {', '.join(PREFERENCES)}")


@dataclass
class Outcome:
    """One precision: its engine (None when it did not build, or failed and was deleted) and its verdict."""

    precision: Precision
    engine: Path | None = None
    typed_onnx: Path | None = None
    report: object = None  # trtpipe.quality.validate.Report
    report_path: Path | None = None
    tuned: bool = False
    kept_share: float = 0.0  # tuned: the share of its quantizable layers tuning kept in FP16
    note: str = ""  # why it did not build, or what tuning did
    refused: bool = False  # the backend failed to parse or build it (not the budget, not "nothing to quantize")

    @property
    def passed(self) -> bool:
        return self.engine is not None and self.report is not None and self.report.passed

    @property
    def megabytes(self) -> float:
        return self.engine.stat().st_size / 1e6 if self.engine is not None else 0.0

    def width(self) -> int:
        """Return how narrow what it computes is (WIDTH_RANK): a tuned engine that keeps most of its layers in FP16
        is FP16's width, whatever its name (gtcrn's tuned INT8 kept 24 of 25, and deploy served it over FP16's plan
        of the same size as the narrower)."""
        return WIDTH_RANK[Precision.FP16] if self.tuned and self.kept_share > 0.5 else WIDTH_RANK[self.precision]

    def margin(self) -> float:
        """Return the share of the allowed loss the deciding check uses (lower is nearer FP32)."""
        from trtpipe.quality.validate import deciding

        check = deciding(self.report.checks) if self.report is not None else None
        return check.used if check is not None else 0.0


@dataclass
class DeployResult:
    spec: Path
    spec_written: bool
    outcomes: list[Outcome]
    chosen: Outcome | None
    why: str
    summary: str
    summary_path: Path | None
    repository: Path | None
    simulated: bool  # validation ran the typed ONNX in ONNX Runtime, not the engine
    wanted: str  # what counts as success: the precision asked for, or any beyond fp32
    validation: str = ""  # which data validated, and whether calibration read it: one sentence
    passed: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass
class _Inputs:
    """The spec deploy runs on, whether this run wrote it, and which data validates."""

    spec: ModelSpec
    path: Path
    written: bool
    validation: str  # which data validates, in a sentence


def _inputs(model, model_path: Path, data_dir: Path | None, validation_dir: Path | None, spec_path: Path | None,
            output: Path, on_step) -> _Inputs:
    """Return the spec (given, written earlier into OUT, or written now as `init` writes it) with validation
    data calibration does not read: --validation, the spec's, else files held out of the calibration data."""
    from trtpipe.starting_spec import starting_spec

    written, how, source = False, "", None
    if spec_path is None:
        spec_path = output / f"{model_path.stem}.toml"
        if spec_path.is_file():
            on_step(f"using the spec written by an earlier deploy: {spec_path} (delete it to start a new one)")
        else:
            if data_dir is None:
                raise TrtpipeError("--data DIR is needed (or a --spec with data.calibration)")
            check_output(spec_path, [model_path, data_dir])
            # init refuses data it cannot use, naming the file: the user's, before any split links to it
            starting_spec(model, model_path, data_dir, spec_path=spec_path)
            calibration, validation = data_dir, validation_dir
            if validation is None:
                source = data_dir
                calibration, validation, how = _hold_out(data_dir, output / "data", on_step)
            ensure_dir(output)
            write_text(spec_path, starting_spec(model, model_path, calibration, spec_path=spec_path,
                                                validation_dir=validation))
            written = True
            on_step(f"wrote {spec_path} as 'trtpipe init' does; check its lines marked CHECK")
    spec = resolve_inputs(load_spec(spec_path), model, model_path)
    if data_dir is not None and not written:  # --data is what calibration reads, as with build and calibrate
        spec.calibration = Path(data_dir).resolve()
    if validation_dir is not None:
        spec.validation = Path(validation_dir).resolve()
    if spec.calibration is None:
        raise TrtpipeError(f"--data DIR is needed (or a --spec with data.calibration): {spec_path} names no calibration data")
    if not how and (spec.validation is None or _overlap(spec.calibration, spec.validation)):
        source = spec.calibration
        spec.calibration, spec.validation, how = _hold_out(source, output / "data", on_step)
        spec.calibration, spec.validation = spec.calibration.resolve(), spec.validation.resolve()
    inputs = _Inputs(spec, spec_path, written, how or f"validation on {spec.validation}, which calibration does not read")
    # Bad data is bad input (exit 2, nothing left), found before any step: a precision that needs no
    # calibration is built first, and would otherwise meet the data only when it is validated.
    for directory in [source] if source is not None else [spec.calibration, spec.validation]:
        _probe(model_path, spec, directory)
    return inputs


def _overlap(calibration: Path, validation: Path) -> bool:
    """Return True when a data file of `validation` is one of `calibration`'s (links followed)."""
    files = {p.resolve() for p in data.list_files(calibration)}
    return any(p.resolve() in files for p in data.list_files(validation, "data.validation"))


def _hold_out(source: Path, into: Path, on_step) -> tuple[Path, Path, str]:
    """Return calibration and validation directories of links to disjoint files of `source`, made in `into`
    (every HOLD_OUT_EVERY-th file by name validates), and the sentence that says so."""
    files = data.list_files(source)
    if len(files) < 2:
        raise TrtpipeError(f"--data {source}: one file holds every sample, so deploy cannot hold some out to "
                           "validate on; pass --validation DIR (other samples of the same kind)")
    held = files[HOLD_OUT_EVERY - 1::HOLD_OUT_EVERY] or files[-1:]
    kept = [p for p in files if p not in held]
    labels = [source / data.LABELS_FILE] if (source / data.LABELS_FILE).is_file() else []
    draft = into.with_name(into.name + ".partial")
    shutil.rmtree(draft, ignore_errors=True)
    for name, chosen in (("calibration", kept), ("validation", held)):
        (draft / name).mkdir(parents=True)
        for path in chosen + labels:
            (draft / name / path.name).symlink_to(path.resolve())
    if into.exists():
        shutil.rmtree(into)
    os.replace(draft, into)
    how = (f"validation on {len(held)} of the {len(files)} files of {source}, held out (every {HOLD_OUT_EVERY}th by "
           f"name: {into / 'validation'}); calibration and tuning read the other {len(kept)} ({into / 'calibration'})")
    on_step(how)
    return into / "calibration", into / "validation", how


def _probe(model_path: Path, spec: ModelSpec, source: Path) -> None:
    """Run the FP32 model on the first sample of `source`, and read every other once: data it cannot read
    is bad input, named by the file the user gave (not by its link in OUT/data), before any build."""
    from trtpipe.runtime.onnxrt import OnnxRunner

    size = data.fixed_batch(spec) or 1  # an export for batch N runs on N samples at once
    with data.model_runs_on(source), OnnxRunner(model_path) as runner:
        batches = data.iter_batches(spec, source, size)
        runner(next(batches).arrays)
        for _ in batches:  # a NaN in the last file stopped deploy after its builds, not before
            pass


def _runs_here(target: Target) -> bool:
    """Return True when the engines can run on this machine's GPU (else validation simulates the typed ONNX)."""
    import importlib.util

    from trtpipe.targets import local_target

    try:
        return local_target().capability == target.capability and importlib.util.find_spec("pycuda") is not None
    except TrtpipeError:
        return False


def _validate(outcome: Outcome, model_path: Path, spec: ModelSpec, reports: Path, on_engine: bool,
              batch_size: int) -> None:
    """Judge the outcome's engine (or, simulated, its typed ONNX) against FP32 on the validation data; write its report.

    A candidate that cannot run (ONNX Runtime refuses its graph) is the outcome's note, not bad
    input: the data was probed before any step.
    """
    from trtpipe.quality.validate import compare, named_thresholds, thresholds_for, write_report
    from trtpipe.runtime.onnxrt import OnnxRunner

    labels = data.labels_path(None, spec.labels, spec.validation)
    labels = data.read_labels(labels) if labels else None
    precision = str(outcome.precision)
    try:
        if on_engine:
            from trtpipe.runtime.engine import Engine

            runner, candidate = Engine(outcome.engine), outcome.engine
        else:
            runner, candidate = OnnxRunner(outcome.typed_onnx), outcome.typed_onnx
        with runner, OnnxRunner(model_path) as base, data.model_runs_on(spec.validation):
            outcome.report = compare(runner, base, spec, spec.validation, precision, labels,
                                     thresholds_for(precision, spec), batch_size, named=named_thresholds(precision, spec))
    except TrtpipeError as exc:
        outcome.report, outcome.note = None, f"not validated (its engine is deleted): {exc}"
        return
    outcome.report_path = write_report(outcome.report, reports, candidate.name)[0]


def _remove(outcome: Outcome) -> None:
    """Delete a failing precision's engine, its sidecar and its typed ONNX: deploy leaves only engines that pass."""
    for path in (outcome.engine, outcome.typed_onnx):
        if path is not None:
            path.unlink(missing_ok=True)
            sidecar_path(path).unlink(missing_ok=True)
    outcome.engine = None


def choose(outcomes: list[Outcome], prefer: str = "size") -> tuple[Outcome | None, str]:
    """Return the passing outcome `prefer` (PREFERENCES) picks and the sentence that says why, and for a tuned
    one how much of it is in its precision (silero-vad's tuned INT8 kept 5 of its 6 layers in FP16)."""
    passing = [o for o in outcomes if o.passed]
    if not passing:
        return None, "no precision passes"
    best, why = _preferred(passing, prefer)
    return best, why + (f"; {best.note}" if best.tuned else "")


def _preferred(passing: list[Outcome], prefer: str) -> tuple[Outcome, str]:
    def narrowest(o: Outcome) -> tuple:
        # At one width an untuned engine first: a tuned one's margin is against its own precision's looser minimums
        # (gtcrn's tuned INT8 read nearer FP32 than FP16 at cosine 1.00000 and 19.5 dB on its worst bin).
        return o.width(), o.tuned, o.margin()

    if prefer == "precision":
        best = min(passing, key=narrowest)
        why = f"{best.precision}: the narrowest precision that passes ({best.report.deciding_checks()})"
        peers = [o for o in passing if o is not best and o.width() == best.width()]
        if peers:
            why += f"; nearer FP32 than {', '.join(f'{o.precision} ({o.report.deciding_checks()})' for o in peers)}"
        smaller = [o for o in passing if o.megabytes < best.megabytes]
        if smaller:
            why += f"; {_sizes(smaller)} smaller (--prefer size)"
        return best, why
    smallest = min(passing, key=lambda o: (o.engine.stat().st_size, *narrowest(o)))
    best = min((o for o in passing if o.megabytes <= smallest.megabytes * (1 + SIZE_TIE)), key=narrowest)
    why = f"{best.precision}: the smallest engine that passes ({best.megabytes:.1f} MB; {best.report.deciding_checks()})"
    if best is not smallest:
        better = "narrower" if best.width() < smallest.width() else "nearer FP32"
        why = (f"{best.precision}: within {SIZE_TIE:.0%} of the smallest engine that passes ({smallest.precision}, "
               f"{smallest.megabytes:.1f} MB), and {better} ({best.megabytes:.1f} MB; {best.report.deciding_checks()})")
    narrower = [o for o in passing if o.width() < best.width()]
    if narrower:
        why += f"; {_sizes(narrower)} narrower but larger (--prefer precision)"
    return best, why


def _sizes(outcomes: list[Outcome]) -> str:
    listed = ", ".join(f"{o.precision} ({o.megabytes:.1f} MB)" for o in outcomes)
    return f"{listed} {'passes' if len(outcomes) == 1 else 'pass'} too,"


def deploy(model_path: str | os.PathLike, output: str | os.PathLike, options: DeployOptions,
           data_dir: str | os.PathLike | None = None, spec_path: str | os.PathLike | None = None,
           on_step: Callable[[str], None] = lambda text: None,
           validation_dir: str | os.PathLike | None = None) -> DeployResult:
    """Return what deploy left in `output`: engines that pass, their reports, a summary and a Triton repository.

    Bad input (model, data, spec, target, a missing backend) is a TrtpipeError that leaves nothing
    this run wrote behind, however late it is found. A precision whose engine does not build, fails validation after tuning, or was not reached
    before the deadline (`options.deadline`, else `budget_minutes` from now) is reported in its Outcome
    and leaves no engine. `validation_dir` (None: the spec's, else files held out of the calibration
    data): what the engines are judged on.
    """
    from trtpipe import backend as backends

    deadline = options.deadline or Deadline.after(options.budget_minutes * 60)
    model_path, output = Path(model_path), Path(output)
    data_dir = Path(data_dir) if data_dir is not None else None
    validation_dir = Path(validation_dir) if validation_dir is not None else None
    check_output_dir(output, "-o", "the engines, reports and Triton repository")
    if options.budget_minutes < 0:
        raise TrtpipeError(f"--budget-min {options.budget_minutes:g}: give 0 or more minutes")
    model = onnxio.load_float(model_path)
    if data_dir is not None:
        data.list_files(data_dir)  # no such directory, or no samples: before anything is written
    if validation_dir is not None:
        data.list_files(validation_dir, "--validation")
    backend_spec = backends.choose_spec(options.backend, options.target)
    backends.load(backend_spec, options.target)  # not installed: say so now, not once per precision
    if options.precision is not None:
        precisions = backends.plan_precisions([options.precision], options.target, backend_spec)
    else:
        precisions = [p for p in backends.plan_precisions(["auto"], options.target, backend_spec) if p is not Precision.FP32]
    ran = "fp32 is the baseline" if Precision.FP32 not in precisions else "as asked"
    on_step(f"{backend_spec.name} on {options.target.sm}: {' '.join(map(str, precisions))} ({ran}; 'trtpipe plan' says why not others)")
    before, had_output = _files(output), output.is_dir()
    try:
        inputs = _inputs(model, model_path, data_dir, validation_dir, Path(spec_path) if spec_path else None,
                         output, on_step)
        return _run(model, model_path, output, options, precisions, inputs, deadline, on_step)
    except (TrtpipeError, KeyboardInterrupt):
        # Bad input found late (a calibration sample the model cannot read, after FP16 and BF16 were
        # built), or a stop (Ctrl-C, SIGTERM): nothing this run wrote stays, a spec or split included.
        _remove_written(output, before, had_output)
        raise


def _files(directory: Path) -> dict[Path, tuple[int, int]]:
    """Return {path: (inode, mtime ns)} of every file and link under `directory` (links not followed)."""
    found = {}
    for root, dirs, names in os.walk(directory):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            stat = os.lstat(os.path.join(root, name))
            found[Path(root) / name] = (stat.st_ino, stat.st_mtime_ns)
    return found


def _remove_written(output: Path, before: dict[Path, tuple[int, int]], had_output: bool) -> None:
    """Delete what this run wrote in `output` (files new or changed since `before`), then the folders it left empty.

    A file of an earlier run that this one replaced goes too: what is there is no longer that run's."""
    for path, stamp in _files(output).items():
        if before.get(path) != stamp:
            path.unlink(missing_ok=True)
    kept = {parent for path in before for parent in path.parents} | ({output} if had_output else set())
    for root, dirs, names in os.walk(output, topdown=False):
        if Path(root) not in kept and not os.listdir(root):
            os.rmdir(root)


def _run(model, model_path: Path, output: Path, options: DeployOptions, precisions: list[Precision], inputs: _Inputs,
         deadline: Deadline, on_step) -> DeployResult:
    """The deploy of `model` (loaded from `model_path`) after its input checks: calibrate, build, validate, tune, keep
    what passes; no step starts once `deadline` has passed."""
    spec = inputs.spec
    build_options = BuildOptions(target=options.target, backend=options.backend, spec=spec,
                                 calibration_data=spec.calibration, exclude=list(spec.exclude),
                                 shapes=decided_inputs(spec)[0], min_weights=spec.min_weights,
                                 verbose=options.verbose)
    untried: list[str] = []  # the steps the deadline stopped, in order
    # Each cache is calibrated just before the first precision that needs it: the plan's order puts
    # FP16 and BF16 first, which need none, so a budget that calibration would spend (picodet-layout's
    # INT8 took 6 of 5 minutes on the shared cores) still gives the engines that need no data.
    caches, to_calibrate = caches_for(model_path, precisions, build_options, output)
    grid_of = {path: grid for grid, path in to_calibrate.items()}
    calibrated, uncalibrated = set(), set()  # the second: caches the deadline left unwritten
    nothing: dict[Path, str] = {}  # caches of a model with no layer they would scale: why, skipped as int4 is
    build_options.caches = caches

    if options.precision in ("int8", "fp8"):  # asked for alone: a precision with no layer is refused, as build refuses it
        from trtpipe.calibrate import calibrated_graph, refuse_no_layer

        refuse_no_layer(calibrated_graph(model, spec), model_path, Precision(options.precision), spec)
    if not deadline.passed():
        # Every build would observe the same ranges again: a minute of ppocr-det's, per precision.
        from trtpipe.calibrate import observe_data_ranges

        on_step(f"observing activation ranges on {spec.calibration} (for the half-precision parts)")
        build_options.ranges = observe_data_ranges(onnxio.load(model_path), spec.calibration, spec,
                                                   batch_size=options.batch_size)

    on_engine = _runs_here(options.target)
    reports = output / "reports"
    outcomes = []
    for precision in precisions:
        outcome = Outcome(precision)
        outcomes.append(outcome)
        refused = _halves_refused(outcomes)
        if refused and WIDTH_RANK[precision] < WIDTH_RANK[Precision.FP16]:
            outcome.note = (f"not tried (no calibration, no build): {refused} did not build, and the {precision} graph "
                            "keeps every layer it does not quantize in FP16; 'trtpipe deploy --precision "
                            f"{precision}' tries it alone")
            on_step(f"{precision}: {outcome.note}")
            continue
        cache = caches.get(precision)
        if cache in grid_of and cache not in calibrated | uncalibrated | set(nothing):
            if deadline.passed():
                untried.append(f"{grid_of[cache]} calibration")
                uncalibrated.add(cache)
            else:
                on_step(f"calibrating {grid_of[cache]} on {spec.calibration}")
                try:
                    calibrate(model_path, spec.calibration, cache, CalibrationOptions(DEFAULT_METHOD[grid_of[cache]],
                                                                                      options.batch_size,
                                                                                      grid=grid_of[cache]), spec,
                              deadline=deadline)
                except OutOfTime as cut:  # between two batches: no cache is written
                    on_step(str(cut))
                    untried.append(f"{cut.what} (cut short)")
                    uncalibrated.add(cache)
                except NothingToQuantize as exc:
                    nothing[cache] = str(exc)
                else:
                    calibrated.add(cache)
        if cache in nothing:
            outcome.note = f"nothing to quantize ({nothing[cache]})"
            on_step(f"{precision}: {outcome.note}")
            continue
        if cache in uncalibrated or deadline.passed():
            outcome.note = OUT_OF_TIME.format(step="its build")
            if cache in uncalibrated and f"{grid_of[cache]} calibration (cut short)" in untried:
                outcome.note = f"not tried: the budget ran out during its {grid_of[cache]} calibration, which wrote no cache"
            untried.append(f"{precision} build")
            continue
        _build(outcome, model_path, output, build_options, on_step)
        if outcome.engine is None:
            continue
        if deadline.passed():
            outcome.note = OUT_OF_TIME.format(step="its validation") + " (its engine is deleted: deploy keeps only engines that pass)"
            untried.append(f"{precision} validation")
            continue
        _validate(outcome, model_path, spec, reports, on_engine, options.batch_size)
        if outcome.report is not None:
            on_step(f"{precision}: {outcome.report.deciding_checks()} -> {'PASS' if outcome.passed else 'FAIL'}")

    failing = [o for o in outcomes if o.report is not None and not o.passed and o.precision in TUNABLE]
    for number, outcome in enumerate(failing):
        if deadline.passed():
            outcome.note = "fails; " + OUT_OF_TIME.format(step="tuning")
            untried.append(f"{outcome.precision} tuning")
            continue
        # What is left, shared by the precisions still to tune; a rebuild and its validation follow each.
        search = deadline.within(deadline.left() / (len(failing) - number))
        cut = _tune(outcome, model_path, spec, options, build_options, output, search, deadline, on_engine, on_step)
        if cut:
            untried.append(f"{outcome.precision} {cut}")
    for outcome in outcomes:
        if outcome.engine is not None and not outcome.passed:
            _remove(outcome)

    chosen, why = choose(outcomes, options.prefer)
    wanted = options.precision or "a precision beyond fp32"
    report_paths = [o.report_path for o in outcomes if o.report_path is not None]
    summary, summary_path = "", None
    if report_paths:
        from trtpipe.quality.validate import summary_markdown, summary_rows

        summary = summary_markdown(summary_rows(report_paths))
        summary_path = output / "summary.md"
        write_text(summary_path, summary + "\n")
    repository = _repository(chosen, output) if chosen is not None else None
    if chosen is None and (output / "triton").is_dir():
        shutil.rmtree(output / "triton")  # an earlier run's: it would serve an engine this run did not pass
    result = DeployResult(inputs.path, inputs.written, outcomes, chosen, why, summary, summary_path, repository,
                          simulated=not on_engine, wanted=wanted, validation=inputs.validation,
                          passed=chosen is not None)
    if untried:
        result.notes.append(f"the budget ({options.budget_minutes:g} min) ran out before: {', '.join(untried)}; "
                            "a larger --budget-min tries them (a rerun calibrates again)")
    return result


# An outcome's note for a step the deadline stopped.
OUT_OF_TIME = "not tried: the budget ran out before {step}"


def _halves_refused(outcomes: list[Outcome]) -> str:
    """Return the half precisions tried so far ("fp16 and bf16") when every one failed to build, else "".

    The half builds are the probe: they come first in the plan and cost nothing extra. An FP32 build first
    would cost one more build on every model, and its success would not say that the narrower graphs,
    FP16 where not quantized, build."""
    halves = [o for o in outcomes if o.precision in HALVES]
    if not halves or not all(o.refused for o in halves):
        return ""
    return " and ".join(str(o.precision) for o in halves)


def _build(outcome: Outcome, model_path: Path, output: Path, options: BuildOptions, on_step) -> None:
    """Build one precision into `output`; a backend that cannot build it is the outcome's note, not an error."""
    try:
        results = build(model_path, output, [str(outcome.precision)], options)
    except NothingToQuantize as exc:
        outcome.note = f"nothing to quantize ({exc})"
    except TrtpipeError as exc:
        outcome.note, outcome.refused = f"does not build: {exc}", True
    else:
        outcome.engine, outcome.typed_onnx = results[0].engine, results[0].typed_onnx
        size = outcome.engine.stat().st_size / 1e6
        on_step(f"built {outcome.engine} ({size:.1f} MB, {results[0].info.build_seconds:.1f} s)")
        return
    on_step(f"{outcome.precision}: {outcome.note}")


def _tune(outcome: Outcome, model_path: Path, spec: ModelSpec, options: DeployOptions, build_options: BuildOptions,
          output: Path, search: Deadline, deadline: Deadline, on_engine: bool, on_step) -> str:
    """Tune a failing INT8/FP8 precision by `search` (its search and its confirmation), then, while `deadline`
    allows, rebuild it with what tuning wrote and judge it again; return what a deadline stopped ("": nothing)."""
    from dataclasses import replace

    from trtpipe.quality.tune import TuneOptions, tune
    from trtpipe.quality.tune_report import exclusions_path, write_report, write_tuned

    precision = outcome.precision
    on_step(f"{precision} fails: tuning it for up to {search.left() / 60:.1f} min")
    labels = data.labels_path(None, spec.labels, spec.validation)
    labels = data.read_labels(labels) if labels else None
    try:
        with data.model_runs_on(spec.calibration):
            result = tune(model_path, spec, precision, options.target, spec.calibration,
                          TuneOptions(validation_dir=spec.validation, labels=labels, budget_seconds=search.left(),
                                      batch_size=options.batch_size, deadline=search),
                          on_phase=lambda t: on_step(f"  {t}"))
    except TrtpipeError as exc:
        outcome.note = f"not tuned: {exc}"
        on_step(f"{precision}: {outcome.note}")
        return ""
    cache = output / f"{model_path.stem}.{precision}.tuned.cache"
    write_tuned(result, cache, precision)
    write_report(result, spec, precision, output / "reports")
    config, _, quantized = result.written
    kept = f"{len(config.exclude)} of {len(config.exclude) + quantized} layers kept in FP16, method {config.method}"
    stopped = f"; cut short: {result.stopped}" if result.stopped else ""
    outcome.tuned, outcome.kept_share = True, len(config.exclude) / max(len(config.exclude) + quantized, 1)
    _remove(outcome)  # the untuned engine fails: it must not stay, whether or not the tuned one is built
    if deadline.passed():
        outcome.note = (f"tuned ({kept}{stopped}), " + OUT_OF_TIME.format(step="its rebuild")
                        + f": build it with --cache {cache} --exclude @{exclusions_path(cache)}")
        return "rebuild after tuning"
    tuned = replace(build_options, caches={**build_options.caches, precision: cache}, exclude=list(config.exclude))
    outcome.report = None
    _build(outcome, model_path, output, tuned, on_step)
    if outcome.engine is None:
        return "tuning (cut short)" if result.stopped else ""
    if deadline.passed():
        outcome.note = f"tuned ({kept}{stopped}), " + OUT_OF_TIME.format(step="its validation")
        return "validation after tuning"
    _validate(outcome, model_path, spec, output / "reports", on_engine, options.batch_size)
    if outcome.report is None:  # it could not run: _validate's note says why
        return "tuning (cut short)" if result.stopped else ""
    outcome.note = f"tuned ({kept}{stopped}): {'passes' if outcome.passed else 'still fails'}"
    on_step(f"{precision} tuned: {outcome.report.deciding_checks()} -> {'PASS' if outcome.passed else 'FAIL'}")
    return "tuning (cut short)" if result.stopped else ""


def _repository(chosen: Outcome, output: Path) -> Path:
    """Write OUT/triton, a Triton model repository of the chosen engine, replacing the last one whole."""
    from trtpipe.serve.repository import RepositoryOptions, write_repository

    final, draft = output / "triton", output / "triton.partial"
    shutil.rmtree(draft, ignore_errors=True)
    write_repository([chosen.engine], draft, RepositoryOptions())
    if final.exists():
        shutil.rmtree(final)
    os.replace(draft, final)
    return final
