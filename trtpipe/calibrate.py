"""Calibration from a data directory to a TensorRT calibration cache, with a freshness sidecar."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from calibrators.amax import DEFAULT_PERCENTILE, METHODS, compute_amax
from calibrators.cache import ALGORITHMS, CacheError, CalibrationTable, read_cache, render
from calibrators.graph import quantized_activations
from calibrators.histogram import DEFAULT_BINS
from trtpipe import data
from trtpipe.config import ModelSpec, spec_from_onnx
from trtpipe.errors import TrtpipeError
from trtpipe.files import sha256, sidecar_path, write_json, write_text
from trtpipe.graph import onnxio
from trtpipe.progress import progress_bar

# TensorRT calibrates INT8 with entropy; FP8's range makes clipping cost more than it saves.
DEFAULT_METHOD = {"int8": "entropy", "fp8": "max"}


@dataclass(frozen=True)
class CalibrationOptions:
    """What decides the scales; a cache made with other options, model or data is stale."""

    method: str = "entropy"
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
        digest.update(path.name.encode() + b"\0" + sha256(path).encode())
    return digest.hexdigest()


def provenance(model_path, data_dir, options: CalibrationOptions) -> dict:
    return {"onnx_sha256": sha256(model_path), "data_sha256": data_fingerprint(data_dir), "options": asdict(options)}


def is_fresh(cache: str | os.PathLike, made_from: dict) -> bool:
    """Return True if `cache`'s sidecar records the same provenance as `made_from`."""
    side = sidecar_path(cache)
    if not Path(cache).is_file() or not side.is_file():
        return False
    try:
        recorded = json.loads(side.read_text())
    except (OSError, ValueError):
        return False
    return {k: recorded.get(k) for k in made_from} == made_from


def calibrate(model_path: str | os.PathLike, data_dir: str | os.PathLike, output: str | os.PathLike,
              options: CalibrationOptions = CalibrationOptions(), spec: ModelSpec | None = None,
              force: bool = False, show_progress: bool = True) -> tuple[CalibrationTable, bool]:
    """Return the calibration table for the model on the data, and whether it was computed anew.

    The cache at `output` is reused only when its sidecar records the same model, data and options.
    A reused cache is touched, so make and other timestamp-driven tools see it as made now.
    """
    from calibrators.collect import collect_histograms

    if options.method not in METHODS:
        raise TrtpipeError(f"--method {options.method}: unknown method; use one of {', '.join(METHODS)}")
    model = onnxio.load(model_path)
    tensors = quantized_activations(model)
    if not tensors:
        raise TrtpipeError(f"{model_path}: the model has no Conv, MatMul or Gemm layer to quantize; build it in fp16 instead")
    made_from = provenance(model_path, data_dir, options)
    if not force and is_fresh(output, made_from):
        os.utime(output)
        return read_cache(output), False
    spec = spec or spec_from_onnx(model, model_path)
    batches = data.iter_batches(spec, data_dir, options.batch_size, options.limit, options.shuffle, options.seed)
    total = data.count_samples(data_dir, options.limit)
    with progress_bar(total, f"calibrating {Path(model_path).name}", "samples", show_progress) as bar, \
            data.model_runs_on(data_dir):
        histograms = collect_histograms(model, tensors, (b.arrays for b in batches), options.bins, on_batch=bar.update)
    table = CalibrationTable(algorithm=ALGORITHMS[options.method])
    for name, hist in histograms.items():
        table.amax[name] = compute_amax(hist, options.method, options.grid, options.percentile)
    write_text(output, render(table))
    write_json(sidecar_path(output), {**made_from, "tensors": len(table.amax),
                                      "samples": bar.n})
    return table, True


def load_table(path: Path) -> CalibrationTable:
    """Return the calibration table in the cache at `path`, or raise naming the file and the fix."""
    if not Path(path).is_file():
        raise TrtpipeError(f"--cache {path}: no such file; make it with 'trtpipe calibrate'")
    try:
        return read_cache(path)
    except CacheError as exc:
        raise TrtpipeError(f"--cache {exc}; recalibrate with 'trtpipe calibrate'") from None


# Activation ranges for FP16/BF16 need the extremes, not a distribution: a few batches show them.
RANGE_SAMPLES = 32


def observe_data_ranges(model, data_dir: str | os.PathLike, spec: ModelSpec | None = None,
                        limit: int = RANGE_SAMPLES, batch_size: int = 8) -> dict:
    """Return what `data_dir` shows of every float tensor of the cleaned `model` (graph.keep.Observed by name).

    Half conversion keeps the nodes whose activations leave FP16's range in FP32. The model is
    cleaned first (graph.cleanup), so the names are those the typed passes see.
    """
    from trtpipe.graph.cleanup import cleanup
    from trtpipe.graph.keep import observe_ranges

    cleaned, _ = cleanup(model)
    spec = spec or spec_from_onnx(model, "MODEL")
    batches = (b.arrays for b in data.iter_batches(spec, data_dir, batch_size, limit))
    with data.model_runs_on(data_dir):
        return observe_ranges(cleaned, batches)
