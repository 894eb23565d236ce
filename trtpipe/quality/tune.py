"""Tuning: the fastest INT8/FP8 configuration whose accuracy meets the spec's thresholds.

A configuration is a calibration method per tensor (entropy, max, percentile, MSE, all computed
from one histogram collection) and the set of layers kept out of quantization (computing in FP16).
The search runs on the calibration data (the tuning split) and never sees the validation set,
which confirms the choice at the end. Speed is the estimated latency of trtpipe.quality.cost.

The search, each step judged by the spec's task metrics against its thresholds (tune_judge):
1. one method for every tensor, each of the four;
2. layers ranked by sensitivity (quantized alone, on a few samples);
3. the fewest of the most sensitive layers kept in FP16 that meets the thresholds (bisection);
4. each kept layer, the most costly first, tried quantized again: kept quantized if still passing;
5. the most sensitive layers' input tensors try the other methods (accuracy at no cost);
6. more layers kept in FP16 within the slack of quantization's estimated saving.
Every configuration tried is recorded (tune_config); the chosen one is the most accurate passing one
within the slack of the fastest. Then the validation set confirms it, and when it fails there, a
ladder of more layers kept in FP16 (fixed by the search's ranking) is walked (confirm_ladder).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from trtpipe.calibrators.amax import METHODS
from trtpipe.data import Batch
from trtpipe.deadline import Deadline
from trtpipe.errors import NothingToQuantize, TrtpipeError
from trtpipe.quality.cost import LAUNCH_SECONDS
from trtpipe.quality.tune_config import Config, Rung, Scales, Trial, TuneResult, amax_by_method
from trtpipe.quality.tune_judge import SHARES, lower_bound, margins, supported_confidence, task_metrics
from trtpipe.spec import ModelSpec, spec_for
from trtpipe.targets import Precision

__all__ = ["SHARES", "Config", "Rung", "Scales", "Search", "Trial", "TuneOptions", "TuneResult", "amax_by_method", "confirm",
           "confirm_ladder", "fewest_passing", "lower_bound", "margins", "supported_confidence", "task_metrics", "tune"]


@dataclass
class Search:
    """Everything the search needs; `run()` returns the trials, the chosen one included."""

    model: object  # onnx.ModelProto, FP32
    spec: ModelSpec
    precision: Precision
    scales: Scales
    layers: list[tuple[str, list[str]]]  # (layer name, its activation tensors), graph order
    price: Callable[[Sequence[str]], float]  # quantized layer names -> estimated seconds
    batches: list[Batch]
    wanted: list[dict[str, np.ndarray]]
    thresholds: dict[str, float]
    budget_seconds: float = 600.0
    deadline: Deadline | None = None  # a caller's (deploy's) sooner end than `budget_seconds` from run()
    sensitivity_samples: int = 16
    ranking_share: float = 0.4  # of the time left, measured sensitivity may take; the rest of the layers go by `proxy`
    proxy: dict[str, float] = field(default_factory=dict)  # layer -> local quantization noise (higher: worse)
    refine_layers: int = 4
    slack: float = 0.1  # share of quantization's estimated saving that may be given back for accuracy
    # Estimates closer than one kernel launch are ties, and the more accurate configuration wins: the
    # cost model cannot resolve less (a layer's roofline is a bound, not a timing). On digits every
    # layer's quantization is estimated to save under 0.3 us of 21, and 10% of that saving alone
    # chose FP8 on the first convolution: cosine 0.9966 where keeping it costs 0.06 us (0.9977).
    tie: float = LAUNCH_SECONDS
    confidence: float = 0.9  # share metrics pass when their lower bound at this confidence does (SHARES)
    # What the search simulates unquantized layers in. FP32 runs twice as fast in ONNX Runtime on a
    # CPU, and FP16 alone moves the shipped models' outputs by under 1e-4 cosine; the confirmation
    # on the validation set runs the graph exactly as built (FP16).
    unquantized: str = "fp32"
    on_trial: Callable[[Trial, Trial | None], None] | None = None
    on_phase: Callable[[str], None] | None = None
    # The metrics the user named (validate.named_thresholds) that the tuning split must measure, or the
    # trial raises as validation does (validate.judge). Those a validation set confirms may be
    # unmeasurable here (accuracy: the calibration data has no labels); they are judged there.
    named: dict[str, str] = field(default_factory=dict)
    trials: list[Trial] = field(default_factory=list)
    ranking: list[str] = field(default_factory=list)  # layer names, the most sensitive first, once ranked
    _seen: dict[Config, Trial] = field(default_factory=dict)
    _deadline: Deadline = field(default_factory=lambda: Deadline(0.0))

    def quantized(self, config: Config) -> list[str]:
        excluded = set(config.exclude)
        return [name for name, _ in self.layers if name not in excluded]

    def evaluate(self, config: Config, step: str) -> Trial:
        """Return the trial of `config`, run once however often it is asked for."""
        from trtpipe.graph.typed import typed_model

        if config in self._seen:
            return self._seen[config]
        quantized = self.quantized(config)
        typed = typed_model(self.model, self.precision, self.scales.table(config), exclude=config.exclude,
                            unquantized=self.unquantized, min_weights=self.spec.min_weights)
        metrics, counts = task_metrics(typed, self.spec, self.batches, self.wanted, self.thresholds, self.named)
        trial = Trial(len(self.trials), step, config, metrics, margins(metrics, self.thresholds, counts, self.confidence),
                      self.price(quantized), len(quantized), counts)
        self.trials.append(trial)
        self._seen[config] = trial
        if self.on_trial is not None:
            self.on_trial(trial, self.best())
        return trial

    def best(self) -> Trial | None:
        """Return the most accurate passing trial within the slack of the fastest passing one's estimated
        latency, else (none passes) the trial closest to passing."""
        if not self.trials:
            return None
        passing = [t for t in self.trials if t.passed]
        if not passing:
            return max(self.trials, key=lambda t: (t.margins, -t.seconds))
        limit = self.latency_limit()
        return max((t for t in passing if t.seconds <= limit), key=lambda t: (t.margins, -t.seconds))

    def latency_limit(self) -> float:
        """Return the estimated latency a passing configuration may take and still be chosen: the
        fastest passing one's, plus `slack` of what quantization saves against all-FP16, and never less
        than `tie` above it; a slack of 0 is the fastest by the estimate alone."""
        fastest = min(t.seconds for t in self.trials if t.passed)
        if self.slack <= 0:
            return fastest
        return fastest + max(self.slack * max(self.price([]) - fastest, 0.0), self.tie)

    def out_of_time(self) -> bool:
        return self._deadline.passed()

    def _phase(self, text: str) -> None:
        if self.on_phase is not None:
            self.on_phase(text)

    def run(self, default: Config | None = None) -> Trial:
        """Search within the budget; return the chosen trial (`self.trials` holds them all)."""
        self._deadline = (self.deadline or Deadline(math.inf)).within(self.budget_seconds)
        if not self.layers:
            raise NothingToQuantize("the model has no Conv, MatMul or Gemm with scales to quantize; build it in fp16")
        if default is not None:
            self.evaluate(default, "default")
        self._phase("one method for every tensor")
        uniform = []
        for method in self.scales.amax:
            if self.trials and self.out_of_time():  # each trial runs the model on every tuning sample
                break
            uniform.append(self.evaluate(Config(method), f"all {method}"))
        if self.out_of_time() or not uniform:
            return self.best()
        current = max(uniform, key=lambda t: t.margins)
        self._phase(f"ranking layers by sensitivity ({current.config.method})")
        ranking = self.rank_layers(current.config)
        if default is not None and default.exclude:
            # The spec's exclusions rank first: a spec names the layers its author measured as the most
            # sensitive (EfficientNet-lite0's first depthwise conv, ranked 36th of 50 by a partly
            # measured ranking, took top-1 agreement from 95.6% to 98.8% on its own).
            kept = set(default.exclude)
            ranking = [layer for layer in ranking if layer in kept] + [layer for layer in ranking if layer not in kept]
        self.ranking = ranking
        if not current.passed and not self.out_of_time():
            found = self.fewest_exclusions(current.config, ranking)
            if found is not None and not self.out_of_time():
                current = self.requantize(found)
        self.refine(self.best(), ranking)
        self.within_slack(ranking)
        return self.best()

    def keep_order(self, start: Config) -> list[str]:
        """Return the layers `start` quantizes, the most sensitive first: the order in which the
        confirmation keeps more of them in FP16 when `start` fails on the validation set. Fixed by the
        search alone, before the validation set is read."""
        kept = set(start.exclude)
        return [layer for layer in (self.ranking or [name for name, _ in self.layers]) if layer not in kept]

    def refine(self, current: Trial, ranking: list[str]) -> Trial:
        """Return the best trial after trying every method on the inputs of the most sensitive layers
        that `current` quantizes."""
        self._phase(f"other methods for the inputs of the {self.refine_layers} most sensitive layers")
        tensors_of = dict(self.layers)
        quantized = [layer for layer in ranking if layer not in set(current.config.exclude)]
        for layer in quantized[:self.refine_layers]:
            for tensor in tensors_of[layer]:
                for method in METHODS:
                    if self.out_of_time() or current.config.method_of(tensor) == method:
                        continue
                    trial = self.evaluate(current.config.with_method(tensor, method), f"{tensor}: {method}")
                    if trial.margins > current.margins:
                        current = trial
        return current

    def within_slack(self, ranking: list[str]) -> None:
        """Keep one more of the most sensitive layers in FP16 at a time while the estimated latency stays
        within the slack (`latency_limit`): accuracy that costs (almost) nothing."""
        start = self.best()
        if start is None or not start.passed:
            return
        self._phase(f"more accuracy for at most {self.slack:.0%} of quantization's estimated saving "
                    f"(or {self.tie * 1e6:g} us, one kernel launch: the cost model's resolution)")
        limit = self.latency_limit()
        kept = list(start.config.exclude)
        for layer in ranking:
            if self.out_of_time():
                return
            if layer in kept:
                continue
            quantized = [q for q in self.quantized(start.config) if q not in kept and q != layer]
            if not quantized or self.price(quantized) > limit:
                continue
            kept.append(layer)
            trial = self.evaluate(start.config.with_exclude(kept), f"keep {layer}")
            if not trial.passed or trial.margins <= start.margins:
                kept.remove(layer)
            else:
                start = trial

    def rank_layers(self, config: Config, chunk: int = 4) -> list[str]:
        """Return the layer names, the most sensitive first.

        Layers are measured with today's per-layer sensitivity a few at a time, the most suspect by
        `proxy` first, until `ranking_share` of the time left is spent; the worse half of the measured
        layers comes first, judged as the spec judges the outputs (sensitivity's order: a generic answer read
        within a tolerance or at a threshold by those, not by its raw cosine), then the unmeasured by
        `proxy`, then the better half.
        """
        from trtpipe.quality.sensitivity import layer_sensitivity, most_sensitive_first

        batches, seen = [], 0
        for batch in self.batches:
            if seen >= self.sensitivity_samples:
                break
            batches.append(batch)
            seen += batch.size
        table = self.scales.table(config)
        suspects = sorted(self.layers, key=lambda layer: -self.proxy.get(layer[0], 0.0))
        stop = self._deadline.within(self.ranking_share * self._deadline.left())
        rows = []
        for start in range(0, len(suspects), chunk):
            if stop.passed():
                break
            group = suspects[start:start + chunk]
            # A table holding only these layers' scales makes sensitivity quantize only them.
            subset = replace(table, amax={t: table.amax[t] for _, tensors in group for t in tensors})
            rows += [row for row in layer_sensitivity(self.model, subset, self.precision, batches, spec=self.spec,
                                                      unquantized=self.unquantized)
                     if row.node in {name for name, _ in group}]
        measured = [row.node for row in most_sensitive_first(rows)]
        unmeasured = [name for name, _ in suspects if name not in set(measured)]
        if unmeasured:
            self._phase(f"measured {len(measured)} of {len(self.layers)} layers; the rest ranked by local quantization noise")
        # A layer not measured may be as harmful as any: it ranks after the worse half of the
        # measured layers and before the better half, which are known to be safe to quantize.
        half = (len(measured) + 1) // 2
        return measured[:half] + unmeasured + measured[half:]

    def fewest_exclusions(self, config: Config, ranking: list[str]) -> Trial | None:
        """Return the passing trial that keeps the fewest of the top of `ranking` in FP16, by bisection."""
        self._phase("keeping the most sensitive layers in FP16: the fewest that pass")
        low, high = 0, len(ranking) - 1  # keep at least one layer quantized: all in FP16 is the fp16 build
        top = self.evaluate(config.with_exclude(ranking[:high]), f"keep top {high}")
        if not top.passed:
            return None
        trials = {high: top}

        def passes(count: int) -> bool:
            trials[count] = self.evaluate(config.with_exclude(ranking[:count]), f"keep top {count}")
            return trials[count].passed

        return trials[bisect_fewest(low, high, passes, self.out_of_time)]

    def requantize(self, start: Trial) -> Trial:
        """Return the trial after trying each kept layer quantized again, the biggest saving first."""
        self._phase("quantizing kept layers again where the thresholds still hold")
        current = start
        savings = []
        for layer in current.config.exclude:
            quantized = self.quantized(current.config)
            savings.append((self.price(quantized) - self.price(quantized + [layer]), layer))
        for saving, layer in sorted(savings, reverse=True):
            if self.out_of_time() or saving <= 0:
                break
            trial = self.evaluate(current.config.with_exclude(set(current.config.exclude) - {layer}), f"quantize {layer}")
            if trial.passed and trial.seconds < current.seconds:
                current = trial
        return current


def fewest_passing(most: int, passes: Callable[[int], bool], stop: Callable[[], bool] = lambda: False) -> int | None:
    """Return the smallest count in 1..`most` for which `passes` holds, assuming it holds from some
    count on: 1, 2, 4... until one passes, then bisection below it; None when `most` fails too, or
    when `stop` ends the search before any count passed (after one has, the best so far)."""
    low, count = 0, 1
    while True:
        if stop():
            return None
        count = min(count, most)
        if passes(count):
            break
        if count >= most:
            return None
        low, count = count, count * 2
    return bisect_fewest(low, count, passes, stop)


def bisect_fewest(low: int, high: int, passes: Callable[[int], bool], stop: Callable[[], bool] = lambda: False) -> int:
    """Return the smallest count in (`low`, `high`] for which `passes` holds, given that it holds at
    `high` and not at `low` (and from some count on); `stop` ends the search early with the best so far."""
    while high - low > 1 and not stop():
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle
    return high


def load_batches(spec: ModelSpec, directory, batch_size: int, limit: int | None = None) -> list[Batch]:
    """Return the samples of `directory` as a list of batches, held in memory for every trial."""
    from trtpipe import data

    return list(data.iter_batches(spec, directory, batch_size, limit))


def first_samples(batches: Sequence[Batch], samples: int) -> list[Batch]:
    """Return the leading batches of `batches` that hold at least `samples` samples (all when fewer)."""
    taken, seen = [], 0
    for batch in batches:
        if seen >= samples:
            break
        taken.append(batch)
        seen += batch.size
    return taken


def baseline_outputs(model, batches: Sequence[Batch], spec: ModelSpec | None = None) -> list[dict[str, np.ndarray]]:
    """Return the FP32 model's outputs on every batch, streamed where the `spec` carries a state."""
    from trtpipe.quality.stream import Stream, carried_inputs
    from trtpipe.runtime.onnxrt import OnnxRunner

    with OnnxRunner("baseline", model=model) as runner:
        run = Stream(runner, carried_inputs(spec, runner.outputs))
        return [run(batch) for batch in batches]


@dataclass(frozen=True, kw_only=True)
class TuneOptions:
    """How `tune` searches and confirms; each default is the CLI's."""

    validation_dir: Path | None = None  # confirms the choice on samples the search never saw; None: not confirmed
    baseline_path: Path | None = None  # the FP32 ONNX outputs are compared with; None: the model itself (a
    # SmoothQuant model is compared with the original it came from)
    labels: dict[str, int] | None = None  # sample id -> class, for accuracy on the validation set
    budget_seconds: float = 600.0
    tuning_samples: int | None = None  # the first calibration samples that judge each trial; None: all
    batch_size: int = 16
    slack: float = 0.1  # Search.slack
    search_unquantized: str = "fp32"  # Search.unquantized
    confidence: float = 0.9  # share metrics pass when their lower bound at this confidence does
    ladder: bool = True  # a choice that fails on validation: find the fewest more layers in FP16 that pass (confirm_ladder)
    # None: none; the search ends by it too, and no confirmation on the validation set starts after it
    # (result.stopped then says what it cut short)
    deadline: Deadline | None = None


def tune(model_path, spec: ModelSpec, precision: Precision, target, calibration_dir, options: TuneOptions | None = None,
         *, on_trial: Callable[[Trial, Trial | None], None] | None = None,
         on_phase: Callable[[str], None] | None = None) -> TuneResult:
    """Return the fastest configuration of `model_path` in `precision` that meets the spec on the
    calibration data, confirmed on `options.validation_dir` when given.

    Histograms are collected once over every calibration sample; `options` (None: TuneOptions()'s
    defaults) says which judge each trial and how. `on_trial` and `on_phase` hear of each trial and
    step as it happens.
    """
    options = options or TuneOptions()
    from trtpipe.calibrate import DEFAULT_METHOD, calibrated_graph, calibrated_tensors, fp8_weight_steps
    from trtpipe.calibrators.choose import CHOICE_SAMPLES, choose_amax
    from trtpipe.calibrators.collect import collect_histograms
    from trtpipe.calibrators.graph import activation_inputs, constant_names
    from trtpipe.graph import onnxio
    from trtpipe.graph.keep import node_matches
    from trtpipe.graph.toolkit import label
    from trtpipe.quality.cost import cost_model, gpu_for, synthetic_feeds
    from trtpipe.quality.noise import local_noise, weight_noise
    from trtpipe.quality.sensitivity import quantizable_layers
    from trtpipe.quality.validate import thresholds_for

    if precision not in (Precision.INT8, Precision.FP8):
        raise TrtpipeError(f"--precision {precision}: tune searches int8 or fp8")
    graph = onnxio.load_float(model_path)
    spec = spec_for(spec, graph, model_path)  # a spec without [[inputs]] takes the model's, as every command's does
    model = calibrated_graph(graph, spec)  # the graph whose tensor names the typed passes and caches use
    baseline = onnxio.load_float(options.baseline_path, "--baseline", built=False) if options.baseline_path else model
    thresholds = thresholds_for(precision, spec)
    # Before any data is read: a named metric no output's task judges (inferred or the spec's) is refused, as validate refuses it
    named = require_named(spec, precision, baseline, Path(options.baseline_path or model_path).name)
    tensors = calibrated_tensors(model, model_path, str(precision), spec)
    gpu = gpu_for(target)
    if precision not in gpu.tflops:
        raise TrtpipeError(f"--precision {precision}: the {gpu.name} has no {precision} tensor cores; pick another --target")
    if on_phase:
        on_phase("reading the calibration data and collecting histograms")
    batches = load_batches(spec, calibration_dir, options.batch_size)
    if options.validation_dir is not None:
        load_batches(spec, options.validation_dir, options.batch_size)  # read now: a file it cannot use is told before the search, not after
    histograms = collect_histograms(model, tensors, [b.arrays for b in batches])
    amax = amax_by_method(histograms, precision)
    if on_phase:
        on_phase("choosing each tensor's method (auto: the least error at its layer's output)")
    choice_batches = [b.arrays for b in first_samples(batches, CHOICE_SAMPLES)]
    weight_steps = fp8_weight_steps(model, tensors, choice_batches, spec.min_weights) if precision is Precision.FP8 else {}
    amax["auto"] = choose_amax(model, histograms, choice_batches, str(precision), weight_steps)[0]
    scales = Scales(amax, weight_steps)
    tuning = first_samples(batches, options.tuning_samples) if options.tuning_samples is not None else batches
    seen = sum(b.size for b in tuning)
    wanted = baseline_outputs(baseline, tuning, spec)

    opt = {name: shapes.opt for name, shapes in spec.shapes.items()}
    feeds = synthetic_feeds(spec.inputs, opt, options.batch_size)
    costs = cost_model(model, gpu, feeds)
    constants = constant_names(model)
    nodes = quantizable_layers(model, scales.table(Config(DEFAULT_METHOD[precision])), spec.min_weights, precision)
    layers = [(label(n), activation_inputs(n, constants)) for n in nodes]
    grid = "fp8" if precision is Precision.FP8 else "int8"
    default_amax = amax[DEFAULT_METHOD[precision]]
    proxy = {label(n): sum(local_noise(histograms[t], default_amax[t], grid) for t in activation_inputs(n, constants))
             + weight_noise(model, n, constants, precision) for n in nodes}
    search = Search(model, spec, precision, scales, layers, lambda quantized: costs.seconds(precision, quantized),
                    tuning, wanted, thresholds, options.budget_seconds, slack=options.slack, confidence=options.confidence,
                    unquantized=options.search_unquantized, proxy=proxy, on_trial=on_trial, on_phase=on_phase,
                    named=named if options.validation_dir is None else {}, deadline=options.deadline)
    default = Config(DEFAULT_METHOD[precision],
                     exclude=tuple(sorted(label(n) for n in nodes if node_matches(n, spec.exclude))))
    chosen = search.run(default)
    result = TuneResult(search.trials, chosen, scales.table(chosen.config), gpu.name,
                        {k: tuple(v.shape) for k, v in feeds.items()}, thresholds, seen,
                        sum(b.size for b in batches), options.search_unquantized, options.confidence)
    if options.validation_dir is not None:
        if on_phase:
            on_phase("confirming on the validation set (never seen by the search)")

        def check(config: Config, name: str):
            return confirm(model, baseline, config, scales, spec, precision, options.validation_dir, options.labels,
                           thresholds, options.batch_size, name, named)

        if options.deadline is not None and options.deadline.passed():
            result.stopped = "the confirmation on the validation set: the budget ran out before it"
            return result
        result.validation = check(chosen.config, "tuned")
        if options.deadline is None or not options.deadline.passed():  # the report's comparison; the tuned one matters more
            result.default_validation = check(default, "default")
        if options.ladder and not result.validation.passed:
            confirm_ladder(result, search, check, on_phase, options.deadline)
    return result


def confirm_ladder(result: TuneResult, search: Search, check, on_phase=None, deadline: Deadline | None = None) -> None:
    """Find the fewest more of the most sensitive layers kept in FP16 (the search's ranking, fixed
    before the validation set was read) with which the search's choice meets the spec on the
    validation set; record every rung tried in `result.rungs` and the one found in `result.confirmed`.

    The validation set chooses here, among configurations the search ordered: its figures for the
    confirmed rung are the best of several looks, not an unseen test, and the report says so. No rung
    starts once `deadline` has passed (each is a validation run); `result.stopped` then says so."""
    order = search.keep_order(result.chosen.config)
    if len(order) < 2:
        return
    if on_phase:
        on_phase("the search's choice fails on validation: keeping more of the most sensitive layers in FP16 "
                 "until it passes there (1, 2, 4... more, then bisection)")
    tried: dict[int, Rung] = {}

    def passes(count: int) -> bool:
        config = result.chosen.config.with_exclude(set(result.chosen.config.exclude) | set(order[:count]))
        quantized = search.quantized(config)
        rung = Rung(count, config, search.price(quantized), len(quantized), check(config, f"keep{count}"))
        tried[count] = rung
        result.rungs.append(rung)
        if on_phase:
            on_phase(f"  {count} more kept: {rung.seconds * 1e3:.4f} ms estimated, validation "
                     f"{rung.report.deciding_checks()} {'PASS' if rung.report.passed else 'FAIL'}")
        return rung.report.passed

    cut = []

    def out_of_time() -> bool:
        if deadline is not None and deadline.passed():
            cut.append(True)
            return True
        return False

    found = fewest_passing(len(order) - 1, passes, out_of_time)  # keep at least one layer quantized
    if cut:
        result.stopped = (f"the validation ladder, after {len(tried)} rung{'s' * (len(tried) != 1)}: the budget ran out"
                          + (f" (the fewest found so far, {found} more kept, is written)" if found is not None else ""))
    if found is not None:
        result.confirmed = tried[found]
        result.table = search.scales.table(result.confirmed.config)


def require_named(spec: ModelSpec, precision: Precision, baseline, name: str) -> dict[str, str]:
    """Return the metrics the spec names for `precision` (validate.named_thresholds), having raised, as
    validate does (validate.require_judged), on any that no task of the `baseline` model's outputs judges:
    the spec's task or the one inferred from the outputs."""
    from trtpipe.quality.tasks import make_tasks
    from trtpipe.quality.validate import named_thresholds, require_judged
    from trtpipe.starting_spec import tensor_facts

    named = named_thresholds(precision, spec)
    require_judged(make_tasks(spec, tensor_facts(baseline)[1]), named, name)
    return named


def confirm(model, baseline, config: Config, scales: Scales, spec: ModelSpec, precision: Precision, directory, labels,
            thresholds, batch_size: int, name: str, named: dict[str, str] | None = None):
    """Return validation's report of `config`'s typed model against the baseline on `directory`; `named`
    metrics must be judged (validate.compare)."""
    from trtpipe.graph.typed import typed_model
    from trtpipe.quality.validate import compare
    from trtpipe.runtime.onnxrt import OnnxRunner

    typed = typed_model(model, precision, scales.table(config), exclude=config.exclude,
                        min_weights=spec.min_weights)
    with OnnxRunner(f"{spec.name}.{precision}.{name}.onnx", model=typed) as candidate, \
            OnnxRunner(f"{spec.name}.onnx", model=baseline) as base:
        return compare(candidate, base, spec, directory, precision, labels, thresholds, batch_size,
                       show_progress=False, named=named)
