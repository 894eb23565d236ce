"""Loading and saving ONNX with one-line errors, and the graph facts the typed passes share."""

from __future__ import annotations

import os
from pathlib import Path

from trtpipe.errors import TrtpipeError, require
from trtpipe.files import atomic_path
from trtpipe.graph import toolkit

# ONNX Runtime 1.31 reads IR version 13 at most and TensorRT parsers lag further; IR 10 carries
# every type we write (float8 needs 9) and is read by all of them.
IR_VERSION = 10


def _onnx():
    return require("onnx", "pipeline", "reading ONNX models")


def load(path: str | os.PathLike, flag: str = "MODEL"):
    """Return the ModelProto at `path`, or raise a one-line error naming the file."""
    onnx = _onnx()
    path = Path(path)
    if not path.is_file():
        raise TrtpipeError(f"{path}: no such file; pass the path of an .onnx model")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf raises DecodeError, RuntimeError or ValueError
        raise TrtpipeError(
            f"{path}: not a readable ONNX model ({type(exc).__name__}); re-export it, the file may be truncated"
        ) from None
    external = any(tensor.data_location == onnx.TensorProto.EXTERNAL for tensor in model.graph.initializer)
    problem = _external_data_problem(model, path.parent)
    if problem:
        raise TrtpipeError(f"{path}: {problem}")
    try:
        onnx.load_external_data_for_model(model, str(path.parent))
    except Exception as exc:  # noqa: BLE001 - a short or unreadable data file raises what numpy/onnx raise
        raise TrtpipeError(
            f"{path}: cannot read its external weights ({type(exc).__name__}); the data file beside it may be "
            "truncated: copy it again"
        ) from None
    if not model.graph.node or not model.opset_import:
        raise TrtpipeError(f"{path}: not an ONNX model (no graph nodes or opset); pass an exported .onnx file")
    if not model.graph.output:
        raise TrtpipeError(f"{path}: the graph has no outputs, so there is nothing to compute or judge; re-export it "
                           "with its outputs")
    newest = onnx.defs.onnx_opset_version()
    if opset(model) > newest:
        raise TrtpipeError(f"{path}: opset {opset(model)} is newer than any this onnx {onnx.__version__} knows "
                           f"(at most {newest}); re-export the model at opset {newest} or lower")
    _check_valid(model, path, external)
    return model


def _check_valid(model, path: Path, external: bool) -> None:
    """Raise naming the file when `model` is not valid ONNX (an edge no node makes, a cycle, an operator
    that does not exist, weights shorter than their shape, or, to shape inference, a weight of the wrong
    shape or an input of a type no node takes) and ONNX Runtime cannot load it either:
    otherwise a command that never runs the graph (init, inspect, triton, quantize of a cache)
    accepts it, and the others fail later with ONNX Runtime's message and no file named. ONNX's
    checker is the cheap judge; where it objects, ONNX Runtime has the last word, since it loads
    models (custom domains, old exporters) that the checker refuses. A model with external weights is
    checked at its path, which the checker reads past protobuf's 2 GB. A graph typed in BF16 is spared
    shape inference: TensorRT runs BF16 where ONNX's operator schemas (before opset 22) do not list it,
    and ONNX Runtime has no BF16 kernels to judge it."""
    onnx = _onnx()
    try:
        onnx.checker.check_model(str(path) if external else model, full_check=not _computes_in_bf16(model))
        return
    except Exception as exc:  # noqa: BLE001 - ValidationError, or ValueError for a model over 2 GB
        problem = " ".join(str(exc).split())[:240] or type(exc).__name__
    try:
        from trtpipe.graph.sessions import session

        session(model, optimization="none")
    except TrtpipeError:
        raise TrtpipeError(f"{path}: not a valid ONNX model ({problem}); re-export it") from None


def _computes_in_bf16(model) -> bool:
    """Return True when the top-level graph casts to BF16 or declares a BF16 tensor (a typed BF16 graph)."""
    from onnx import TensorProto

    graph = model.graph
    if any(node.op_type == "Cast" and toolkit.attribute(node, "to", None) == TensorProto.BFLOAT16 for node in graph.node):
        return True
    values = [*graph.input, *graph.output, *graph.value_info]
    return any(v.type.tensor_type.elem_type == TensorProto.BFLOAT16 for v in values) or \
        any(init.data_type == TensorProto.BFLOAT16 for init in graph.initializer)


# Nodes that only a quantized graph has: ONNX Runtime's quantize_static (Q/DQ) and quantize_dynamic
# (DynamicQuantizeLinear, MatMulInteger; an LSTM becomes DynamicQuantizeLSTM, the only such node of an
# LSTM-only model), its QOperator format, weight-only INT4, and the typed ONNX trtpipe and Model Optimizer write.
QUANTIZED_OPS = ("QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                 "DynamicQuantizeLSTM", "QLinearConv", "QLinearMatMul", "QGemm", "QAttention", "DynamicQuantizeMatMul",
                 "MatMulNBits", "TRT_FP4DynamicQuantize")


def refuse_strings(model, where) -> None:
    """Raise naming `where` when a graph input holds strings (skl2onnx's text pipelines): no data file of
    numbers feeds it, and TensorRT has no string tensors to build an engine for."""
    from onnx import TensorProto

    constants = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name not in constants and value.type.tensor_type.elem_type == TensorProto.STRING:
            raise TrtpipeError(f"{where}: input '{value.name}' holds strings, and TensorRT has no string tensors, so "
                               "no engine can take it; give trtpipe the model that reads the text's numbers (token "
                               "ids, features) after its preprocessing")


# The layers whose weights trtpipe quantizes: infinity there is no bound or mask, as it may be elsewhere.
LAYERS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


def refuse_broken_weights(model, where) -> None:
    """Raise naming `where` and the weight when a float weight holds NaN, or a layer's weight infinity: every
    output it reaches is then not a number whatever the data, which calibration and validation would
    otherwise blame on the data. (Infinity elsewhere is an exporter's clamp bound or a mask before a softmax.)"""
    import numpy as np
    from onnx import TensorProto, numpy_helper

    floats = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE)
    layer_inputs = {name for node in model.graph.node if node.op_type in LAYERS for name in node.input}
    named = [(init.name, init) for init in model.graph.initializer]
    named += [(node.output[0], attr.t) for node in model.graph.node if node.op_type == "Constant"
              for attr in node.attribute if attr.name == "value"]
    for name, tensor in named:
        if tensor.data_type not in floats:
            continue
        values = numpy_helper.to_array(tensor)
        bad = np.isnan(values) if name not in layer_inputs else ~np.isfinite(values)
        if bad.any():
            what = "NaN" if np.isnan(values).any() else "infinity"
            raise TrtpipeError(f"{where}: weight '{name}' holds {what} ({int(bad.sum())} of its {values.size} values), so "
                               "every output it reaches is not a number whatever the data; re-export the model from "
                               "a checkpoint whose weights are finite")


def float64_layers(model) -> list:
    """Return the Conv, ConvTranspose, MatMul and Gemm nodes that compute in float64: ONNX's shape inference types
    their output float64, or a weight is float64 (a weight reached through an Identity or a Cast, an attention's
    MatMul of two activations, a float64 island in a float32 model)."""
    from onnx import TensorProto

    types = _inferred_types(model)
    doubles = {init.name for init in model.graph.initializer if init.data_type == TensorProto.DOUBLE}
    return [node for node in model.graph.node if node.op_type in LAYERS
            and (types.get(node.output[0]) == TensorProto.DOUBLE or doubles.intersection(node.input))]


def refuse_float64(model, where) -> None:
    """Raise naming `where` when a layer of `model` computes in float64. TensorRT has no float64: its ONNX parser
    casts such a model to float32 and builds it, so an engine said to be FP16 computed in FP32 (trtpipe's passes
    retype float32 alone), Q/DQ takes no float64, and the engine's float32 inputs are not what the model and its
    data take. A model that reads and writes float64 through casts around float32 layers is not refused."""
    layers = float64_layers(model)
    if layers:
        total = sum(node.op_type in LAYERS for node in model.graph.node)
        raise TrtpipeError(f"{where}: computes in float64 ({len(layers)} of its {total} Conv, MatMul and Gemm layers, "
                           f"first '{toolkit.label(layers[0])}'), which TensorRT does not have: its parser casts the model "
                           "to float32, so no engine of it is the model it says it is; export the model in float32 "
                           "(torch: model.float() before torch.onnx.export, and no .double() in the model's code)")


def load_float(path: str | os.PathLike, flag: str = "MODEL", built: bool = True):
    """Return the ModelProto at `path` (as `load`), refusing one that is already quantized: calibrating or
    typing it again would quantize twice, and the scales it carries are not the ones trtpipe would choose;
    one that takes strings (refuse_strings); one whose weights are not numbers (refuse_broken_weights); and,
    where it is to be calibrated, typed or built (`built`; not a baseline ONNX Runtime only runs), one that
    computes in float64 (refuse_float64)."""
    model = load(path, flag)
    where = path if flag == "MODEL" else f"{flag} {path}"
    refuse_strings(model, where)
    refuse_broken_weights(model, where)
    if built:
        refuse_float64(model, where)
    found: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type in QUANTIZED_OPS:
            found[node.op_type] = found.get(node.op_type, 0) + 1
    if found:
        nodes = ", ".join(f"{count} {op}" for op, count in sorted(found.items(), key=lambda item: -item[1]))
        where = path if flag == "MODEL" else f"{flag} {path}"
        raise TrtpipeError(f"{where}: already quantized ({nodes}); give trtpipe the FP32 (or FP16) model it was "
                           "made from, which it calibrates and quantizes itself")
    return model


def external_files(model) -> list[str]:
    """Return the files, relative to the model's folder, that `model` keeps its external weights in, in the
    order its initializers first name them."""
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    return list(dict.fromkeys(ExternalDataInfo(t).location for t in model.graph.initializer if uses_external_data(t)))


def _external_data_problem(model, directory: Path) -> str | None:
    """Return what is wrong with the first external weights file `model` names, or None: missing, or
    outside `directory` (ONNX reads external weights only from beside the model, so that a model file
    cannot make trtpipe read any file on the machine as weights)."""
    for location in external_files(model):
        if Path(location).is_absolute() or ".." in Path(location).parts:
            return (f"its weights are stored at '{location}', outside the model's folder, where ONNX does not "
                    "read them; move the file next to the model and re-export with that file's name")
        if not (directory / location).is_file():
            return (f"its weights are stored in '{location}' beside it, and that file is missing; copy it next "
                    "to the model (or re-export with the weights inside)")
    return None


def save(model, path: str | os.PathLike, flag: str = "-o") -> Path:
    """Write `model` atomically at IR_VERSION, checked, and return the path."""
    onnx = _onnx()
    model.ir_version = min(model.ir_version or IR_VERSION, IR_VERSION)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0]
        raise TrtpipeError(f"{path}: the rewritten model is not valid ONNX ({first}); please report this") from None
    with atomic_path(path, flag) as tmp:
        onnx.save(model, str(tmp))
    return Path(path)


def opset(model) -> int:
    """Return the default-domain opset version of `model`."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return entry.version
    return 1


def with_opset(model, minimum: int):
    """Return `model` converted to at least opset `minimum` (Q/DQ per axis needs 13, float8 needs 19)."""
    if opset(model) >= minimum:
        return model
    _onnx()
    from onnx import version_converter

    try:
        return version_converter.convert_version(model, minimum)
    except Exception as exc:  # noqa: BLE001 - the converter raises whatever its adapters raise
        raise TrtpipeError(
            f"cannot raise the model's opset from {opset(model)} to {minimum} ({exc}); "
            f"re-export with opset {minimum} or newer"
        ) from None


# Metadata key of the precision a typed ONNX was written for (graph.typed writes it).
PRECISION_KEY = "trtpipe.precision"


def set_metadata(model, key: str, value: str) -> None:
    """Set one metadata_props entry of `model`, replacing an earlier value."""
    for entry in model.metadata_props:
        if entry.key == key:
            entry.value = value
            return
    entry = model.metadata_props.add()
    entry.key, entry.value = key, value


def typed_precision(model) -> str:
    """Return the precision a typed ONNX stands for: as recorded when trtpipe wrote it, else read
    from its types ('fp32' if it is not typed)."""
    from onnx import TensorProto

    recorded = next((e.value for e in model.metadata_props if e.key == PRECISION_KEY), None)
    if recorded:
        return recorded

    types = {init.data_type for init in model.graph.initializer}
    if TensorProto.FLOAT4E2M1 in types or any(node.op_type == "TRT_FP4DynamicQuantize" for node in model.graph.node):
        return "fp4"
    if TensorProto.INT4 in types:
        return "int4"
    if any(node.op_type in ("QuantizeLinear", "DequantizeLinear") for node in model.graph.node):
        return "fp8" if TensorProto.FLOAT8E4M3FN in types else "int8"
    if TensorProto.BFLOAT16 in types:
        return "bf16"
    if TensorProto.FLOAT16 in types:
        return "fp16"
    return "fp32"


def tensor_types(model) -> dict[str, int]:
    """Return the element type of every tensor whose type ONNX shape inference can tell, and of the
    top-level node outputs it cannot where ONNX Runtime can (runtime_types)."""
    types = _inferred_types(model)
    untyped = [out for node in model.graph.node for out in node.output if out and out not in types]
    if untyped:
        types.update(runtime_types(model, untyped))
    return types


def runtime_types(model, names: list[str]) -> dict[str, int]:
    """Return the element types ONNX Runtime gives the tensors `names`, from a session that exposes them
    (built, never run); {} when it cannot load the model.

    ONNX's shape inference knows no op outside the ONNX domains: from the first com.microsoft op on (ONNX
    Runtime's transformer optimizer writes Attention, SkipLayerNormalization, BiasGelu) it types nothing,
    and a pass that retypes float tensors would leave those unconverted beside half ones."""
    from onnx import TensorProto, ValueInfoProto

    from trtpipe.graph import sessions

    type_names = set(TensorProto.DataType.keys())  # ONNX Runtime writes "tensor(float16)" for FLOAT16

    exposed = toolkit.copy(model)
    known = {value.name for value in exposed.graph.output}
    exposed.graph.output.extend(ValueInfoProto(name=name) for name in names if name not in known)
    try:
        outputs = sessions.session(exposed, optimization="none").get_outputs()
    except TrtpipeError:
        return {}
    types = {}
    for output in outputs:
        kind = output.type[len("tensor("):-1].upper() if output.type.startswith("tensor(") else ""
        if output.name in names and kind in type_names:
            types[output.name] = TensorProto.DataType.Value(kind)
    return types


def _inferred_types(model) -> dict[str, int]:
    """Return the element type of every tensor whose type ONNX shape inference can tell."""
    onnx = _onnx()
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is a best effort; the graph's own types remain
        inferred = model
    graph = inferred.graph
    types: dict[str, int] = {}
    for value in list(graph.input) + list(graph.value_info) + list(graph.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    for node in graph.node:
        tensor = toolkit.attribute(node, "value") if node.op_type == "Constant" else None
        if tensor is not None:
            types[node.output[0]] = tensor.data_type
    return types
