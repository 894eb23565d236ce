"""What the graph tests share: ONNX Runtime runs, cosine, calibration tables, TensorRT-RTX builds."""

from __future__ import annotations

import numpy as np

import models
from trtpipe.calibrators.amax import compute_amax
from trtpipe.calibrators.cache import CalibrationTable, render
from trtpipe.calibrators.collect import collect_histograms
from trtpipe.calibrators.graph import quantized_activations
from trtpipe.graph import onnxio
from trtpipe.runtime.onnxrt import OnnxRunner


def run(model, feeds, path) -> list[np.ndarray]:
    """Return the model's outputs on `feeds`, run by ONNX Runtime's CPU provider from a saved file."""
    onnxio.save(model, path)
    with OnnxRunner(path) as runner:
        return list(runner(feeds).values())


def cosine(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def table_for(model, feeds, method="max") -> CalibrationTable:
    hists = collect_histograms(model, quantized_activations(model), [feeds])
    return CalibrationTable({k: compute_amax(h, method) for k, h in hists.items()})


def build_engines(model, feeds, tmp_path, precisions, shapes=()):
    """Build real sm_89 engines with TensorRT-RTX through trtpipe.build; return the BuildResults."""
    from trtpipe.build import BuildOptions, build
    from trtpipe.spec import parse_shapes
    from trtpipe.targets import Target

    source = tmp_path / "model.onnx"
    models.save(model, source)
    cache = None
    if any(p in ("int8", "fp8") for p in precisions):
        cache = tmp_path / "model.cache"
        cache.write_text(render(table_for(model, feeds)))
    options = BuildOptions(target=Target.parse("sm_89"), backend="tensorrt-rtx", cache=cache, shapes=parse_shapes(list(shapes)))
    return build(source, tmp_path / "engines", list(precisions), options)
