"""Calibration from a data directory to a TensorRT calibration cache, with a freshness sidecar."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from trtpipe import data
from trtpipe.calibrators.amax import DEFAULT_PERCENTILE, METHODS, uniform_amax
from trtpipe.calibrators.cache import ALGORITHMS, CacheError, CalibrationTable, nameable, parse, render
from trtpipe.calibrators.graph import quantized_activations
from trtpipe.calibrators.histogram import DEFAULT_BINS
from trtpipe.deadline import Deadline
from trtpipe.errors import NothingToQuantize, TrtpipeError
from trtpipe.files import check_output, read_sidecar_json, read_text_input, sha256, sidecar_path, write_json, write_text
from trtpipe.graph import onnxio
from trtpipe.progress import progress_bar
from trtpipe.spec import ModelSpec, decided_inputs, spec_for, spec_from_onnx
from trtpipe.targets import Precision

log = logging.getLogger(__name__)

# `auto` chooses per tensor among the fixed methods (trtpipe.calibrators.choose); TensorRT's own implicit
# calibrator is entropy, which stays available by name.
METHOD_CHOICES = (*METHODS, "auto")
DEFAULT_METHOD = {"int8": "auto", "fp8": "auto"}


@dataclass(frozen=True)
class CalibrationOptions:
    """What decides the scales; a cache made with other options, model or data is stale."""

    method: str = "auto"
    batch_size: int = 16
    limit: int | None = None
    shuffle: bool = False
    seed: int = 0
    bins: int = DEFAULT_BINS
    percentile: float = DEFAULT_PERCENTILE
    grid: str = "int8"  # the precision the scales are for; the grid MSE measures against


def data_fingerprint(directory: str | os.PathLike) -> str:
    """Return a sha256 over the names and bytes of every data file, in order."""
    digest = hashlib.sha256()
    for path in data.list_files(directory):
        digest.update(os.fsencode(path.name) + b"\0" + sha256(path).encode())  # the name's bytes, whatever they are
    return digest.hexdigest()


def versions() -> dict:
    """Return the versions of what computes the scales: trtpipe, ONNX Runtime (runs the model), numpy (histograms)."""
    from importlib import metadata

    import numpy
    import onnxruntime

    try:
        trtpipe_version = metadata.version("trtpipe")
    except metadata.PackageNotFoundError:
        trtpipe_version = "unknown"
    return {"trtpipe": trtpipe_version, "onnxruntime": onnxruntime.__version__, "numpy": numpy.__version__}


def spec_fingerprint(spec: ModelSpec) -> dict:
    """Return the parts of a spec that change what the model sees: its inputs and the image preprocessing."""
    return {"inputs": [asdict(i) for i in spec.inputs],
            "preprocess": asdict(spec.preprocess) if spec.preprocess is not None else None}


def judged_fingerprint(spec: ModelSpec | None) -> dict | None:
    """Return the parts of a spec that `auto`'s choice is judged by: the layers the typed graph quantizes
    ([quantize] exclude, min_weights; also which FP8 weights are placed) and what its outputs are judged
    by (the task, [[outputs]], thresholds). A spec whose [[outputs]] came to name the text an OCR's ArgMax
    reads (trueocr-rec) judges another choice than the one its cache holds."""
    if spec is None:
        return None
    judged = {"task": spec.task, "outputs": [asdict(o) for o in spec.outputs], "thresholds": spec.thresholds,
              "exclude": spec.exclude, "min_weights": spec.min_weights}
    return settled(json.loads(json.dumps(judged, default=str)))


def settled(fingerprint: dict | None) -> dict | None:
    """Return `fingerprint` without the [[outputs]] keys a spec leaves unset: a key added to the schema since a
    cache was made (judged_value) changes no choice, and must not make every cache stale."""
    if not isinstance(fingerprint, dict) or not isinstance(fingerprint.get("outputs"), list):
        return fingerprint
    outputs = [{k: v for k, v in o.items() if v is not None} if isinstance(o, dict) else o for o in fingerprint["outputs"]]
    return {**fingerprint, "outputs": outputs}


def provenance(model_path, data_dir, options: CalibrationOptions, spec: ModelSpec | None = None,
               tensors: list[str] | None = None) -> dict:
    """Return everything a cache depends on; a cache whose sidecar records anything else is stale.

    `tensors` are the names the scales are keyed by (those of the cleaned graph): a change in how the
    graph is cleaned renames them, and a cache keyed by the old names would quantize nothing.
    An `auto` cache also records the rule that chose (trtpipe.calibrators.choose.RULE, then OUTPUTS_RULE)
    and what of the spec it was judged by (judged_fingerprint), so a cache chosen by an earlier rule, or
    judged on other outputs or layers, is remade.
    """
    made_from = {"onnx_sha256": sha256(model_path), "data_sha256": data_fingerprint(data_dir), "options": asdict(options),
                 "spec": json.loads(json.dumps(spec_fingerprint(spec))) if spec is not None else None,
                 "versions": versions(),
                 "tensors_sha256": hashlib.sha256("\n".join(tensors or []).encode()).hexdigest()}
    if options.method == "auto":
        from trtpipe.calibrators.choose import RULE, WEIGHT_RULE

        made_from["auto_rule"] = f"{RULE}; {OUTPUTS_RULE}" + (f"; {WEIGHT_RULE}" if options.grid == "fp8" else "")
        made_from["auto_judged_by"] = judged_fingerprint(spec)
    return made_from


SIDECAR = "a calibration sidecar"
SIDECAR_FIX = "recalibrate with 'trtpipe calibrate', or delete it (a cache without one is taken as TensorRT's own)"


def cache_sidecar(cache: str | os.PathLike) -> dict | None:
    """Return what the sidecar beside `cache` records (calibrate writes it), None without one; raise naming it
    when it cannot be read (files.read_sidecar_json): the grid and provenance of the cache would be unknown."""
    return read_sidecar_json(cache, SIDECAR, SIDECAR_FIX)


HEX_STEPS = "0123456789abcdef"  # the sidecar's weight_steps: one digit a channel


def sidecar_weight_steps(cache: str | os.PathLike, recorded: dict | None = None) -> dict[str, tuple[int, ...]]:
    """Return the FP8 weight grid positions calibrate recorded beside `cache` ({} where it recorded none),
    or raise naming the sidecar when they cannot be read. `recorded`: the sidecar, where the caller has read it."""
    from trtpipe.graph.qdq import WEIGHT_STEPS

    written = (recorded if recorded is not None else cache_sidecar(cache) or {}).get("weight_steps", {})
    if not (isinstance(written, dict) and all(isinstance(v, str) and v and all(c in HEX_STEPS[:WEIGHT_STEPS] for c in v)
                                              for v in written.values())):
        raise TrtpipeError(f"{sidecar_path(cache)}: its weight_steps are not one hex digit per weight channel; {SIDECAR_FIX}")
    return {name: tuple(int(c, 16) for c in text) for name, text in written.items()}


def weight_steps_text(steps: dict[str, tuple[int, ...]]) -> dict[str, str]:
    """Return the FP8 weight grid positions as the sidecar holds them: one hex digit a channel."""
    return {name: "".join(HEX_STEPS[j] for j in channels) for name, channels in steps.items()}


def is_fresh(cache: str | os.PathLike, made_from: dict) -> bool:
    """Return True if `cache`'s sidecar records the same provenance as `made_from`."""
    if not Path(cache).is_file():
        return False
    try:
        recorded_from = cache_sidecar(cache)
    except TrtpipeError:
        return False  # calibrating writes it anew
    if recorded_from is None or recorded_from.get("cache_sha256") != sha256(cache):
        return False
    recorded = {k: recorded_from.get(k) for k in made_from}
    if "auto_judged_by" in recorded:
        recorded["auto_judged_by"] = settled(recorded["auto_judged_by"])
    return recorded == made_from


def calibrated_graph(model, spec: ModelSpec | None):
    """Return the cleaned copy of `model` whose tensor names calibration caches and the typed passes use.

    The spec's [shapes] and one-value inputs (`[[inputs]] value`, a sample rate) decide If nodes,
    which cleanup folds into their branch as build does: the layers inside the branch are then
    calibrated, ranked by sensitivity and tuned like any other (graph.control).
    """
    from trtpipe.graph.cleanup import cleanup

    shapes, fixed = decided_inputs(spec)
    return cleanup(model, shapes=shapes, fixed=fixed)[0]


def refuse_no_layer(model, model_path: str | os.PathLike, precision: Precision, spec: ModelSpec | None) -> None:
    """Raise NothingToQuantize naming the model where `precision` has no layer of the cleaned `model` by the graph
    and the spec's exclusions and min_weights alone (graph.qdq.no_layer_for): before any data is read."""
    from trtpipe.graph.qdq import no_layer_for

    exclude, min_weights = (spec.exclude, spec.min_weights) if spec is not None else ((), 0)
    if (why := no_layer_for(model, precision, exclude, min_weights)) is not None:
        raise NothingToQuantize(f"{model_path}: {why}")


def calibrated_tensors(model, model_path: str | os.PathLike, grid: str = "int8", spec: ModelSpec | None = None) -> list[str]:
    """Return the activations of the cleaned `model` a cache holds scales for, or raise naming the model when there
    are none, when the `grid`'s precision quantizes no layer of it (refuse_no_layer), or when a
    tensor's name no cache line can hold (found before the data is read, not at the write)."""
    tensors = quantized_activations(model)
    if not tensors:
        raise NothingToQuantize(f"{model_path}: the model has no Conv, MatMul or Gemm layer to quantize; build it in fp16 instead")
    refuse_no_layer(model, model_path, Precision.parse(grid), spec)
    unnamed = next((t for t in tensors if not nameable(t)), None)
    if unnamed is not None:
        raise TrtpipeError(f"{model_path}: tensor {unnamed!r} cannot be named in a calibration cache (a line of "
                           "'name: scale' each); rename it in the model, without line breaks")
    return tensors


def calibrate(model_path: str | os.PathLike, data_dir: str | os.PathLike, output: str | os.PathLike,
              options: CalibrationOptions = CalibrationOptions(), spec: ModelSpec | None = None,
              force: bool = False, show_progress: bool = True,
              deadline: Deadline | None = None) -> tuple[CalibrationTable, bool]:
    """Return the calibration table for the model on the data, and whether it was computed anew.

    The cache at `output` is reused only when its sidecar records the same model, data and options.
    A reused cache is touched, so make and other timestamp-driven tools see it as made now.
    `deadline`: checked before each batch (the histogram pass and `auto`'s choice); once it has
    passed, OutOfTime is raised and no cache is written (scales from part of the data are not the
    cache these options and data describe).
    """
    from trtpipe.calibrators.collect import collect_histograms

    if options.method not in METHOD_CHOICES:
        raise TrtpipeError(f"--method {options.method}: unknown method; use one of {', '.join(METHOD_CHOICES)}")
    # Scales are keyed by tensor name: calibrate the cleaned graph, the one the typed passes rewrite
    # (folding Transposes or BatchNorms renames the tensors that feed Conv and MatMul).
    model = calibrated_graph(onnxio.load_float(model_path), spec)
    tensors = calibrated_tensors(model, model_path, options.grid, spec)
    check_output(output, [model_path, spec.path if spec is not None else None, data_dir], "-o",
                 siblings=[sidecar_path(output)])
    spec = spec_for(spec, model, model_path)
    made_from = provenance(model_path, data_dir, options, spec, tensors)
    if not force and is_fresh(output, made_from):
        os.utime(output)
        return load_table(Path(output), [options.grid]), False
    batches = data.iter_batches(spec, data_dir, options.batch_size, options.limit, options.shuffle, options.seed)
    if deadline is not None:
        batches = deadline.paced(batches, f"{options.grid} calibration")
    total = data.count_samples(data_dir, options.limit)
    with progress_bar(total, f"calibrating {Path(model_path).name}", "samples", show_progress) as bar, \
            data.model_runs_on(data_dir):
        histograms = collect_histograms(model, tensors, data.feeds(batches, bar.update), options.bins)
    if bar.n == 0:
        raise TrtpipeError(f"--data {data_dir}: no samples were read; add calibration samples or raise --limit")
    table = CalibrationTable(algorithm=ALGORITHMS[options.method])
    outputs_check: dict = {}
    if options.method == "auto":
        table.weight_steps, table.amax, chosen = choose_per_tensor(model, spec, data_dir, histograms, options,
                                                                   show_progress, deadline)
        table.amax, chosen, outputs_check = checked_at_outputs(model, spec, data_dir, histograms, options,
                                                               table.amax, chosen, table.weight_steps,
                                                               show_progress, deadline)
    else:
        chosen = {}
        table.amax = uniform_amax(histograms, options.method, options.grid, options.percentile)
    # The sidecar goes first and names the cache's sha256: a run killed between the two writes
    # leaves a sidecar that does not match the old cache, so nothing takes that cache as fresh.
    text = render(table)
    write_json(sidecar_path(output), {**made_from, "cache_sha256": hashlib.sha256(text.encode()).hexdigest(),
                                      "tensors": len(table.amax), "samples": bar.n,
                                      **({"methods": chosen} if chosen else {}),
                                      **({"weight_steps": weight_steps_text(table.weight_steps)}
                                         if table.weight_steps else {}),
                                      **({"outputs_check": outputs_check} if outputs_check else {})})
    write_text(output, text)
    return table, True


def choose_per_tensor(model, spec: ModelSpec, data_dir, histograms, options: CalibrationOptions,
                      show_progress: bool = True, deadline: Deadline | None = None
                      ) -> tuple[dict[str, tuple[int, ...]], dict[str, float], dict[str, str]]:
    """Return ({weight: grid positions}, {tensor: amax}, {tensor: candidate}) of the `auto` method, judged
    on the first CHOICE_SAMPLES calibration samples (trtpipe.calibrators.choose): in FP8 each weight
    channel's scale first, then each activation's method with the weights so placed. `deadline` as calibrate's."""
    from trtpipe.calibrators.choose import CHOICE_BATCH, CHOICE_SAMPLES, choose_amax

    limit = min(options.limit or CHOICE_SAMPLES, CHOICE_SAMPLES)

    def feeds(bar):
        batches = data.iter_batches(spec, data_dir, min(options.batch_size, CHOICE_BATCH), limit, options.shuffle,
                                    options.seed)
        return data.feeds(batches if deadline is None else deadline.paced(batches, f"{options.grid} calibration"),
                          bar.update)

    steps = {}
    with data.model_runs_on(data_dir):
        if options.grid == "fp8":
            with progress_bar(data.count_samples(data_dir, limit), "placing each weight channel on E4M3's grid",
                              "samples", show_progress) as bar:
                steps = fp8_weight_steps(model, histograms, feeds(bar), spec.min_weights)
        with progress_bar(data.count_samples(data_dir, limit), "choosing each tensor's method", "samples",
                          show_progress) as bar:
            return (steps, *choose_amax(model, histograms, feeds(bar), options.grid, steps))


def fp8_weight_steps(model, tensors, batches, min_weights: int = 0) -> dict[str, tuple[int, ...]]:
    """Return `auto`'s FP8 weight grid positions (choose.choose_weight_steps) for the layers the FP8 typed
    graph quantizes, `tensors` the activations calibrated."""
    from trtpipe.calibrators.choose import choose_weight_steps
    from trtpipe.graph.toolkit import label
    from trtpipe.quality.sensitivity import quantizable_layers

    every = CalibrationTable(amax=dict.fromkeys(tensors, 1.0))  # which layers are quantized, not how
    quantized = {label(n) for n in quantizable_layers(model, every, min_weights, Precision.FP8)}
    return choose_weight_steps(model, batches, only=quantized)


# `auto`'s per-tensor choice is then judged where it counts, at the model's outputs, beside each method
# alone: the least error at each layer can add up to the worst model (u2netp INT8: mask IoU 0.18,
# entropy alone 0.67). A few samples are enough to tell a broken choice from a sound one.
OUTPUTS_CHECK_SAMPLES = 16
OUTPUTS_RULE = (f"failing at the outputs on {OUTPUTS_CHECK_SAMPLES} samples by more than a sample, the best of it "
                "and each method alone")


def one_sample_more(metrics: dict[str, float], counts: dict[str, int], thresholds: dict[str, float]) -> dict[str, float]:
    """Return `metrics` with each share that one sample decides (1/count more than its minimum allows:
    validate's coarse checks) given one sample more. Few samples tell a broken choice from a sound one,
    not a sound one from a lucky one: on spindle-eeg's INT8 auto's choice missed 1 window of 16 and
    percentile none, and on the 128 validation windows auto's missed 1 and percentile's 3."""
    from trtpipe.quality.validate import one_sample_decides

    graced = dict(metrics)
    for metric, count in counts.items():
        if metric in graced and one_sample_decides(count, thresholds.get(metric, 1.0)):
            graced[metric] = min(1.0, graced[metric] + 1 / count)
    return graced


def checked_at_outputs(model, spec: ModelSpec, data_dir, histograms, options: CalibrationOptions,
                       amax: dict[str, float], chosen: dict[str, str],
                       weight_steps: dict[str, tuple[int, ...]] | None = None, show_progress: bool = True,
                       deadline: Deadline | None = None) -> tuple[dict[str, float], dict[str, str], dict]:
    """Return the amax and per-tensor methods of whichever judges best at the outputs, `auto`'s choice or
    one method for every tensor, and what the sidecar records of it: each one's worst margin against the
    precision's thresholds (negative: a threshold fails) and the one chosen.

    Judged as tune judges a configuration (the spec's tasks and thresholds, validation's metrics) on
    the first OUTPUTS_CHECK_SAMPLES calibration samples, the typed graph as `quantize` writes it by
    default. `auto`'s choice is kept when it passes or misses by one sample where one decides a share
    (one_sample_more), and when no method alone does better."""
    from trtpipe.calibrators.choose import covering
    from trtpipe.graph.typed import typed_model
    from trtpipe.quality.tasks import Degenerate
    from trtpipe.quality.tune import baseline_outputs
    from trtpipe.quality.tune_judge import margins, task_metrics
    from trtpipe.quality.validate import thresholds_for

    precision = Precision.parse(options.grid)
    limit = min(options.limit or OUTPUTS_CHECK_SAMPLES, OUTPUTS_CHECK_SAMPLES)
    with data.model_runs_on(data_dir):
        batches = list(data.iter_batches(spec, data_dir, options.batch_size, limit, options.shuffle, options.seed))
        wanted = baseline_outputs(model, batches, spec)
    thresholds = thresholds_for(str(precision), spec)
    candidates = {"auto": (amax, chosen)}
    scores: dict[str, tuple[float, ...]] = {}
    names = ("auto", *METHODS)
    items = names if deadline is None else deadline.paced(names, f"{options.grid} calibration")
    with progress_bar(len(names), "judging at the outputs", "choices", show_progress) as bar:
        for name in items:
            if name not in candidates:  # a method alone, computed only once auto's own choice has failed
                uniform = uniform_amax(histograms, name, options.grid, options.percentile)
                # as auto's own candidates: in FP8 nothing calibration saw is clipped
                uniform = {t: covering(amax, histograms[t].max, options.grid) for t, amax in uniform.items()}
                candidates[name] = (uniform, {t: name for t in uniform})
            table = CalibrationTable(amax=candidates[name][0], weight_steps=dict(weight_steps or {}))
            typed = typed_model(model, precision, table, exclude=spec.exclude, min_weights=spec.min_weights)
            try:
                metrics, counts = task_metrics(typed, spec, batches, wanted, thresholds)
            except Degenerate as exc:  # a baseline these samples cannot judge: keep the per-tensor choice
                log.debug("auto: not judged at the outputs (%s)", exc)
                return amax, chosen, {}
            scores[name] = margins(metrics, thresholds, counts)
            bar.update(1)
            # A passing choice is kept, and one a sample short: on a few samples a small lead is luck.
            if name == "auto" and margins(one_sample_more(metrics, counts, thresholds), thresholds, counts)[0] >= 0:
                break
    best = max(scores, key=lambda name: scores[name])  # worst checks tied: the next worst decides; all tied: auto
    return (*candidates[best], {"samples": sum(len(b) for b in batches), "margins": {name: round(value[0], 6)
                                for name, value in scores.items()}, "chosen": best})


def method_summary(path: str | os.PathLike) -> str | None:
    """Return how many tensors each method calibrated ("entropy 41, max 12, mse 7 tensors, each tensor's in
    X.json"), and how the choice was judged at the outputs, from the cache's sidecar; None when it records
    no per-tensor choice."""
    from collections import Counter

    from trtpipe.calibrators.choose import method_of

    try:
        written = cache_sidecar(path) or {}
    except TrtpipeError:
        return None
    chosen, check = written.get("methods"), written.get("outputs_check")
    if not isinstance(chosen, dict) or not chosen:
        return None
    counts = Counter(method_of(c) for c in chosen.values())
    text = ", ".join(f"{m} {n}" for m, n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))) + " tensors"
    text += f", each tensor's in {sidecar_path(path).name}"
    if isinstance(check, dict) and isinstance(check.get("margins"), dict):
        margins = ", ".join(f"{name} {value:+.3f}" for name, value in check["margins"].items())
        text += (f"; judged at the outputs on {check.get('samples')} samples (the worst check's margin, below 0 "
                 f"failing): {margins}; kept {check.get('chosen')}")
    try:
        steps = [step for channels in sidecar_weight_steps(path, written).values() for step in channels]
    except TrtpipeError:
        steps = []
    if steps:
        text += f"; FP8 weights: {sum(s > 0 for s in steps)} of {len(steps)} channels placed under 448"
    return text


def load_table(path: Path, precisions=()) -> CalibrationTable:
    """Return the calibration table in the cache at `path`, or raise naming the file and the fix.

    A cache that calibrate wrote says in its sidecar which grid (int8 or fp8) its amax were chosen
    for; using it for another quantized precision in `precisions` is an error. A cache without a
    sidecar (TensorRT's own) is taken as it is.
    """
    text = read_text_input(path, f"--cache {path}", "make it with 'trtpipe calibrate'")
    try:
        table = parse(text, str(path))
    except CacheError as exc:
        raise TrtpipeError(f"--cache {exc}; recalibrate with 'trtpipe calibrate'") from None
    if not table.amax:
        raise TrtpipeError(f"--cache {path}: the cache holds no tensors; recalibrate with 'trtpipe calibrate'")
    table.weight_steps = sidecar_weight_steps(path)
    grid = cache_grid(path)
    for precision in map(str, precisions):
        wanted = "fp8" if precision == "fp4" else precision  # NVFP4's global scales come from the fp8 cache
        if grid is not None and wanted in ("int8", "fp8") and wanted != grid:
            takes = f" (which takes an {wanted} cache)" if wanted != precision else ""
            raise TrtpipeError(f"--cache {path}: calibrated for {grid}, not {precision}{takes}; "
                               f"make an {wanted} cache with 'trtpipe calibrate --precision {wanted}'")
    return table


# Activation ranges for FP16/BF16 need the extremes, not a distribution: a few batches show them.
RANGE_SAMPLES = 32


def range_data(given: str | os.PathLike | None, spec: ModelSpec | None) -> Path | None:
    """Return the samples whose activations decide which nodes a half-precision graph keeps in FP32: --data,
    else the spec's calibration directory where it exists (calibration's own default), else None
    (constants alone decide). Without the spec's default, `build --spec` wrote an FP16 SwiftF0 whose power
    spectra overflowed to inf on loud audio, where deploy, reading the same spec, kept them in FP32."""
    if given is not None:
        return Path(given)
    found = spec.calibration if spec is not None else None
    return Path(found) if found is not None and Path(found).is_dir() else None


def observe_data_ranges(model, data_dir: str | os.PathLike, spec: ModelSpec | None = None,
                        limit: int = RANGE_SAMPLES, batch_size: int = 8) -> dict:
    """Return what `data_dir` shows of every float tensor of the cleaned `model` (graph.keep.Observed by name).

    Half conversion keeps the nodes whose activations leave FP16's range in FP32. The model is
    cleaned first (graph.cleanup), so the names are those the typed passes see.
    """
    from trtpipe.graph.keep import observe_ranges

    cleaned = calibrated_graph(model, spec)
    spec = spec or spec_from_onnx(model, "MODEL")
    batches = (b.arrays for b in data.iter_batches(spec, data_dir, batch_size, limit))
    with data.model_runs_on(data_dir):
        return observe_ranges(cleaned, batches)


def cache_grid(path: Path) -> str | None:
    """Return the precision ('int8' or 'fp8') a cache's sidecar says it was calibrated for, else None."""
    options = (cache_sidecar(path) or {}).get("options")
    grid = options.get("grid") if isinstance(options, dict) else None
    return grid if grid in ("int8", "fp8") else None
