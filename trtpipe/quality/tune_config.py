"""What `trtpipe tune` tries and gives back: a configuration (a calibration method per tensor and
the layers kept in FP16), a trial of one on the tuning split, a rung the confirmation tried on the
validation set, and the result; and the scales a configuration's table is made of (every method's amax
from one histogram collection, and FP8's weight grid positions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from trtpipe.calibrators.amax import METHODS, uniform_amax
from trtpipe.calibrators.cache import CalibrationTable
from trtpipe.calibrators.histogram import StreamingHistogram
from trtpipe.targets import Precision


@dataclass(frozen=True)
class Config:
    """One configuration: a method for every tensor (with per-tensor overrides) and the layers kept in FP16."""

    method: str
    overrides: tuple[tuple[str, str], ...] = ()  # (tensor, method), sorted
    exclude: tuple[str, ...] = ()  # sorted layer names

    def with_method(self, tensor: str, method: str) -> Config:
        overrides = dict(self.overrides)
        if method == self.method:
            overrides.pop(tensor, None)
        else:
            overrides[tensor] = method
        return Config(self.method, tuple(sorted(overrides.items())), self.exclude)

    def with_exclude(self, exclude) -> Config:
        return Config(self.method, self.overrides, tuple(sorted(set(exclude))))

    def method_of(self, tensor: str) -> str:
        return dict(self.overrides).get(tensor, self.method)



@dataclass(frozen=True)
class Scales:
    """What a configuration's table is made of: every method's amax by tensor ({method: {tensor: amax}}, one
    histogram collection), and the FP8 weights' grid positions, which calibrate's `auto` chooses whatever
    the activations' method."""

    amax: Mapping[str, Mapping[str, float]]
    weight_steps: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def table(self, config: Config) -> CalibrationTable:
        """Return the calibration table of `config`."""
        tensors = next(iter(self.amax.values()))
        return CalibrationTable({t: self.amax[config.method_of(t)][t] for t in tensors}, algorithm="TunedCalibration",
                                weight_steps=dict(self.weight_steps))


@dataclass
class Trial:
    """A configuration tried: what changed, its metrics on the tuning split, and its estimated latency."""

    index: int
    step: str
    config: Config
    metrics: dict[str, float]
    margins: tuple[float, ...]  # every check's distance above its minimum, scaled, the worst first (tune_judge)
    seconds: float  # estimated latency
    quantized: int
    counts: dict[str, int] = field(default_factory=dict)  # samples behind each share metric

    @property
    def margin(self) -> float:
        return self.margins[0]

    @property
    def passed(self) -> bool:
        return self.margin >= 0

    def to_json(self) -> dict:
        return {"index": self.index, "step": self.step, "method": self.config.method,
                "overrides": dict(self.config.overrides), "exclude": list(self.config.exclude),
                "metrics": self.metrics, "samples": self.counts, "margin": self.margin, "passed": self.passed,
                "estimated_ms": self.seconds * 1e3, "quantized_layers": self.quantized}


def amax_by_method(histograms: Mapping[str, StreamingHistogram], precision: Precision) -> dict[str, dict[str, float]]:
    """Return {method: {tensor: amax}} for all four methods from one histogram collection."""
    grid = "fp8" if precision is Precision.FP8 else "int8"
    return {method: uniform_amax(histograms, method, grid) for method in METHODS}


@dataclass
class Rung:
    """A configuration the confirmation tried on the validation set after the search's choice failed
    there: `kept` more of the most sensitive layers in FP16, its estimated latency and report."""

    kept: int
    config: Config
    seconds: float
    quantized: int
    report: object  # trtpipe.quality.validate.Report

    def to_json(self) -> dict:
        return {"kept_more": self.kept, "exclude": list(self.config.exclude), "estimated_ms": self.seconds * 1e3,
                "quantized_layers": self.quantized, "validation": self.report.to_json()}


@dataclass
class TuneResult:
    """The search's outcome: every trial, the chosen one, its table, and the validation report."""

    trials: list[Trial]
    chosen: Trial
    table: CalibrationTable
    gpu: str
    batch: dict[str, tuple[int, ...]]
    thresholds: dict[str, float]
    tuning_samples: int
    calibration_samples: int
    search_unquantized: str = "fp32"
    confidence: float = 0.0
    validation: object = None  # trtpipe.quality.validate.Report on the validation set
    default_validation: object = None
    rungs: list[Rung] = field(default_factory=list)  # what the confirmation tried, in order
    confirmed: Rung | None = None  # the most quantized rung that meets the spec on validation
    stopped: str = ""  # what a deadline cut short in the confirmation (tune's `deadline`), else empty

    @property
    def written(self) -> tuple[Config, float, int]:
        """Return the configuration written (the confirmed rung when the search's choice failed on
        validation and a rung met the spec there), its estimated latency and quantized layers."""
        if self.confirmed is not None:
            return self.confirmed.config, self.confirmed.seconds, self.confirmed.quantized
        return self.chosen.config, self.chosen.seconds, self.chosen.quantized
