"""Typed ONNX to engine: one strongly typed build per precision, with its sidecar.

    TypedPlan.write(model, precision, cache)     -> DIR/<model>.<precision>.onnx   (trtpipe.quantize, as `trtpipe quantize`)
    build_engine(typed onnx, target, backend) -> DIR/<model>.<precision>.<sm>.engine + .json
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from trtpipe import backend as backends
from trtpipe import data
from trtpipe.calibrate import (
    DEFAULT_METHOD,
    CalibrationOptions,
    cache_grid,
    calibrate,
    load_table,
    range_data,
)
from trtpipe.errors import NothingToQuantize, TrtpipeError
from trtpipe.files import (
    Outputs,
    check_output,
    check_output_dir,
    ensure_dir,
    json_text,
    sha256,
    sidecar_path,
    staged_outputs,
    write_bytes,
)
from trtpipe.graph import onnxio
from trtpipe.graph.typed import kept_nodes, unquantized_layers
from trtpipe.quantize import plan_typed
from trtpipe.runtime.dtypes import numpy_dtype, trt_type_name
from trtpipe.runtime.logger import held_errors, shared_logger
from trtpipe.runtime.sidecar import EngineInfo, TensorInfo, sealed
from trtpipe.spec import ModelSpec, ShapeRange, spec_from_onnx
from trtpipe.targets import Precision, Target, local_target

log = logging.getLogger(__name__)


@dataclass
class BuildOptions:
    """Everything that decides an engine besides the ONNX; recorded in the sidecar."""

    target: Target
    backend: str = "auto"
    cache: Path | None = None
    # Caches per precision, before `cache`; what neither gives is calibrated from the data (`caches_for`).
    caches: dict[Precision, Path] = field(default_factory=dict)
    shapes: dict[str, ShapeRange] = field(default_factory=dict)
    timing_cache: Path | None = None
    calibration: str = "explicit"  # explicit Q/DQ, or TensorRT 10's implicit INT8 calibrator
    exclude: list[str] = field(default_factory=list)
    unquantized: str = "fp16"  # what INT8/FP8 engines compute their unquantized layers in
    # Implicit calibration: TensorRT calibrates from this. Explicit: half-precision parts keep the
    # nodes whose activations on it leave FP16's range in FP32.
    calibration_data: Path | None = None
    spec: ModelSpec | None = None  # how calibration_data maps to inputs
    # What calibration_data showed (calibrate.observe_data_ranges), given by a caller that builds one
    # model many times (deploy: one build a precision); None: observed here, each build.
    ranges: dict | None = None
    batch_size: int = 8
    verbose: bool = False
    block_size: int | None = None  # int4: --block-size; None: the AWQ model's, the spec's, else 128
    min_weights: int = 0  # int8/fp8: layers with fewer weight elements stay unquantized (--min-weights)

    def cache_of(self, precision: Precision) -> Path | None:
        """Return the cache `precision` builds from: its own in `caches`, else `cache`."""
        return self.caches.get(precision, self.cache)

    def record(self) -> dict:
        return {
            "target": self.target.sm, "backend": self.backend, "shapes": {k: [list(s) for s in v] for k, v in self.shapes.items()},
            "timing_cache": str(self.timing_cache) if self.timing_cache else None,
            "calibration": self.calibration, "exclude": list(self.exclude), "unquantized": self.unquantized,
            **({"block_size": self.block_size} if self.block_size else {}),
            **({"min_weights": self.min_weights} if self.min_weights else {}),
        }


def engine_path(output_dir: Path, model_name: str, precision: Precision, target: Target) -> Path:
    return output_dir / f"{model_name}.{precision}.{target.sm}.engine"


def _numpy_dtype(dtype) -> str:
    """The sidecar's dtype name: numpy's (bfloat16, float8_e4m3fn included), else TensorRT's in lower case (int4)."""
    try:
        return numpy_dtype(dtype).name
    except TrtpipeError:
        return trt_type_name(dtype).lower()


def commit_engine(engine: Path, plan: bytes, info: EngineInfo, outputs: Outputs | None = None) -> None:
    """Write the sidecar, then the engine: the engine and its sidecar as one (with `outputs`: staged there,
    committed with the command's other files).

    The sidecar records the engine's sha256 and is renamed first. Ctrl-C waits until both are in place;
    a build killed (SIGKILL) between the two renames leaves the old engine (or none) beside a sidecar
    that does not describe it: every reader checks the sha256 and refuses, and make, seeing an engine
    older than its sources, rebuilds it. A build stopped before the renames leaves the old pair untouched.
    """
    with staged_outputs(outputs) as staged:
        staged.write(sidecar_path(engine), json_text(sealed(info)))
        staged.write(engine, plan)


def build_engine(typed_onnx: Path, engine: Path, precision: Precision, options: BuildOptions,
                 backend: backends.Backend, source_onnx: Path, typed_name: str | None = None,
                 outputs: Outputs | None = None) -> EngineInfo:
    """Build one strongly typed engine from `typed_onnx` and write it with its sidecar.

    `typed_name`: the file name the typed ONNX will have once committed (it is built from a temporary).
    `outputs`: stage the engine and sidecar there, to commit with the typed ONNX (else written at once).
    """
    trt = backend.trt
    target = options.target
    draft, typed_onnx = typed_onnx, typed_onnx.parent / typed_name if typed_name else typed_onnx  # errors name the final file
    if not backend.builds_without_gpu:
        local = local_target()
        if local.capability != target.capability:
            raise TrtpipeError(
                f"--target {target.sm}: {backend.name} builds only for this machine's GPU ({local}); "
                "build on a machine with the target GPU, or use --backend tensorrt-rtx"
            )
    logger = shared_logger(trt, options.verbose)  # TensorRT keeps the first logger of the process
    builder = trt.Builder(logger)
    implicit = options.calibration == "implicit"
    network = builder.create_network(0 if implicit else backend.strongly_typed_flags())
    parser = trt.OnnxParser(network, logger)
    with held_errors(options.verbose):  # the parser's own errors say it in one line below
        parsed = parser.parse_from_file(str(draft))
    if not parsed:
        errors = "; ".join(str(parser.get_error(i)).strip().splitlines()[0] for i in range(parser.num_errors))
        raise TrtpipeError(f"{typed_onnx}: {backend.name} cannot parse the model ({errors[:300]}); inspect it with 'trtpipe inspect'")
    config = builder.create_builder_config()
    if backend.builds_without_gpu:
        config.num_compute_capabilities = 1
        config.set_compute_capability(backend.compute_capability_enum(target), 0)
    if hasattr(trt.BuilderFlag, "TF32"):
        # TensorRT runs FP32 matrix math in TF32 unless told not to: fp32 means fp32.
        (config.set_flag if precision is Precision.TF32 else config.clear_flag)(trt.BuilderFlag.TF32)

    tensors, profile = _io_tensors(network, builder, options.shapes, typed_onnx)
    if profile is not None:
        config.add_optimization_profile(profile)
    calibrator = _configure_implicit_int8(config, network, profile, backend, options, tensors, source_onnx) if implicit else None
    timing_cache = _attach_timing_cache(config, options.timing_cache) if options.timing_cache is not None else None

    start = time.perf_counter()
    try:
        with held_errors(options.verbose) as logged:
            serialized = builder.build_serialized_network(network, config)
    finally:
        if calibrator is not None:
            calibrator.free()
    seconds = time.perf_counter() - start
    if calibrator is not None:
        calibrator.feed.raise_error()  # TensorRT swallowed it and built anyway: write nothing
    if serialized is None:
        # TensorRT's first error, without where in its sources it was raised ("In compileGraph at /_src/...")
        first = re.sub(r" In \w+ at /\S+", "", logged[0].splitlines()[0])[:240] if logged else None
        said = f" ({first})" if first else ""
        raise TrtpipeError(f"{typed_onnx}: {backend.name} failed to build a {precision} engine for {target.sm}{said}; "
                           "rerun with --verbose")
    plan = bytes(serialized)
    if timing_cache is not None:
        write_bytes(options.timing_cache, bytes(timing_cache.serialize()), "--timing-cache")
    records = onnxio.load(draft)  # the typed ONNX's metadata: nodes kept in FP32, layers left unquantized
    info = EngineInfo(
        engine=engine.name, backend=backend.name, backend_version=backend.version, target=target.sm,
        compute_capability=f"{target.major}.{target.minor}", precision=str(precision), onnx=str(source_onnx),
        onnx_sha256=sha256(source_onnx), engine_sha256=hashlib.sha256(plan).hexdigest(),
        cache_sha256=sha256(options.cache_of(precision)) if precision.quantized and options.cache_of(precision) else None,
        build_seconds=round(seconds, 3), options={**options.record(), "typed_onnx": typed_onnx.name}, tensors=tensors,
        kept_fp32=kept_nodes(records), unquantized_layers=unquantized_layers(records),
    )
    commit_engine(engine, plan, info, outputs)
    return info


def _io_tensors(network, builder, shapes, typed_onnx) -> tuple[list[TensorInfo], object]:
    """Return the network's I/O tensors and an optimization profile for its dynamic inputs."""
    tensors = []
    profile = None
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        shape = list(tensor.shape)
        if tensor.is_shape_tensor:
            raise TrtpipeError(
                f"{typed_onnx}: input '{tensor.name}' is a shape tensor (its values, read on the host, set other shapes); "
                "trtpipe's runtime does not feed shape tensors: make it a constant in the ONNX, or feed a data tensor"
            )
        info = TensorInfo(tensor.name, "input", _numpy_dtype(tensor.dtype), shape)
        if any(d < 0 for d in shape):
            if tensor.name not in shapes:
                raise TrtpipeError(
                    f"{typed_onnx}: input '{tensor.name}' has dynamic shape {shape}; "
                    f"pass --shapes {tensor.name}:MIN/OPT/MAX (dims joined by x)"
                )
            triple = shapes[tensor.name]
            for s in triple:
                if len(s) != len(shape) or any(d >= 0 and d != v for d, v in zip(shape, s)):
                    raise TrtpipeError(f"--shapes {tensor.name}: {'x'.join(map(str, s))} does not fit the input's shape {shape}")
            profile = profile or builder.create_optimization_profile()
            profile.set_shape(tensor.name, *triple)
            info.profile = [list(s) for s in triple]
        tensors.append(info)
    unknown = set(shapes) - {t.name for t in tensors}
    if unknown:
        raise TrtpipeError(f"--shapes {min(unknown)}: the model has no such input ({', '.join(t.name for t in tensors)})")
    for i in range(network.num_outputs):
        tensor = network.get_output(i)
        tensors.append(TensorInfo(tensor.name, "output", _numpy_dtype(tensor.dtype), list(tensor.shape)))
    return tensors, profile


def _attach_timing_cache(config, path: Path):
    """Return the timing cache attached to `config`: the one in `path`, or a new one if there is none.

    TensorRT refuses (set_timing_cache returns False) a cache made on another GPU or version, and then
    has none to give back after the build: say so before building, not after the engine is written.
    """
    cache = config.create_timing_cache(path.read_bytes() if path.is_file() else b"")
    if cache is None or not config.set_timing_cache(cache, ignore_mismatch=False):
        raise TrtpipeError(f"--timing-cache {path}: TensorRT will not use it (made on another GPU or TensorRT version, "
                           "or not a timing cache); delete it or pass a new path")
    return cache


def calibration_shapes(tensors: list[TensorInfo]) -> dict[str, tuple[int, ...]]:
    """Return the shape TensorRT calibrates each input at: the profile's OPT shape, or the static shape."""
    return {t.name: tuple(t.profile[1]) if t.profile else tuple(t.shape) for t in tensors if t.mode == "input"}


# What implicit INT8 engines compute layers TensorRT keeps out of INT8 in, as builder flags.
UNQUANTIZED_FLAGS = {"fp32": (), "fp16": ("FP16",), "bf16": ("BF16",)}


def implicit_flags(unquantized: str) -> tuple[str, ...]:
    """Return the BuilderFlag names of an implicit INT8 build: INT8, and the type of unquantized layers."""
    if unquantized not in UNQUANTIZED_FLAGS:
        raise TrtpipeError(f"--unquantized {unquantized}: use one of {', '.join(UNQUANTIZED_FLAGS)}")
    return ("INT8", *UNQUANTIZED_FLAGS[unquantized])


def excluded_layers(network, onnx_path: Path, exclude: list[str]) -> list:
    """Return the network's layers made from the ONNX nodes `exclude` matches (TensorRT's ONNX parser
    names a layer after its node), or raise when patterns match nodes but no layer carries their names."""
    from trtpipe.graph.keep import node_matches
    from trtpipe.graph.toolkit import label

    if not exclude:
        return []
    names = {label(node) for node in onnxio.load(onnx_path).graph.node if node_matches(node, exclude)}
    layers = [network.get_layer(i) for i in range(network.num_layers) if network.get_layer(i).name in names]
    if names and not layers:
        raise TrtpipeError(f"--exclude: {len(names)} ONNX nodes match, but no TensorRT layer carries their names; "
                           "use --calibration explicit, where --exclude works on the ONNX itself")
    return layers


def _configure_implicit_int8(config, network, profile, backend: backends.Backend, options: BuildOptions,
                             tensors: list[TensorInfo], onnx_path: Path):
    """TensorRT 10's legacy INT8 path: INT8 (and the unquantized type's) builder flags, layers kept out of
    INT8 by --exclude, and our IInt8EntropyCalibrator2, returned.

    This path cannot run on the machines trtpipe is developed on (it needs TensorRT 10 and a GPU);
    it is written to TensorRT 10's documented Python API.
    """
    if options.cache is None and options.calibration_data is None:
        raise TrtpipeError("--calibration implicit needs --cache CACHE or --data DIR for TensorRT to calibrate from")
    from trtpipe.calibrators.tensorrt import CalibrationFeed, make_calibrator, tensorrt_version_number

    trt = backend.trt
    shapes = calibration_shapes(tensors)
    batch_size = next(iter(shapes.values()))[0]
    for flag in implicit_flags(options.unquantized):
        config.set_flag(getattr(trt.BuilderFlag, flag))
    keep = {"fp32": trt.float32, "fp16": trt.float16, "bf16": getattr(trt, "bfloat16", None)}[options.unquantized]
    layers = excluded_layers(network, onnx_path, options.exclude)
    for layer in layers:
        layer.precision = keep
        for i in range(layer.num_outputs):
            layer.set_output_type(i, keep)
    if layers:
        config.set_flag(trt.BuilderFlag.OBEY_PRECISION_CONSTRAINTS)
    batches = []
    if options.calibration_data is not None:
        spec = options.spec or spec_from_onnx(onnxio.load(onnx_path), onnx_path)
        batches = (b.arrays for b in data.iter_batches(spec, options.calibration_data, batch_size))
    header = f"TRT-{tensorrt_version_number(trt.__version__)}-EntropyCalibration2"
    # Data given: TensorRT calibrates from it and rewrites the cache, rather than reading an old one.
    feed = CalibrationFeed(batches, shapes, options.cache, header, reuse_cache=options.calibration_data is None)
    calibrator = make_calibrator(trt, feed)
    config.int8_calibrator = calibrator
    if profile is not None:
        config.set_calibration_profile(profile)
    return calibrator


@dataclass
class BuildResult:
    typed_onnx: Path
    engine: Path
    info: EngineInfo


# The grid each quantized precision's scales are chosen on: NVFP4 engines take the FP8 cache.
CACHE_GRID = {Precision.INT8: "int8", Precision.FP8: "fp8", Precision.FP4: "fp8"}


def caches_for(model_path: Path, chosen: Sequence[Precision], options: BuildOptions,
               output_dir: Path) -> tuple[dict[Precision, Path], dict[str, Path]]:
    """Return the cache each quantized precision builds from, and the caches to calibrate first ({grid: path}).

    A cache given (per precision, else --cache) is used where its grid fits; the others are
    calibrated from the data (--data, else the spec's calibration directory) into
    `output_dir/<model>.<grid>.cache`. Nothing is written here: a precision that has neither fails
    before the first engine.
    """
    caches: dict[Precision, Path] = {}
    to_calibrate: dict[str, Path] = {}
    if options.calibration == "implicit":
        return caches, to_calibrate
    data_dir = options.calibration_data or (options.spec.calibration if options.spec else None)
    for precision in chosen:
        grid = CACHE_GRID.get(precision)
        if grid is None:
            continue
        given = options.cache_of(precision)
        if given is not None and (data_dir is None or cache_grid(given) in (None, grid)):
            caches[precision] = given  # load_table says so when the grid is wrong and there is no data
            continue
        if data_dir is None:
            raise TrtpipeError(f"--precision {precision} needs a calibration cache: pass --data DIR (or a --spec with "
                               f"data.calibration) to calibrate it, or --cache CACHE from 'trtpipe calibrate "
                               f"--precision {grid}'")
        caches[precision] = to_calibrate.setdefault(grid, output_dir / f"{model_path.stem}.{grid}.cache")
    return caches, to_calibrate


def build(model_path: str | os.PathLike, output_dir: str | os.PathLike, precisions: Sequence[str],
          options: BuildOptions, on_engine=None, on_cache=None) -> list[BuildResult]:
    """Build an engine per precision into `output_dir`; return what was written.

    Every precision's needs are checked before anything is written; the INT8/FP8 caches that no
    --cache gives are calibrated from the data first (`caches_for`), reported to `on_cache(grid, path, fresh)`.
    """
    model_path = Path(model_path)
    model = onnxio.load_float(model_path)  # a bad model fails here, before any file is written
    spec = backends.choose_spec(options.backend, options.target)
    chosen = backends.plan_precisions(precisions, options.target, spec)
    output_dir = Path(output_dir)
    check_output_dir(output_dir, "-o", "the engines")
    caches, to_calibrate = caches_for(model_path, chosen, options, output_dir)
    tables = {precision: load_table(path, [precision]) for precision, path in caches.items() if path not in to_calibrate.values()}
    typed_plan = plan_typed(model, model_path, chosen, options.spec, options.exclude, block_size=options.block_size,
                               unquantized=options.unquantized, implicit=options.calibration == "implicit",
                               shapes=options.shapes, min_weights=options.min_weights)
    if options.timing_cache is not None and not spec.timing_cache:
        raise TrtpipeError(f"--timing-cache: {spec.name} has no timing cache (it does not time tactics); drop the flag")
    backend = backends.load(spec, options.target)
    if options.calibration == "implicit" and chosen != [Precision.INT8]:
        raise TrtpipeError("--calibration implicit builds int8 only; pass --precision int8")
    if options.calibration == "implicit" and not backend.implicit_int8:
        raise TrtpipeError(
            f"--calibration implicit: {backend.name} {backend.version} has no implicit INT8 (TensorRT 10 only); "
            "use --calibration explicit"
        )
    inputs = [model_path, options.timing_cache, *caches.values(), options.calibration_data,
              options.spec.path if options.spec is not None else None]
    for precision in chosen:  # before anything is written: no output may be an input
        engine = engine_path(output_dir, model_path.stem, precision, options.target)
        check_output(engine, inputs, siblings=[sidecar_path(engine), output_dir / f"{model_path.stem}.{precision}.onnx"])
    for path in to_calibrate.values():
        check_output(path, [model_path, options.timing_cache, options.spec.path if options.spec else None],
                     siblings=[sidecar_path(path)])
    output_dir = ensure_dir(output_dir)
    data_dir = options.calibration_data or (options.spec.calibration if options.spec else None)
    auto = list(precisions) == ["auto"]
    for grid, path in to_calibrate.items():
        try:
            table, fresh = calibrate(model_path, data_dir, path, CalibrationOptions(DEFAULT_METHOD[grid], grid=grid),
                                     options.spec)
        except NothingToQuantize as exc:
            skipped = [p for p, c in caches.items() if c == path]
            if not auto:  # asked for by name: the one line says to build fp16 instead, naming the precision asked for
                other = [str(p) for p in skipped if str(p) != grid]
                raise NothingToQuantize(f"--precision {'/'.join(other)} (calibrated on {grid}'s grid): {exc}"
                                        if other else str(exc)) from None
            # `auto` means what the model and target run: a model with no layer to scale has no INT8 or FP8,
            # as deploy skips them, and its FP32, FP16 and BF16 are built (they were refused with it).
            chosen = [p for p in chosen if p not in skipped]
            log.warning("%s not built: %s", " and ".join(map(str, skipped)), exc)
            continue
        tables.update({p: table for p, c in caches.items() if c == path})
        if on_cache is not None:
            on_cache(grid, path, fresh)
    options = replace(options, caches=caches)  # the sidecars record the cache each engine was built from
    observed = range_data(options.calibration_data, options.spec)
    if options.ranges is not None:  # observed once by the caller for all its builds (deploy)
        typed_plan = replace(typed_plan, ranges=options.ranges)
    elif observed is not None and options.calibration == "explicit" \
            and any(p not in (Precision.FP32, Precision.TF32) for p in chosen):
        typed_plan = typed_plan.observing(model, observed, options.spec)
    results = []
    for precision in chosen:
        typed = output_dir / f"{model_path.stem}.{precision}.onnx"
        engine = engine_path(output_dir, model_path.stem, precision, options.target)
        # The typed ONNX, the sidecar and the engine are staged and committed as one, the typed ONNX
        # last: a failed or interrupted build leaves none of them, and no typed ONNX that looks finished.
        try:
            with staged_outputs() as outputs:
                draft = outputs.stage(typed, last=True)
                typed_plan.write(model, precision, draft, tables.get(precision))
                info = build_engine(draft, engine, precision, options, backend, model_path, typed_name=typed.name,
                                    outputs=outputs)
        except NothingToQuantize as exc:
            if auto:  # e.g. int4 of a model whose layers are all narrower than a block
                log.warning("%s not built: %s: %s", precision, model_path, exc)
                continue
            raise NothingToQuantize(f"{model_path}: {exc}") from None
        results.append(BuildResult(typed, engine, info))
        if on_engine is not None:
            on_engine(results[-1])
    return results
