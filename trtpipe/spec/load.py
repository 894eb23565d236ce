"""A spec loaded: model.toml read, checked against the schema and turned into a ModelSpec.

load_spec is where a model.toml is parsed; resolve_inputs checks it against the model;
spec_from_onnx stands in for a spec when a command runs without --spec.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from trtpipe.errors import TrtpipeError
from trtpipe.files import read_text_input, regular_file
from trtpipe.spec.model import InputSpec, ModelSpec, OutputSpec, Preprocess, ShapeRange
from trtpipe.spec.schema import is_float, validate_raw
from trtpipe.spec.shapes import parse_shapes
from trtpipe.spec.toml_text import loads, tomllib
from trtpipe.spec.validators import Invalid, did_you_mean


def load_spec(path: str | os.PathLike) -> ModelSpec:
    """Return the spec in the TOML file at `path`; relative paths in it are relative to the file."""
    path = Path(path)
    text = read_text_input(path, f"--spec {path}", "pass the model's model.toml ('trtpipe init' writes one)")
    try:
        raw = loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TrtpipeError(f"--spec {path}: not valid TOML ({exc}); fix the file") from None
    try:
        raw = validate_raw(raw)
    except Invalid as exc:
        raise TrtpipeError(f"--spec {path}: {exc}") from None
    shapes = parse_shapes([f"{k}:{v}" for k, v in raw.get("shapes", {}).items()], f"--spec {path}: [shapes]")
    root = path.parent
    inputs = [InputSpec(i["name"], list(i["shape"]), i.get("dtype", "float32"),
                        batch_axis=i.get("batch_axis", 0) if i.get("batched", True) else None, value=i.get("value"),
                        carry=i.get("carry"))
              for i in raw.get("inputs", [])]
    for spec in inputs:
        if spec.carry == "":
            raise TrtpipeError(f"--spec {path}: [[inputs]] {spec.name}: carry is empty; name the output this input is "
                               "fed from on the next step, or remove carry")
        if spec.carry is not None and (spec.batch_axis is None or spec.value is not None):
            raise TrtpipeError(f"--spec {path}: [[inputs]] {spec.name}: carry is for an input each step feeds the next "
                               "(a state), not one the batch shares or one of a fixed value; remove carry, or batched "
                               "and value")
        if spec.batch_axis is not None and not 0 <= spec.batch_axis < max(len(spec.shape), 1):
            raise TrtpipeError(f"--spec {path}: [[inputs]] {spec.name}: batch_axis {spec.batch_axis} is not an axis "
                               f"of shape {spec.shape}")
    names = [i.name for i in inputs]
    if len(set(names)) != len(names):
        raise TrtpipeError(f"--spec {path}: [[inputs]] names an input twice; list each once")
    pre = raw.get("preprocess")
    preprocess = None
    if pre is not None:
        defaults = Preprocess()
        preprocess = Preprocess(
            size=tuple(pre.get("size", defaults.size)), resize=pre.get("resize"), color=pre.get("color", defaults.color),
            scale=pre.get("scale", defaults.scale), mean=pre.get("mean", defaults.mean), std=pre.get("std", defaults.std),
            layout=pre.get("layout", defaults.layout), dtype=pre.get("dtype", defaults.dtype),
            resample=pre.get("resample", defaults.resample),
        )
    data = raw.get("data", {})
    quantize = raw.get("quantize", {})

    def rel(key):
        return resolved(root, data[key]) if key in data else None

    spec = ModelSpec(
        name=raw.get("name", root.name), root=root, task=raw.get("task"), inputs=inputs,
        preprocess=preprocess, shapes=shapes, calibration=rel("calibration"),
        validation=rel("validation"), labels=rel("labels"), thresholds=raw.get("thresholds", {}),
        smooth=quantize.get("smooth"), exclude=quantize.get("exclude", []), block_size=quantize.get("block_size"),
        min_weights=quantize.get("min_weights", 0),
        outputs=[OutputSpec(**{"task": raw.get("task", "generic"), **o,
                               **({"transitions": resolved(root, o["transitions"])} if "transitions" in o else {}),
                               **({"transform": resolved_transform(root, o["transform"], f"--spec {path}: [[outputs]] "
                                                                   f"{o['name']}")} if "transform" in o else {})})
                 for o in raw.get("outputs", [])],
        path=path,
    )
    check_thresholds(spec)
    check_padding(spec, f"--spec {path}")
    check_decoders(spec, f"--spec {path}")
    check_transforms(spec, f"--spec {path}")
    return spec


class Transitions(NamedTuple):
    """A tagger's decoder: scores [from, to] of each transition (-inf: not allowed), and of each class
    starting and ending a sequence ([classes]; zeros when the file gives none)."""

    scores: np.ndarray
    start: np.ndarray
    end: np.ndarray


def read_transitions(path: Path, where: str) -> Transitions:
    """Return the transitions in a .npy ([classes, classes]) or .npz (`transitions`, optional `start`,
    `end`), or raise naming `where` and what is wrong."""
    fix = "give a .npy [classes, classes] of transition scores, or a .npz of transitions, start, end"
    regular_file(path, f"{where} {path}", fix)
    try:
        with open(path, "rb") as file:
            loaded = np.load(file, allow_pickle=False)
            arrays = dict(loaded) if isinstance(loaded, np.lib.npyio.NpzFile) else {"transitions": loaded}
    except OSError as exc:
        raise TrtpipeError(f"{where} {path}: cannot read it ({exc.strerror or exc}); {fix}") from None
    except (ValueError, EOFError) as exc:
        raise TrtpipeError(f"{where} {path}: not a numpy file ({exc}); {fix}") from None
    unknown = sorted(set(arrays) - {"transitions", "start", "end"})
    if "transitions" not in arrays or unknown:
        raise TrtpipeError(f"{where} {path}: holds {', '.join(sorted(arrays)) or 'nothing'}; {fix}")
    scores = arrays["transitions"]
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1] or not scores.size:
        raise TrtpipeError(f"{where} {path}: transitions has shape {list(scores.shape)}; {fix}")
    classes = scores.shape[0]
    found = {}
    for name in ("transitions", "start", "end"):
        values = arrays.get(name, np.zeros(classes))
        if values.dtype.kind not in "fiu":
            raise TrtpipeError(f"{where} {path}: {name} is {values.dtype}; scores are numbers")
        values = values.astype(np.float64)
        if name != "transitions" and values.shape != (classes,):
            raise TrtpipeError(f"{where} {path}: {name} has shape {list(values.shape)}, not [{classes}] (one score "
                               "per class); fix the file")
        # -inf forbids a transition; NaN or +inf would make every path's score meaningless.
        if np.isnan(values).any() or np.isposinf(values).any():
            raise TrtpipeError(f"{where} {path}: {name} holds NaN or +inf; scores are finite, or -inf where not allowed")
        found[name] = values
    return Transitions(found["transitions"], found["start"], found["end"])


def resolved(root: Path, text: str) -> Path:
    """Return the absolute path `text` names, relative to the spec's folder `root`, links followed as far as they
    go: a link to itself is left for the command that reads the file to refuse (Path.resolve raises on it)."""
    return Path(os.path.realpath(root / text))


def resolved_transform(root: Path, text: str, where: str) -> str:
    """Return "FILE.py:FUNCTION" with the file made absolute against the spec's folder; raise unless it is a
    .py file that exists and a function name (the function itself is looked up when validate loads it)."""
    file, _, function = text.rpartition(":")
    if not file.endswith(".py") or not function.isidentifier():
        raise TrtpipeError(f"{where}: transform = \"{text}\" is not FILE.py:FUNCTION; give the Python file and the "
                           "function in it, e.g. \"decode.py:landmarks\"")
    found = resolved(root, file)
    if not os.path.lexists(found):
        raise TrtpipeError(f"{where}: transform's file {found} does not exist; the path is relative to the spec's folder")
    regular_file(found, f"{where}: transform's file {found}", "give the Python file of the function")
    return f"{found}:{function}"


def check_transforms(spec: ModelSpec, where: str) -> None:
    """Raise unless transform is on generic outputs and tolerance (above 0) comes with a transform."""
    for output in spec.outputs:
        named = f"{where}: [[outputs]] {output.name}"
        if output.transform is not None and output.task != "generic":
            raise TrtpipeError(f"{named}: transform is for task = \"generic\" (the other tasks decode their outputs "
                               "themselves); set the task to generic or remove transform")
        if output.tolerance is not None and (output.transform is None or not output.tolerance > 0):
            raise TrtpipeError(f"{named}: tolerance = {output.tolerance:g} needs a transform and a distance above 0; "
                               "name the transform whose answers it measures, or remove tolerance")


def check_decoders(spec: ModelSpec, where: str) -> None:
    """Raise unless each decode = "viterbi" output names transitions, a file that decodes (when it exists yet:
    validate reads it again before it runs anything), and transitions and emissions appear only there."""
    for output in spec.outputs:
        named = f"{where}: [[outputs]] {output.name}"
        if output.decode == "viterbi":
            if output.task != "sequence":
                raise TrtpipeError(f"{named}: decode = \"viterbi\" is for task = \"sequence\"; set the task or remove decode")
            if output.transitions is None:
                raise TrtpipeError(f"{named}: decode = \"viterbi\" needs transitions, the file of the decoder's "
                                   "transition scores; name it")
            if output.transitions.exists():  # one made with the data (the zoo's) is checked when validate reads it
                read_transitions(output.transitions, f"{named}: transitions")
        elif output.transitions is not None or output.emissions is not None:
            key = "transitions" if output.transitions is not None else "emissions"
            raise TrtpipeError(f"{named}: {key} is for decode = \"viterbi\"; set decode = \"viterbi\" or remove {key}")


def check_padding(spec: ModelSpec, where: str) -> None:
    """Raise unless each [[outputs]] padding_input is a tags sequence's and names an integer or bool input
    [batch, steps] of the spec, and each lengths a sequence's, an integer input where it names an input
    (checked again once the model's inputs fill a spec that lists none; an output, when validate runs)."""
    inputs = {i.name: i for i in spec.inputs}
    for output in spec.outputs:
        if output.lengths is not None:
            counts = inputs.get(output.lengths)
            if output.task != "sequence":
                raise TrtpipeError(f"{where}: [[outputs]] {output.name}: lengths is for a sequence (the steps each "
                                   "sample's reading is cut at); remove it or set task = \"sequence\"")
            if counts is not None and not counts.dtype.startswith(("int", "uint")):
                raise TrtpipeError(f"{where}: [[outputs]] {output.name}: lengths '{output.lengths}' is {counts.dtype}; "
                                   "it counts each sample's steps: name an integer input or output [batch]")
        name, fix = output.padding_input, f"[[outputs]] {output.name}: padding_input"
        given = next((key for key in ("padding_value", "judged_value") if getattr(output, key) is not None), None)
        if name is None:
            if given is not None:
                raise TrtpipeError(f"{where}: [[outputs]] {output.name}: {given} without padding_input; "
                                   "name the input whose ids it is")
            continue
        if output.padding_value is not None and output.judged_value is not None:
            raise TrtpipeError(f"{where}: {fix}: padding_value drops the steps of one id and judged_value keeps those "
                               "of one id alone; give one of them")
        if output.judged_value is not None and output.decode == "viterbi":  # a path through the kept steps alone
            raise TrtpipeError(f"{where}: [[outputs]] {output.name}: judged_value reads the tags at one id's steps, and "
                               "viterbi's best path runs through every step; use decode = \"tags\", or padding_value")
        if output.task != "sequence" or output.decode not in ("tags", "viterbi"):
            raise TrtpipeError(f"{where}: {fix} is for a tagger (task = \"sequence\", decode = \"tags\" or \"viterbi\"); "
                               "a CTC recognizer's steps are not its input's; remove it or set decode = \"tags\"")
        if not inputs:
            continue  # the model's own inputs are checked when they are known (resolve_inputs)
        if name not in inputs:
            raise TrtpipeError(f"{where}: {fix} '{name}' is not an input (the inputs are {', '.join(inputs)})"
                               f"{did_you_mean(name, inputs, repr)}")
        item = inputs[name]
        if is_float(item.dtype):
            raise TrtpipeError(f"{where}: {fix} '{name}' is {item.dtype}; padding is marked by token ids "
                               "(an integer input) or a mask (bool): name one of those")
        if item.dtype == "bool" and given is not None:
            raise TrtpipeError(f"{where}: {fix} '{name}' is a bool mask, padded where false; remove {given}")
        if item.batch_axis != 0 or len(item.shape) != 2:
            raise TrtpipeError(f"{where}: {fix} '{name}' has shape {item.shape}; padding is read from an input "
                               "[batch, steps]: name one of that shape")


def check_thresholds(spec: ModelSpec) -> None:
    """Raise unless every metric in [thresholds] is judged by a task the spec names ([[outputs]]' tasks,
    else the top-level task): a minimum no task checks would pass silently, whatever the candidate does."""
    from trtpipe.quality.tasks import judged_by

    if not spec.outputs and spec.task is None:
        return  # inferred from the model when it runs: validation checks the metrics then (require_judged)
    tasks = sorted({o.task for o in spec.outputs} if spec.outputs else {spec.task})
    judged = list(dict.fromkeys(m for task in tasks for m in judged_by(task)))
    for precision, limits in spec.thresholds.items():
        for metric in limits:
            if metric not in judged:
                raise TrtpipeError(f"--spec {spec.path}: [thresholds.{precision}] {metric} is not judged for task "
                                   f"{', '.join(tasks)}, which judges {', '.join(judged)}; use one of those, or name "
                                   f"the output it applies to in [[outputs]] with a task that judges it")


def resolve_inputs(spec: ModelSpec, model, model_path: str | os.PathLike) -> ModelSpec:
    """Return `spec` checked against the model's inputs; a spec that lists none takes the model's.

    An [[inputs]] name the model lacks, or a model input the spec leaves out, is an error: data
    would otherwise be fed to the wrong tensor or not at all.
    """
    from_model = spec_from_onnx(model, model_path, ranked=not spec.inputs)
    found = from_model.inputs
    where = f"--spec {spec.path}" if spec.path else "--spec"
    if not spec.inputs:
        spec.inputs = found
    else:
        model_names = [i.name for i in found]
        for item in spec.inputs:
            if item.name not in model_names:
                raise TrtpipeError(f"{where}: [[inputs]] names '{item.name}' but {model_path} has no such input "
                                   f"(it has {', '.join(model_names) or 'none'}){did_you_mean(item.name, model_names, repr)}")
        missing = [n for n in model_names if n not in {i.name for i in spec.inputs}]
        if missing:
            raise TrtpipeError(f"{where}: {model_path} has an input '{missing[0]}' that [[inputs]] does not list; add it")
    names = [i.name for i in spec.inputs]
    for name in spec.shapes:
        if name not in names:
            raise TrtpipeError(f"{where}: [shapes] names '{name}' but {model_path} has no such input "
                               f"(it has {', '.join(names)}){did_you_mean(name, names, repr)}")
    check_padding(spec, where)
    spec.shared_dims = from_model.shared_dims
    return spec


def shared_dims(model) -> dict[str, list[tuple[str, int]]]:
    """Return {dimension: [(input, axis), ...]} of each dimension the ONNX names on more than one input axis.

    Two inputs read together (a signal and its spectrogram, both 'T' long) must agree on it in every sample;
    only ONNX Runtime's run would otherwise refuse the pair, deep inside a node and naming no file."""
    initializers = {init.name for init in model.graph.initializer}
    places: dict[str, list[tuple[str, int]]] = {}
    for value in model.graph.input:
        if value.name not in initializers:
            for axis, dim in enumerate(value.type.tensor_type.shape.dim):
                if dim.HasField("dim_param") and dim.dim_param:
                    places.setdefault(dim.dim_param, []).append((value.name, axis))
    return {name: where for name, where in places.items() if len({i for i, _ in where}) > 1}


def load_exclusions(path: str | os.PathLike) -> list[str]:
    """Return the [quantize] exclude list of a TOML file (a spec, or the .toml 'trtpipe tune' writes)."""
    path = Path(path)
    text = read_text_input(path, f"--exclude @{path}", "make it with 'trtpipe tune'")
    try:
        raw = loads(text)
        names = raw.get("quantize", {}).get("exclude", [])
    except (tomllib.TOMLDecodeError, AttributeError):
        raise TrtpipeError(f"--exclude @{path}: not a TOML file with [quantize] exclude; rerun 'trtpipe tune'") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrtpipeError(f"--exclude @{path}: [quantize] exclude must be a list of node names")
    return names


def spec_from_onnx(model, path: str | os.PathLike, ranked: bool = True) -> ModelSpec:
    """Return a spec with just the inputs of `model`, for commands run without --spec. `ranked`: refuse an
    input the ONNX gives no shape (any rank), whose shape only a spec can give; False: such an input comes
    back with shape [] (its name is all the caller reads)."""
    from onnx import helper

    inputs = []
    initializers = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        if ranked and value.type.HasField("tensor_type") and not tensor.HasField("shape"):
            raise TrtpipeError(f"{path}: input '{value.name}' has no shape in the ONNX (any rank); pass --spec with its "
                               "shape in [[inputs]] and [shapes] ('trtpipe init --data' reads them from a sample)")
        shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        inputs.append(InputSpec(value.name, shape, dtype))
    return ModelSpec(name=Path(path).stem, root=Path(path).parent, inputs=inputs, shared_dims=shared_dims(model))


def spec_for(spec: ModelSpec | None, model, path: str | os.PathLike) -> ModelSpec:
    """Return `spec` checked against `model`'s inputs (resolve_inputs), or without one a spec of those
    inputs alone (spec_from_onnx): what every command that reads a model works from."""
    return resolve_inputs(spec, model, path) if spec is not None else spec_from_onnx(model, path)


def decided_inputs(spec: ModelSpec | None) -> tuple[dict[str, ShapeRange], dict]:
    """Return what a spec fixes of the inputs: ({input: ShapeRange} from [shapes], {input: array} from values)."""
    import numpy as np

    if spec is None:
        return {}, {}
    shapes = dict(spec.shapes)
    fixed = {i.name: np.full([max(d, 1) for d in i.shape], i.value, i.dtype) for i in spec.inputs if i.value is not None}
    return shapes, fixed

