"""Typed ONNX to engine: one strongly typed build per precision, with its sidecar.

    write_typed_onnx(model, precision, cache) -> DIR/<model>.<precision>.onnx   (trtpipe.graph.typed)
    build_engine(typed onnx, target, backend) -> DIR/<model>.<precision>.<sm>.engine + .json
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trtpipe import backend as backends
from trtpipe import data
from trtpipe.calibrate import load_table
from trtpipe.config import ModelSpec, Shape, spec_from_onnx
from trtpipe.errors import TrtpipeError
from trtpipe.files import ensure_dir, sha256, sidecar_path, write_bytes, write_json
from trtpipe.graph import onnxio
from trtpipe.graph.lowbit import NothingToQuantize
from trtpipe.graph.typed import write_typed_onnx
from trtpipe.runtime.sidecar import EngineInfo, TensorInfo
from trtpipe.targets import Precision, Target, local_target


@dataclass
class BuildOptions:
    """Everything that decides an engine besides the ONNX; recorded in the sidecar."""

    target: Target
    backend: str = "auto"
    cache: Path | None = None
    shapes: dict[str, tuple[Shape, Shape, Shape]] = field(default_factory=dict)
    timing_cache: Path | None = None
    calibration: str = "explicit"  # explicit Q/DQ, or TensorRT 10's implicit INT8 calibrator
    exclude: list[str] = field(default_factory=list)
    unquantized: str = "fp16"  # what INT8/FP8 engines compute their unquantized layers in
    calibration_data: Path | None = None  # implicit calibration only: TensorRT calibrates from this
    spec: ModelSpec | None = None  # how calibration_data maps to inputs
    batch_size: int = 8
    verbose: bool = False

    def record(self) -> dict:
        return {
            "target": self.target.sm, "backend": self.backend, "shapes": {k: [list(s) for s in v] for k, v in self.shapes.items()},
            "timing_cache": str(self.timing_cache) if self.timing_cache else None,
            "calibration": self.calibration, "exclude": list(self.exclude), "unquantized": self.unquantized,
        }


def engine_path(output_dir: Path, model_name: str, precision: Precision, target: Target) -> Path:
    return output_dir / f"{model_name}.{precision}.{target.sm}.engine"


def _numpy_dtype(backend: backends.Backend, dtype) -> str:
    import numpy as np

    try:
        return np.dtype(backend.trt.nptype(dtype)).name
    except (TypeError, KeyError, AttributeError):
        return str(dtype).rsplit(".", 1)[-1].lower()


def build_engine(typed_onnx: Path, engine: Path, precision: Precision, options: BuildOptions,
                 backend: backends.Backend, source_onnx: Path) -> EngineInfo:
    """Build one strongly typed engine from `typed_onnx` and write it with its sidecar."""
    trt = backend.trt
    target = options.target
    if not backend.builds_without_gpu:
        local = local_target()
        if local.capability != target.capability:
            raise TrtpipeError(
                f"--target {target.sm}: {backend.name} builds only for this machine's GPU ({local}); "
                "build on a machine with the target GPU, or use --backend tensorrt-rtx"
            )
    logger = backend.logger(options.verbose)
    builder = trt.Builder(logger)
    implicit = options.calibration == "implicit"
    network = builder.create_network(0 if implicit else backend.strongly_typed_flags())
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(typed_onnx)):
        errors = "; ".join(str(parser.get_error(i)).strip().splitlines()[0] for i in range(parser.num_errors))
        raise TrtpipeError(f"{typed_onnx}: {backend.name} cannot parse the model ({errors[:300]}); inspect it with 'trtpipe inspect'")
    config = builder.create_builder_config()
    if backend.builds_without_gpu:
        config.num_compute_capabilities = 1
        config.set_compute_capability(backend.compute_capability_enum(target), 0)
    if hasattr(trt.BuilderFlag, "TF32"):
        # TensorRT runs FP32 matrix math in TF32 unless told not to: fp32 means fp32.
        (config.set_flag if precision is Precision.TF32 else config.clear_flag)(trt.BuilderFlag.TF32)

    tensors, profile = _io_tensors(network, backend, builder, options.shapes, typed_onnx)
    if profile is not None:
        config.add_optimization_profile(profile)
    calibrator = _configure_implicit_int8(config, backend, options, profile, typed_onnx) if implicit else None
    if options.timing_cache is not None:
        _load_timing_cache(config, options.timing_cache)

    start = time.perf_counter()
    try:
        serialized = builder.build_serialized_network(network, config)
    finally:
        if calibrator is not None:
            calibrator.free()
    seconds = time.perf_counter() - start
    if serialized is None:
        raise TrtpipeError(f"{typed_onnx}: {backend.name} failed to build a {precision} engine for {target.sm}; rerun with --verbose")
    write_bytes(engine, bytes(serialized))
    if options.timing_cache is not None:
        write_bytes(options.timing_cache, bytes(config.get_timing_cache().serialize()), "--timing-cache")
    info = EngineInfo(
        engine=engine.name, backend=backend.name, backend_version=backend.version, target=target.sm,
        compute_capability=f"{target.major}.{target.minor}", precision=str(precision), onnx=str(source_onnx),
        onnx_sha256=sha256(source_onnx), engine_sha256=sha256(engine),
        cache_sha256=sha256(options.cache) if options.cache and precision.quantized else None,
        build_seconds=round(seconds, 3), options={**options.record(), "typed_onnx": typed_onnx.name}, tensors=tensors,
    )
    write_json(sidecar_path(engine), info.to_json())
    return info


def _io_tensors(network, backend, builder, shapes, typed_onnx) -> tuple[list[TensorInfo], object]:
    """Return the network's I/O tensors and an optimization profile for its dynamic inputs."""
    tensors = []
    profile = None
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        shape = list(tensor.shape)
        info = TensorInfo(tensor.name, "input", _numpy_dtype(backend, tensor.dtype), shape)
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
        tensors.append(TensorInfo(tensor.name, "output", _numpy_dtype(backend, tensor.dtype), list(tensor.shape)))
    return tensors, profile


def _load_timing_cache(config, path: Path) -> None:
    cache = config.create_timing_cache(path.read_bytes() if path.is_file() else b"")
    config.set_timing_cache(cache, ignore_mismatch=False)


def _configure_implicit_int8(config, backend: backends.Backend, options: BuildOptions, profile, options_onnx: Path):
    """TensorRT 10's legacy INT8 path: BuilderFlag.INT8 and our IInt8EntropyCalibrator2, returned.

    This path cannot run on the machines trtpipe is developed on (it needs TensorRT 10 and a GPU);
    it is written to TensorRT 10's documented Python API.
    """
    if options.cache is None and options.calibration_data is None:
        raise TrtpipeError("--calibration implicit needs --cache CACHE or --data DIR for TensorRT to calibrate from")
    from calibrators.tensorrt import make_calibrator

    # TensorRT calibrates at the calibration profile's OPT shape, so batches come in that size.
    batch_size = next(iter(options.shapes.values()))[1][0] if options.shapes else options.batch_size
    batches = []
    if options.calibration_data is not None:
        spec = options.spec or spec_from_onnx(onnxio.load(options_onnx), options_onnx)
        batches = (b.arrays for b in data.iter_batches(spec, options.calibration_data, batch_size))
    trt = backend.trt
    config.set_flag(trt.BuilderFlag.INT8)
    config.set_flag(trt.BuilderFlag.FP16)  # layers TensorRT keeps out of INT8 may still run in FP16
    calibrator = make_calibrator(trt, options.cache, batches, batch_size)
    config.int8_calibrator = calibrator
    if profile is not None:
        config.set_calibration_profile(profile)
    return calibrator


@dataclass
class BuildResult:
    typed_onnx: Path
    engine: Path
    info: EngineInfo


def build(model_path: str | os.PathLike, output_dir: str | os.PathLike, precisions: Sequence[str],
          options: BuildOptions, on_engine=None) -> list[BuildResult]:
    """Build an engine per precision into `output_dir`; return what was written."""
    model_path = Path(model_path)
    model = onnxio.load(model_path)  # a bad model fails here, before any file is written
    spec = backends.choose_spec(options.backend, options.target)
    chosen = backends.plan_precisions(precisions, options.target, spec)
    table = load_table(options.cache) if options.cache is not None else None
    if options.timing_cache is not None and not spec.timing_cache:
        raise TrtpipeError(f"--timing-cache: {spec.name} has no timing cache (it does not time tactics); drop the flag")
    backend = backends.load(spec)
    if options.calibration == "implicit" and chosen != [Precision.INT8]:
        raise TrtpipeError("--calibration implicit builds int8 only; pass --precision int8")
    if options.calibration == "implicit" and not backend.implicit_int8:
        raise TrtpipeError(
            f"--calibration implicit: {backend.name} {backend.version} has no implicit INT8 (TensorRT 10 only); "
            "use --calibration explicit"
        )
    output_dir = ensure_dir(output_dir)
    results = []
    for precision in chosen:
        try:
            typed = write_typed_onnx(model, precision, output_dir / f"{model_path.stem}.{precision}.onnx",
                                     table, options.exclude, implicit=options.calibration == "implicit",
                                     unquantized=options.unquantized)
        except NothingToQuantize:
            if list(precisions) == ["auto"]:
                continue  # e.g. int4 of a model whose layers are all narrower than a block
            raise
        engine = engine_path(output_dir, model_path.stem, precision, options.target)
        info = build_engine(typed, engine, precision, options, backend, model_path)
        results.append(BuildResult(typed, engine, info))
        if on_engine is not None:
            on_engine(results[-1])
    return results
