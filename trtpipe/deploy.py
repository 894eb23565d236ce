"""From an ONNX model and a data directory to a passing engine that Triton serves: `trtpipe deploy`.

    spec (given, or started as `init` starts one) -> calibrate the INT8/FP8 caches
    -> build every precision the target runs -> validate each against FP32 ONNX Runtime
    -> tune the INT8/FP8 that fail, within the budget, and rebuild them -> delete the engines that fail
    -> OUT/summary.md and OUT/triton/ (a Triton model repository of the best engine that passes)

Every step is the library function the single command calls (build, calibrate, compare, tune,
write_repository), so a change to one of them changes deploy too.
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
from trtpipe.config import ModelSpec, decided_inputs, load_spec, resolve_inputs
from trtpipe.errors import TrtpipeError
from trtpipe.files import check_output, ensure_dir, sidecar_path, write_text
from trtpipe.graph import onnxio
from trtpipe.graph.lowbit import NothingToQuantize
from trtpipe.targets import Precision, Target

# Which engine is best among those that pass: the fewest bits a value is computed in first (weight-only
# INT4 keeps FP16 activations, so it comes after INT8 and FP8); within a rank, the one nearer FP32.
WIDTH_RANK = {Precision.FP4: 0, Precision.INT8: 1, Precision.FP8: 1, Precision.INT4: 2, Precision.FP16: 3,
              Precision.BF16: 3, Precision.TF32: 4, Precision.FP32: 5}
TUNABLE = (Precision.INT8, Precision.FP8)  # what `tune` searches


@dataclass
class DeployOptions:
    """What deploy builds and how long it may tune; None precision: every one the target runs but FP32."""

    target: Target
    backend: str = "auto"
    precision: str | None = None
    budget_minutes: float = 10.0  # tuning, shared by the precisions that fail
    batch_size: int = 16


@dataclass
class Outcome:
    """One precision: its engine (None when it did not build, or failed and was deleted) and its verdict."""

    precision: Precision
    engine: Path | None = None
    typed_onnx: Path | None = None
    report: object = None  # trtpipe.quality.validate.Report
    report_path: Path | None = None
    tuned: bool = False
    note: str = ""  # why it did not build, or what tuning did

    @property
    def passed(self) -> bool:
        return self.engine is not None and self.report is not None and self.report.passed

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
    passed: bool = False
    notes: list[str] = field(default_factory=list)


def _spec(model, model_path: Path, data_dir: Path | None, spec_path: Path | None, output: Path,
          on_step) -> tuple[ModelSpec, Path, bool]:
    """Return the spec (given, written earlier into OUT, or written now as `init` writes it), its path, and
    whether it was written now."""
    from trtpipe.starting_spec import starting_spec

    written = False
    if spec_path is None:
        spec_path = output / f"{model_path.stem}.toml"
        if spec_path.is_file():
            on_step(f"using the spec written by an earlier deploy: {spec_path} (delete it to start a new one)")
        else:
            if data_dir is None:
                raise TrtpipeError("--data DIR is needed (or a --spec with data.calibration)")
            check_output(spec_path, [model_path, data_dir])
            text = starting_spec(model, model_path, data_dir, spec_path=spec_path)  # data it cannot use: nothing made
            ensure_dir(output)
            write_text(spec_path, text)
            written = True
            on_step(f"wrote {spec_path} as 'trtpipe init' does; check its lines marked CHECK")
    spec = resolve_inputs(load_spec(spec_path), model, model_path)
    if data_dir is not None:  # --data is what calibration reads, as with build and calibrate
        spec.calibration = Path(data_dir).resolve()
    if spec.calibration is None:
        raise TrtpipeError(f"--data DIR is needed (or a --spec with data.calibration): {spec_path} names no calibration data")
    spec.validation = spec.validation or spec.calibration
    return spec, spec_path, written


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
    """Judge the outcome's engine (or, simulated, its typed ONNX) against FP32 on the validation data; write its report."""
    from trtpipe.quality.validate import compare, named_thresholds, thresholds_for, write_report
    from trtpipe.runtime.onnxrt import OnnxRunner

    if on_engine:
        from trtpipe.runtime.engine import Engine

        runner, candidate = Engine(outcome.engine), outcome.engine
    else:
        runner, candidate = OnnxRunner(outcome.typed_onnx), outcome.typed_onnx
    labels = data.labels_path(None, spec.labels, spec.validation)
    labels = data.read_labels(labels) if labels else None
    precision = str(outcome.precision)
    with runner, OnnxRunner(model_path) as base, data.model_runs_on(spec.validation):
        outcome.report = compare(runner, base, spec, spec.validation, precision, labels,
                                 thresholds_for(precision, spec), batch_size, named=named_thresholds(precision, spec))
    outcome.report_path = write_report(outcome.report, reports, candidate.name)[0]


def _remove(outcome: Outcome) -> None:
    """Delete a failing precision's engine, its sidecar and its typed ONNX: deploy leaves only engines that pass."""
    for path in (outcome.engine, outcome.typed_onnx):
        if path is not None:
            path.unlink(missing_ok=True)
            sidecar_path(path).unlink(missing_ok=True)
    outcome.engine = None


def choose(outcomes: list[Outcome]) -> tuple[Outcome | None, str]:
    """Return the best passing outcome (WIDTH_RANK, then nearest FP32) and the sentence that says why."""
    passing = sorted((o for o in outcomes if o.passed), key=lambda o: (WIDTH_RANK[o.precision], o.margin()))
    if not passing:
        return None, "no precision passes"
    best = passing[0]
    why = f"{best.precision}: the narrowest precision that passes ({best.report.deciding_checks()})"
    peers = [o for o in passing[1:] if WIDTH_RANK[o.precision] == WIDTH_RANK[best.precision]]
    if peers:
        why += f"; nearer FP32 than {', '.join(f'{o.precision} ({o.report.deciding_checks()})' for o in peers)}"
    return best, why


def deploy(model_path: str | os.PathLike, output: str | os.PathLike, options: DeployOptions,
           data_dir: str | os.PathLike | None = None, spec_path: str | os.PathLike | None = None,
           on_step: Callable[[str], None] = lambda text: None) -> DeployResult:
    """Return what deploy left in `output`: engines that pass, their reports, a summary and a Triton repository.

    Bad input (model, data, spec, target, a missing backend) is a TrtpipeError that leaves nothing
    behind. A precision whose engine does not build, or fails validation after tuning, is reported
    in its Outcome and leaves no engine.
    """
    from trtpipe import backend as backends

    model_path, output = Path(model_path), Path(output)
    data_dir = Path(data_dir) if data_dir is not None else None
    if output.exists() and not output.is_dir():
        raise TrtpipeError(f"-o {output}: is a file; deploy writes engines, reports and a Triton repository into a directory")
    if options.budget_minutes < 0:
        raise TrtpipeError(f"--budget-min {options.budget_minutes:g}: give 0 (no tuning) or more minutes")
    model = onnxio.load(model_path)
    if data_dir is not None:
        data.list_files(data_dir)  # no such directory, or no samples: before anything is written
    backend_spec = backends.choose_spec(options.backend, options.target)
    backends.load(backend_spec, options.target)  # not installed: say so now, not once per precision
    if options.precision is not None:
        precisions = backends.plan_precisions([options.precision], options.target, backend_spec)
    else:
        precisions = [p for p in backends.plan_precisions(["auto"], options.target, backend_spec) if p is not Precision.FP32]
    ran = "fp32 is the baseline" if Precision.FP32 not in precisions else "as asked"
    on_step(f"{backend_spec.name} on {options.target.sm}: {' '.join(map(str, precisions))} ({ran}; 'trtpipe plan' says why not others)")
    created = not output.exists()
    spec, spec_path, spec_written = _spec(model, model_path, data_dir, Path(spec_path) if spec_path else None,
                                          output, on_step)
    try:
        return _run(model_path, output, options, precisions, spec, spec_path, spec_written, on_step)
    except TrtpipeError:
        # Bad input found after the spec was written (data the model cannot read): a rerun must not
        # take that spec as the user's.
        if spec_written:
            spec_path.unlink(missing_ok=True)
        if created and output.is_dir() and not any(output.iterdir()):
            output.rmdir()
        raise


def _run(model_path: Path, output: Path, options: DeployOptions, precisions: list[Precision], spec: ModelSpec,
         spec_path: Path, spec_written: bool, on_step) -> DeployResult:
    """The deploy after its input checks: calibrate, build, validate, tune, keep what passes."""
    build_options = BuildOptions(target=options.target, backend=options.backend, spec=spec,
                                 calibration_data=spec.calibration, exclude=list(spec.exclude),
                                 shapes=decided_inputs(spec)[0], min_weights=spec.min_weights)
    # Calibration first and unguarded: data the model cannot read is bad input, not a precision that fails.
    caches, to_calibrate = caches_for(model_path, precisions, build_options, output)
    for grid, path in to_calibrate.items():
        on_step(f"calibrating {grid} on {spec.calibration}")
        calibrate(model_path, spec.calibration, path, CalibrationOptions(DEFAULT_METHOD[grid], grid=grid), spec)
    build_options.caches = caches

    on_engine = _runs_here(options.target)
    reports = output / "reports"
    outcomes = []
    for precision in precisions:
        outcome = Outcome(precision)
        outcomes.append(outcome)
        _build(outcome, model_path, output, build_options, on_step)
        if outcome.engine is not None:
            _validate(outcome, model_path, spec, reports, on_engine, options.batch_size)
            on_step(f"{precision}: {outcome.report.deciding_checks()} -> {'PASS' if outcome.passed else 'FAIL'}")

    failing = [o for o in outcomes if o.engine is not None and not o.passed and o.precision in TUNABLE]
    if failing and options.budget_minutes > 0:
        share = options.budget_minutes * 60 / len(failing)
        for outcome in failing:
            _tune(outcome, model_path, spec, options, build_options, output, share, on_engine, on_step)
    for outcome in outcomes:
        if outcome.engine is not None and not outcome.passed:
            _remove(outcome)

    chosen, why = choose(outcomes)
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
    result = DeployResult(spec_path, spec_written, outcomes, chosen, why, summary, summary_path, repository,
                          simulated=not on_engine, wanted=wanted, passed=chosen is not None)
    if spec_written:
        result.notes.append(f"validation ran on the calibration data ({spec.calibration}): give the spec's "
                            "data.validation other samples of the same kind to judge on data calibration did not see")
    return result


def _build(outcome: Outcome, model_path: Path, output: Path, options: BuildOptions, on_step) -> None:
    """Build one precision into `output`; a backend that cannot build it is the outcome's note, not an error."""
    try:
        results = build(model_path, output, [str(outcome.precision)], options)
    except NothingToQuantize as exc:
        outcome.note = f"nothing to quantize ({exc})"
    except TrtpipeError as exc:
        outcome.note = f"does not build: {exc}"
    else:
        outcome.engine, outcome.typed_onnx = results[0].engine, results[0].typed_onnx
        size = outcome.engine.stat().st_size / 1e6
        on_step(f"built {outcome.engine} ({size:.1f} MB, {results[0].info.build_seconds:.1f} s)")
        return
    on_step(f"{outcome.precision}: {outcome.note}")


def _tune(outcome: Outcome, model_path: Path, spec: ModelSpec, options: DeployOptions, build_options: BuildOptions,
          output: Path, budget_seconds: float, on_engine: bool, on_step) -> None:
    """Tune a failing INT8/FP8 precision within `budget_seconds`, rebuild it with what tuning wrote, and judge it again."""
    from dataclasses import replace

    from trtpipe.quality.tune import tune
    from trtpipe.quality.tune_report import write_report, write_tuned

    precision = outcome.precision
    on_step(f"{precision} fails: tuning it for up to {budget_seconds / 60:.1f} min")
    labels = data.read_labels(spec.labels) if spec.labels else None
    try:
        with data.model_runs_on(spec.calibration):
            result = tune(model_path, spec, precision, options.target, spec.calibration, spec.validation, labels=labels,
                          budget_seconds=budget_seconds, batch_size=options.batch_size, on_phase=lambda t: on_step(f"  {t}"))
    except TrtpipeError as exc:
        outcome.note = f"not tuned: {exc}"
        on_step(f"{precision}: {outcome.note}")
        return
    cache = output / f"{model_path.stem}.{precision}.tuned.cache"
    write_tuned(result, cache, str(precision))
    write_report(result, spec, str(precision), output / "reports")
    config = result.written[0]
    tuned = replace(build_options, caches={**build_options.caches, precision: cache}, exclude=list(config.exclude))
    outcome.tuned = True
    _build(outcome, model_path, output, tuned, on_step)
    if outcome.engine is None:
        return
    _validate(outcome, model_path, spec, output / "reports", on_engine, options.batch_size)
    kept = f"{len(config.exclude)} layer{'s' * (len(config.exclude) != 1)} kept in FP16, method {config.method}"
    outcome.note = f"tuned ({kept}): {'passes' if outcome.passed else 'still fails'}"
    on_step(f"{precision} tuned: {outcome.report.deciding_checks()} -> {'PASS' if outcome.passed else 'FAIL'}")


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
