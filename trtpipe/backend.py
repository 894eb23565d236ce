"""TensorRT 10, TensorRT 11 and TensorRT-RTX behind one small interface.

Their differences are feature flags on `Backend`, read once here, so the rest of the code asks
`backend.implicit_int8` instead of comparing version strings.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

from trtpipe.errors import TrtpipeError, require
from trtpipe.targets import HARDWARE_MINIMUM, Precision, Target

BACKEND_NAMES = ("auto", "tensorrt", "tensorrt-rtx")


@dataclass(frozen=True)
class BackendSpec:
    """What is known of a backend without importing it."""

    name: str
    module: str
    extra: str
    builds_without_gpu: bool
    # None: any capability from `min_capability` up; else exactly these.
    runnable: tuple[tuple[int, int], ...] | None
    min_capability: tuple[int, int]
    # Lowest capability at which the backend itself runs each narrow precision.
    precision_minimum: dict[Precision, tuple[int, int]]
    timing_cache: bool = True  # TensorRT-RTX does not time tactics, so it has none
    # What a supported precision still asks of the installed version, shown by `plan`.
    precision_note: dict[Precision, str] = field(default_factory=dict)

    def runs_on(self, target: Target) -> bool:
        if self.runnable is not None:
            return target.capability in self.runnable
        return target.capability >= self.min_capability

    def runnable_text(self) -> str:
        if self.runnable is not None:
            return ", ".join(f"{a}.{b}" for a, b in self.runnable)
        return f"{self.min_capability[0]}.{self.min_capability[1]} and newer"

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def supports(self, target: Target, precision: Precision) -> tuple[bool, str]:
        """Return whether this backend runs `precision` on `target`, and why not."""
        if not self.runs_on(target):
            return False, f"{self.name} does not run on compute capability {target.major}.{target.minor} (it runs {self.runnable_text()})"
        if not target.hardware_supports(precision):
            need = HARDWARE_MINIMUM[precision]
            return False, f"{precision} needs compute capability {need[0]}.{need[1]} or newer"
        need = self.precision_minimum.get(precision)
        if need is not None and target.capability < need:
            return False, f"{self.name} runs {precision} from compute capability {need[0]}.{need[1]}"
        return True, self.precision_note.get(precision, "")


TENSORRT = BackendSpec(
    name="tensorrt", module="tensorrt", extra="tensorrt", builds_without_gpu=False,
    runnable=None, min_capability=(7, 5), precision_minimum={},
    precision_note={Precision.INT4: "weight-only INT4 (TensorRT 10.0 or newer)",
                    Precision.FP4: "NVFP4 (TensorRT 10.8 or newer)"},
)
TENSORRT_RTX = BackendSpec(
    name="tensorrt-rtx", module="tensorrt_rtx", extra="rtx", builds_without_gpu=True,
    runnable=((8, 0), (8, 6), (8, 9), (12, 0), (12, 1)), min_capability=(8, 0),
    # Measured with 1.7.1 on a CPU: INT4 builds for every SM it runs (7.5 is refused: "HW-specific
    # datatypes: int4"); FP4 for 12.0 and 12.1 only (8.9: "fp4_e2m1").
    precision_minimum={Precision.INT4: (8, 0), Precision.FP4: (12, 0)}, timing_cache=False,
    precision_note={Precision.INT4: "weight-only INT4", Precision.FP4: "NVFP4"},
)
SPECS = {spec.name: spec for spec in (TENSORRT, TENSORRT_RTX)}


def choose_spec(name: str, target: Target) -> BackendSpec:
    """Return the backend `name` names; for 'auto', an installed one that runs `target`.

    'auto' prefers full TensorRT (it runs every capability from 7.5), then TensorRT-RTX; when
    neither is installed it still answers, so `plan` works on a machine without backends.
    """
    if name != "auto":
        if name not in SPECS:
            raise TrtpipeError(f"--backend {name}: unknown backend; use one of {', '.join(BACKEND_NAMES)}")
        return SPECS[name]
    candidates = [spec for spec in SPECS.values() if spec.runs_on(target)]
    for spec in candidates:
        if spec.installed():
            return spec
    return candidates[0] if candidates else TENSORRT


@dataclass
class Backend:
    """A loaded backend: the module, its version, and the feature flags the pipeline branches on."""

    spec: BackendSpec
    trt: ModuleType
    version: str
    strongly_typed_only: bool
    implicit_int8: bool

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def builds_without_gpu(self) -> bool:
        return self.spec.builds_without_gpu

    def logger(self, verbose: bool = False):
        """Return the process's one logger for this backend: TensorRT keeps the first it is given."""
        from trtpipe.runtime.logger import shared_logger

        return shared_logger(self.trt, verbose)

    def strongly_typed_flags(self) -> int:
        flag = getattr(self.trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
        return 0 if flag is None else 1 << int(flag)

    def compute_capability_enum(self, target: Target):
        """Return TensorRT-RTX's ComputeCapability member for `target`, or raise."""
        member = getattr(self.trt.ComputeCapability, f"SM{target.major}{target.minor}", None)
        if member is None:
            raise TrtpipeError(
                f"--target {target.sm}: {self.name} {self.version} cannot build for compute capability "
                f"{target.major}.{target.minor}; choose one of {self.spec.runnable_text()}"
            )
        return member


def load(spec: BackendSpec, target: Target | None = None) -> Backend:
    """Import the backend's module and read its feature flags.

    When it is missing and the backends that are installed do not build for `target`, the error
    says so: installing the missing one is then not the only way out, another target is.
    """
    if target is not None and not spec.installed():
        others = [s for s in SPECS.values() if s is not spec and s.installed() and not s.runs_on(target)]
        if others:
            other = others[0]
            raise TrtpipeError(
                f"--target {target.sm}: the installed {other.name} does not build for compute capability "
                f"{target.major}.{target.minor} (it builds {other.runnable_text()}), and {spec.name} is not installed; "
                f"choose one of those targets, or pip install 'trtpipe[{spec.extra}]'"
            )
    trt = require(spec.module, spec.extra, f"the {spec.name} backend")
    version = getattr(trt, "__version__", "0")
    major = int(version.split(".")[0])
    if spec is TENSORRT_RTX:
        return Backend(spec, trt, version, strongly_typed_only=True, implicit_int8=False)
    # TensorRT 10 still has BuilderFlag.INT8 and the calibrator classes; 11 dropped both.
    has_calibrator = hasattr(trt, "IInt8EntropyCalibrator2") and hasattr(trt.BuilderFlag, "INT8")
    return Backend(spec, trt, version, strongly_typed_only=major >= 11 or not has_calibrator,
                   implicit_int8=has_calibrator)


# Precisions `--precision auto` considers: all but TF32, which is FP32 with TF32 matrix math allowed.
AUTO_PRECISIONS = (Precision.FP32, Precision.FP16, Precision.BF16, Precision.INT8, Precision.FP8, Precision.INT4,
                   Precision.FP4)


def precision_support(spec: BackendSpec, target: Target, precision: Precision) -> tuple[bool, str]:
    """Return whether trtpipe builds `precision` for `target` with the backend, and why not (or a note)."""
    return spec.supports(target, precision)


def plan_precisions(requested: Sequence[str], target: Target, spec: BackendSpec) -> list[Precision]:
    """Return the precisions to build; raise naming the first the target cannot run."""
    if list(requested) == ["auto"]:
        return [p for p in AUTO_PRECISIONS if precision_support(spec, target, p)[0]]
    precisions = [Precision.parse(p) for p in requested]
    for precision in precisions:
        ok, why = precision_support(spec, target, precision)
        if not ok:
            raise TrtpipeError(f"--precision {precision} --target {target.sm}: {why}; choose another precision or target")
    return precisions
