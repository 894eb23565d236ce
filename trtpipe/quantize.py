"""FP32 ONNX to typed ONNX: what `trtpipe quantize` runs, and what `trtpipe build` decides once for all its precisions.

    plan_typed(model, precisions, spec, exclude) -> TypedPlan   (exclusions checked, INT4 block, the spec's inputs)
    TypedPlan.observing(model, data)                 -> TypedPlan   (nodes whose activations leave FP16's range)
    TypedPlan.write(model, precision, path, table)   -> the typed ONNX   (trtpipe.graph.typed)
    quantize(model path, precision, output)       -> Quantized: the three above for one precision
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from trtpipe.calibrate import calibrated_graph, load_table, observe_data_ranges, range_data
from trtpipe.errors import NothingToQuantize
from trtpipe.files import check_output, sidecar_path
from trtpipe.graph import onnxio
from trtpipe.graph.keep import check_exclude
from trtpipe.graph.lowbit import int4_block
from trtpipe.graph.typed import kept_nodes, unquantized_layers, write_typed_onnx
from trtpipe.spec import ModelSpec, decided_inputs, spec_for
from trtpipe.targets import Precision

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TypedPlan:
    """What decides a typed ONNX besides its precision and its scales: the same for every precision of a build."""

    exclude: list[str] = field(default_factory=list)
    unquantized: str = "fp16"  # what INT8/FP8 compute their unquantized layers in
    implicit: bool = False  # TensorRT 10's implicit INT8: no Q/DQ, TensorRT calibrates
    block: int | None = None  # INT4's block size; None when no precision is INT4
    shapes: dict = field(default_factory=dict)  # {input: (min, opt, max)}
    fixed: dict = field(default_factory=dict)  # {input: array}: the spec's one-value inputs, which decide If nodes
    min_weights: int = 0
    ranges: dict | None = None  # observed activations; None: constants alone decide what stays FP32

    def observing(self, model, data_dir: str | os.PathLike, spec: ModelSpec | None) -> TypedPlan:
        """Return this plan with what `data_dir` shows of `model`'s activations (graph.keep.Observed by name)."""
        return replace(self, ranges=observe_data_ranges(model, data_dir, spec))

    def write(self, model, precision: Precision, output: Path, table) -> Path:
        """Write the typed ONNX of `model` for `precision` with `table`'s scales to `output`; return its path."""
        return write_typed_onnx(model, precision, output, table, self.exclude, implicit=self.implicit,
                                unquantized=self.unquantized, ranges=self.ranges, block=self.block,
                                shapes=self.shapes, fixed=self.fixed, min_weights=self.min_weights)


def plan_typed(model, model_path: str | os.PathLike, precisions: Sequence[Precision], spec: ModelSpec | None,
                exclude: Sequence[str] = (), *, block_size: int | None = None, unquantized: str = "fp16",
                implicit: bool = False, shapes: dict | None = None, min_weights: int = 0) -> TypedPlan:
    """Return the TypedPlan of `model` for `precisions`, or raise before anything is written.

    An exclusion that matches no node fails here (a misspelt one would quantize the layer it meant),
    and so does INT4 of a model without a usable block size. `shapes` None: the spec's [shapes].
    """
    check_exclude(model, exclude, model_path, cleaned=lambda: calibrated_graph(model, spec))
    block = int4_block(model, block_size, spec.block_size if spec else None) if Precision.INT4 in precisions else None
    spec_shapes, fixed = decided_inputs(spec)
    log.debug("%s: %d exclusion pattern(s), INT4 block %s, fixed inputs %s, min_weights %d", Path(model_path).name,
              len(exclude), block, sorted(fixed), min_weights)
    return TypedPlan(list(exclude), unquantized, implicit, block, spec_shapes if shapes is None else shapes, fixed,
                  min_weights)


@dataclass(frozen=True)
class Quantized:
    """A typed ONNX written by `quantize`, and what of it stays unquantized."""

    path: Path
    kept: list[dict]  # the nodes kept in FP32: {"node", "op", "reason"}
    left_out: list[dict]  # the layers left unquantized: {"node", "op", "reason"}


def quantize(model_path: str | os.PathLike, precision: Precision | str, output: str | os.PathLike, *,
             cache: Path | None = None, spec: ModelSpec | None = None, exclude: Sequence[str] = (),
             unquantized: str = "fp16", block_size: int | None = None, min_weights: int = 0,
             data_dir: Path | None = None, reads: Sequence[Path] = ()) -> Quantized:
    """Write the typed ONNX of the model at `model_path` for `precision` to `output`; return it and what stays unquantized.

    `cache`: the calibration cache for int8, fp8 (fp4 takes the fp8 one). `spec`: a loaded
    model.toml, checked against the model's inputs here; None: the model's own inputs. `data_dir`:
    samples whose activations outside FP16's range keep their nodes FP32 (None: the spec's calibration
    directory where it exists, else constants only).
    `reads`: other files the arguments came from (`--exclude @FILE`), which `output` may not replace.
    """
    model_path, output, precision = Path(model_path), Path(output), Precision.parse(str(precision))
    # The cache's sidecar says what grid it was calibrated for: part of the cache, which no output may replace.
    check_output(output, [model_path, cache, cache and sidecar_path(cache), spec.path if spec is not None else None,
                          data_dir, *reads])
    graph = onnxio.load_float(model_path)
    table = load_table(cache, [str(precision)]) if cache is not None else None
    given_spec, spec = spec, spec_for(spec, graph, model_path)
    plan = plan_typed(graph, model_path, [precision], spec, exclude, block_size=block_size,
                         unquantized=unquantized, min_weights=min_weights)
    observed = range_data(data_dir, given_spec)
    if observed is not None:
        plan = plan.observing(graph, observed, spec)
        log.debug("%s: %d activations observed in %s", model_path.name, len(plan.ranges), observed)
    try:
        path = plan.write(graph, precision, output, table)
    except NothingToQuantize as exc:
        raise NothingToQuantize(f"{model_path}: {exc}") from None
    typed = onnxio.load(path)
    return Quantized(path, kept_nodes(typed), unquantized_layers(typed))
