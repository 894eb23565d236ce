"""Cleanup before any precision rewrite: constants folded, BatchNormalization folded, dims named.

Exporters leave graphs that no precision pass should see as they are: Conv weights as Constant
nodes (Paddle), BatchNormalization whose running variance (1e7..1e8 in PP-OCR) no FP16 tensor
holds, weights behind a Transpose or Reshape, and one dynamic dimension name ("?", or any one name)
on height and width, which TensorRT takes to mean that the two are equal.

The folding is ONNX Runtime's own offline optimizer at ORT_ENABLE_BASIC (constant folding, Constant
nodes written as initializers, Conv+BatchNormalization/Add/Mul fusion, redundant node removal):
these rewrites keep ONNX semantics and node names, need no new dependency, and the optimized model
is written by ONNX Runtime itself. (onnxslim folds as well, but renames fused nodes and fuses Pad
into Conv, so `--exclude` lists and calibration caches stop matching.) The cleaned graph is then run
against the original on random inputs: a cleanup that changed the numbers is an error, not a surprise.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.graph import sessions, toolkit
from trtpipe.graph.inputs import index_limits, random_inputs

# The largest relative difference a float output may show after folding: folding reorders FP32
# arithmetic (w * gamma / sqrt(var) once instead of per inference), which moves the last bits only.
TOLERANCE = 1e-3
# Outputs near zero everywhere (a text detector's map on random pixels) are compared against this
# floor instead of their own tiny maximum.
SCALE_FLOOR = 1e-2
# What a dynamic dimension is set to when the check feeds random inputs: small, and a multiple of
# the 32-pixel stride detectors and OCR nets need.
CHECK_DIM = 64
ANONYMOUS_DIMS = ("", "?")
# Basic-level rewrites left out: they rename the tensors that feed Conv/MatMul (Pad folded into
# Conv's pads, MatMul+Add turned into Gemm), so calibration caches and --exclude lists made on the
# exported graph would stop matching, and TensorRT fuses both patterns itself.
KEPT_AS_EXPORTED = ("Pad_Fusion", "MatMulAddFusion")  # the names ONNX Runtime registers them under
# Before IR 4 (onnx 1.3: Caffe2 and early PyTorch exports) every initializer had to be a graph input too.
FIRST_IR_WITHOUT_INITIALIZER_INPUTS = 4


@dataclass
class CleanupReport:
    """What cleanup did: counts for the log, renamed dims, and the check's verdict."""

    nodes_before: int = 0
    nodes_after: int = 0
    batchnorms_folded: int = 0
    constants_to_initializers: int = 0
    initializer_inputs: int = 0  # initializers also listed as graph inputs (IR 4 exports), taken out of the inputs
    ranked: list[str] = field(default_factory=list)  # inputs and outputs the ONNX gave no shape (any rank), ranked here
    renamed_dims: dict[str, str] = field(default_factory=dict)  # "input:axis" -> new name
    folded_ifs: list = field(default_factory=list)  # graph.control.FoldedIf: If nodes replaced by the branch taken
    max_relative_error: float | None = None  # None: not checked
    check_note: str = ""


def rank_inputs(model, shapes) -> list[str]:
    """Give each graph input that the ONNX leaves without a shape (any rank: ONNX Runtime runs it, TensorRT
    needs a rank, ONNX's checker refuses the rewritten graph) the rank of its profile in `shapes`, in place:
    a dim whose MIN and MAX agree fixed, the others dynamic (name_dims names them). Returns their names."""
    constants = {init.name for init in model.graph.initializer}
    ranked = []
    for value in model.graph.input:
        tensor = value.type.tensor_type
        if value.name in constants or not value.type.HasField("tensor_type") or tensor.HasField("shape"):
            continue
        profile = (shapes or {}).get(value.name)
        if profile is None:
            raise TrtpipeError(f"input '{value.name}' has no shape in the ONNX (any rank), and nothing gives it one; name "
                               "its MIN/OPT/MAX in the spec's [shapes] or --shapes ('trtpipe init --data' reads them "
                               "from a sample)")
        tensor.shape.SetInParent()
        for low, high in zip(profile[0], profile[2]):
            dim = tensor.shape.dim.add()
            if low == high:
                dim.dim_value = low
        ranked.append(value.name)
    return ranked


def shape_outputs(model) -> list[str]:
    """Give each graph output the ONNX leaves without a shape the one ONNX's shape inference finds, in
    place, once the inputs are ranked (rank_inputs); returns their names."""
    import onnx

    missing = {value.name for value in model.graph.output
               if value.type.HasField("tensor_type") and not value.type.tensor_type.HasField("shape")}
    if not missing:
        return []
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - inference is a best effort; an output left unshaped is named when saved
        return []
    found = {value.name: value for value in inferred.graph.output
             if value.name in missing and value.type.tensor_type.HasField("shape")}
    for value in model.graph.output:
        if value.name in found:
            value.type.tensor_type.shape.CopyFrom(found[value.name].type.tensor_type.shape)
    return sorted(found)


def name_dims(model) -> dict[str, str]:
    """Give anonymous or repeated dynamic dims of the graph inputs and outputs names of their own, in place.

    A dim named "?" or "" (or left without a name) is anonymous; a name that one tensor carries on
    two axes (height and width both "?" or both "size") ties them, and TensorRT would require the two
    equal. Every such axis gets `<tensor>_dim<axis>`; the first axis carrying a name keeps it. Names
    shared between tensors (a batch dim on several inputs) are left alone: those relations are real.
    Returns {"tensor:axis": new name}.
    """
    renamed = {}
    for value in list(model.graph.input) + list(model.graph.output):
        if not value.type.HasField("tensor_type"):
            continue
        seen = set()
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                continue
            name = dim.dim_param
            if name in ANONYMOUS_DIMS or name in seen:
                dim.dim_param = f"{_safe(value.name)}_dim{axis}"
                renamed[f"{value.name}:{axis}"] = dim.dim_param
            seen.add(name)
    return renamed


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


def initializers_out_of_inputs(model) -> int:
    """Return how many graph inputs it removed, in place: those an initializer of the same name backs.

    IR 4 exporters (PyTorch 1.2: CenterFace) list every weight as an input too, which makes it an
    input a caller may override: ONNX Runtime then folds nothing that reads it, and the FP16 pass
    stores it as FP16 while its input declaration stays FLOAT, a typed model ONNX Runtime refuses.
    Deployed, they are weights (TensorRT's parser takes them as such).
    """
    graph = model.graph
    initializers = {init.name for init in graph.initializer}
    kept = [value for value in graph.input if value.name not in initializers]
    removed = len(graph.input) - len(kept)
    if removed:
        del graph.input[:]
        graph.input.extend(kept)
    return removed


def constants_to_initializers(model) -> int:
    """Move every top-level Constant node holding a tensor into the initializers, in place; return how many."""
    from onnx import numpy_helper

    graph = model.graph
    moved = []
    kept = []
    for node in graph.node:
        attr = node.attribute[0] if node.op_type == "Constant" and len(node.attribute) == 1 else None
        if attr is not None and attr.name == "value" and not node.domain:
            tensor = numpy_helper.from_array(numpy_helper.to_array(attr.t), node.output[0])
            moved.append(tensor)
        else:
            kept.append(node)
    if moved:
        del graph.node[:]
        graph.node.extend(kept)
        graph.initializer.extend(moved)
    return len(moved)


def casts_of_initializers_folded(model) -> int:
    """Replace each Cast of an initializer by the cast initializer, in place; return how many.

    ONNX Runtime's CPU provider has no FP16 Conv, so on an FP16-weight graph (tf2onnx's mixed-precision
    Keras models) its optimizer puts a Cast to float32 after every FP16 weight, after it folded constants:
    left there, the weight reaches its layer through a Cast and Q/DQ insertion does not see a weight."""
    from onnx import helper, numpy_helper

    graph = model.graph
    values = {init.name: init for init in graph.initializer}
    kept, folded = [], []
    for node in graph.node:
        source = values.get(node.input[0]) if node.op_type == "Cast" and len(node.input) == 1 else None
        if source is None:
            kept.append(node)
            continue
        to = next(a.i for a in node.attribute if a.name == "to")
        array = numpy_helper.to_array(source).astype(helper.tensor_dtype_to_np_dtype(to))
        folded.append(numpy_helper.from_array(array, node.output[0]))
    if folded:
        used = toolkit.names_needed(graph, kept)
        initializers = [init for init in graph.initializer if init.name in used] + folded
        del graph.node[:]
        graph.node.extend(kept)
        del graph.initializer[:]
        graph.initializer.extend(initializers)
    return len(folded)


def ort_basic(model):
    """Return `model` as ONNX Runtime's ORT_ENABLE_BASIC offline optimizer writes it."""
    import onnx

    with tempfile.TemporaryDirectory(prefix="trtpipe-cleanup-") as tmp:
        optimized_path = Path(tmp) / "optimized.onnx"
        sessions.session(model, optimization="basic", optimized_path=optimized_path,
                         disabled_optimizers=KEPT_AS_EXPORTED)
        optimized = onnx.load(str(optimized_path))
    # ONNX Runtime lists every domain it knows; keep the ones the graph uses, the opset stays the model's.
    used = {node.domain for node in optimized.graph.node} | {""}
    imports = [entry for entry in optimized.opset_import if entry.domain in used or entry.domain == "ai.onnx"]
    del optimized.opset_import[:]
    optimized.opset_import.extend(imports)
    optimized.ir_version = model.ir_version
    return optimized


def random_feeds(model, seed: int = 0, dynamic: int = CHECK_DIM, shapes=None, fixed=None) -> dict[str, np.ndarray]:
    """Return random inputs for `model`, by the rule of trtpipe.graph.inputs.

    A dynamic batch dim (axis 0) is 1 and any other dynamic dim is `dynamic`; dims that share a
    name get one size. `shapes` ({input: (min, opt, max)}) gives an input its min shape instead;
    `fixed` ({input: array}) gives an input its value.
    """
    from onnx import helper

    initializers = {init.name for init in model.graph.initializer}
    sizes: dict[str, int] = {}
    feeds = {}
    drawn = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        if fixed and value.name in fixed:
            feeds[value.name] = np.asarray(fixed[value.name])
            continue
        tensor = value.type.tensor_type
        shape = []
        for axis, dim in enumerate(tensor.shape.dim):
            if dim.HasField("dim_value"):
                shape.append(dim.dim_value)
            else:
                shape.append(sizes.setdefault(dim.dim_param or f"{value.name}:{axis}", 1 if axis == 0 else dynamic))
        if shapes and value.name in shapes:
            shape = list(shapes[value.name][0])  # the smallest: the check stays cheap
        drawn.append((value.name, helper.tensor_dtype_to_np_dtype(tensor.elem_type), shape))
    feeds.update(random_inputs(drawn, seed, index_limits(model.graph)))
    return feeds


def max_relative_error(original, cleaned, samples: int = 2, shapes=None, fixed=None) -> tuple[float | None, str]:
    """Return the largest difference of the float outputs of the two models on random inputs.

    The difference is relative to each output's largest value (at least SCALE_FLOOR).

    Returns (None, why) when the original does not run on random inputs (a model that needs
    particular shapes or values): then nothing was checked, and the note says so.
    """
    # A model that fails on random inputs is caught below and said in the note (sessions log fatal errors only:
    # ONNX Runtime's own error line, silero-vad's reflect Pad on a 64-sample input, read as a crash in tune).
    # "none": compare the graphs as written.
    worst = 0.0
    try:
        first = sessions.session(original, optimization="none")
        second = sessions.session(cleaned, optimization="none")
        for seed in range(samples):
            feeds = random_feeds(original, seed, shapes=shapes, fixed=fixed)
            expected = first.run(None, feeds)
            names = [o.name for o in first.get_outputs()]
            got = dict(zip(names, second.run(names, feeds)))
            for name, a in zip(names, expected):
                if not np.issubdtype(np.asarray(a).dtype, np.floating):
                    continue
                a, b = np.asarray(a, np.float64), np.asarray(got[name], np.float64)
                scale = max(float(np.abs(a).max(initial=0.0)), SCALE_FLOOR)
                worst = max(worst, float(np.abs(a - b).max(initial=0.0)) / scale)
    except Exception as exc:  # noqa: BLE001 - a model may need real inputs; then the check cannot run
        return None, f"not checked: the model does not run on random inputs ({sessions.ort_reason(exc, 120)})"
    return worst, f"checked on {samples} random inputs"


_last: tuple[str, object, CleanupReport] | None = None  # sensitivity asks for the same model once per layer


def cleanup(model, check: bool = True, shapes=None, fixed=None):
    """Return (the cleaned copy of `model`, a CleanupReport).

    Raises TrtpipeError when the cleaned graph's outputs differ from the original's by more than
    TOLERANCE on random inputs. `check=False` skips that comparison (tests of the rewrite itself).
    `shapes` ({input: (min, opt, max)}, the build's profile) and `fixed` ({input: array}, inputs a
    spec gives one value) decide If nodes, which are then folded into their branch (graph.control).
    """
    from trtpipe.graph.control import fold_ifs

    global _last
    digest = hashlib.sha256(model.SerializeToString() + repr((shapes, fixed)).encode()).hexdigest()
    if _last is not None and _last[0] == digest:
        return toolkit.copy(_last[1]), _last[2]
    original = model
    model = toolkit.copy(model)
    report = CleanupReport(nodes_before=len(model.graph.node))
    batchnorms = sum(node.op_type == "BatchNormalization" for node in model.graph.node)
    report.initializer_inputs = initializers_out_of_inputs(model)
    # IR 3 lists every initializer as a graph input; with them taken out, and the constants folded into
    # new initializers, the graph is IR 4, the first that allows weights no caller may override.
    model.ir_version = max(model.ir_version, FIRST_IR_WITHOUT_INITIALIZER_INPUTS)
    report.ranked = rank_inputs(model, shapes)
    report.renamed_dims = name_dims(model)
    model, report.folded_ifs = fold_ifs(model, shapes, fixed)
    report.constants_to_initializers = constants_to_initializers(model)
    cleaned = ort_basic(model)
    casts_of_initializers_folded(cleaned)
    del cleaned.graph.value_info[:]  # stale after folding; every consumer re-infers shapes and types
    report.ranked += shape_outputs(cleaned)
    report.nodes_after = len(cleaned.graph.node)
    report.batchnorms_folded = batchnorms - sum(node.op_type == "BatchNormalization" for node in cleaned.graph.node)
    if check:
        report.max_relative_error, report.check_note = max_relative_error(original, cleaned, shapes=shapes, fixed=fixed)
        if report.max_relative_error is not None and report.max_relative_error > TOLERANCE:
            raise TrtpipeError(
                f"folding constants and BatchNormalization changed the model's outputs by {report.max_relative_error:.2g} "
                f"(relative, on random inputs; tolerance {TOLERANCE:g}); please report this with the model"
            )
    _last = (digest, cleaned, report)
    return toolkit.copy(cleaned), report

