"""`trtpipe triton`: a Triton model repository from engines (or ONNX models), one model per family.

    REPO/digits_int8/config.pbtxt
    REPO/digits_int8/1/model.sm89.plan  (+ .json sidecar)   one plan per compute capability
    REPO/digits_int8/1/model.sm120.plan

TensorRT engines go to Triton's TensorRT backend, which picks the plan for each GPU through
`cc_model_filenames` and falls back to `default_model_filename`. TensorRT-RTX engines (which that
backend cannot load: it links libnvinfer) and ONNX models go to the Python backend with trtpipe's
runner inside (python_model.py). Dims are written without the batch dimension when the model
batches; max_batch_size is at most the smallest profile maximum of dimension 0, as Triton requires.
A tensor with no dims left (`[N]` in a batching model, or a scalar) is `dims: [1]` with an empty
reshape: clients send `[N, 1]` (or `[1]`) and the model gets `[N]` (or `[]`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from trtpipe.errors import TrtpipeError
from trtpipe.files import Outputs, ensure_dir, sidecar_path, staged_outputs
from trtpipe.runtime.sidecar import read_sidecar, sealed
from trtpipe.serve.models import ENGINE_SUFFIX, ServedModel, check_model_name, describe_engine, model_name

TRITON_TYPES = {"float32": "TYPE_FP32", "float16": "TYPE_FP16", "bfloat16": "TYPE_BF16", "float64": "TYPE_FP64",
                "int64": "TYPE_INT64", "int32": "TYPE_INT32", "int16": "TYPE_INT16", "int8": "TYPE_INT8",
                "uint8": "TYPE_UINT8", "bool": "TYPE_BOOL"}
PYTHON_BACKENDS = ("tensorrt-rtx", "onnx")  # what Triton's TensorRT backend cannot load


@dataclass(frozen=True)
class RepositoryOptions:
    max_batch: int | None = None  # None: the profile's maximum (64 for ONNX)
    dynamic_batching: bool = True
    max_queue_delay_us: int = 100
    instances: int = 1
    kind: str = "gpu"  # instance group kind: gpu or cpu
    threads: int = 1  # ONNX Runtime threads per instance
    served_file: bool = False  # name the served file's absolute path (trtpipe.file): a server on this machine


def pbtxt_string(text: str) -> str:
    """Return `text` as a quoted protobuf text-format string (quotes, backslashes and control bytes escaped)."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\':
            out.append("\\" + char)
        elif byte < 0x20 or byte == 0x7F:
            out.append(f"\\{byte:03o}")
        else:
            out.append(char if byte < 0x80 else f"\\{byte:03o}")  # UTF-8 bytes as octal: ASCII config, any name
    return '"' + "".join(out) + '"'


def plan_name(capability: str) -> str:
    """Return the plan file name for a compute capability: 8.9 -> model.sm89.plan."""
    return f"model.sm{capability.replace('.', '')}.plan"


def check_types(model: ServedModel) -> None:
    """Raise naming the file and tensor when one of the model's dtypes has no Triton type."""
    for spec in model.inputs + model.outputs:
        if spec.dtype not in TRITON_TYPES:
            raise TrtpipeError(f"{model.path}: tensor '{spec.name}' is {spec.dtype}, which this repository cannot serve "
                               f"(it takes {', '.join(TRITON_TYPES)}); export the model with one of those")


def _tensors(kind: str, model: ServedModel, specs) -> str:
    rows = []
    for spec in specs:
        dims = ", ".join(str(d) for d in model.dims(spec))
        # Triton takes no empty dims: a tensor that is only its batch axis ([N], batching) or a scalar is
        # [1] to clients, and the reshape hands the model its own shape ([N] or []).
        shape = f"dims: [ {dims} ]" if dims else "dims: [ 1 ] reshape: { shape: [ ] }"
        rows.append(f"  {{ name: {pbtxt_string(spec.name)} data_type: {TRITON_TYPES[spec.dtype]} {shape} }}")
    return f"{kind} [\n" + ",\n".join(rows) + "\n]\n"


def config_text(model: ServedModel, backend: str, options: RepositoryOptions, files: dict[str, str]) -> str:
    """Return config.pbtxt for `model`; `files` maps compute capability (or "onnx") to the file in 1/."""
    check_types(model)
    lines = [f"name: {pbtxt_string(model.name)}"]
    if backend == "tensorrt":
        lines.append('platform: "tensorrt_plan"')
        lines.append(f"default_model_filename: {pbtxt_string(next(iter(files.values())))}")
        lines += [f"cc_model_filenames {{ key: {pbtxt_string(cc)} value: {pbtxt_string(name)} }}"
                  for cc, name in files.items()]
    else:
        lines.append('backend: "python"')
    lines.append(f"max_batch_size: {model.max_batch}")
    text = "\n".join(lines) + "\n" + _tensors("input", model, model.inputs) + _tensors("output", model, model.outputs)
    kind = "KIND_GPU" if options.kind == "gpu" else "KIND_CPU"
    text += f"instance_group [ {{ count: {options.instances} kind: {kind} }} ]\n"
    if options.dynamic_batching and model.max_batch:
        text += f"dynamic_batching {{ max_queue_delay_microseconds: {options.max_queue_delay_us} }}\n"
    parameters = dict(model.parameters())
    if not options.served_file:
        parameters.pop("trtpipe.file")  # a path on the machine that wrote the repository, not where it is served
    if backend != "tensorrt":
        parameters["trtpipe.files"] = json.dumps(files, sort_keys=True)
        parameters["trtpipe.limits"] = model.limits().to_json()
        parameters["trtpipe.threads"] = str(options.threads)
    for key, value in parameters.items():
        text += f"parameters {{ key: {pbtxt_string(key)} value: {{ string_value: {pbtxt_string(value)} }} }}\n"
    return text


def describe_family(paths: Sequence[Path], max_batch: int | None, name: str) -> tuple[ServedModel, str]:
    """Return one model for engines of one family (one per compute capability) and its Triton backend."""
    if paths[0].suffix != ENGINE_SUFFIX:
        if len(paths) > 1:
            raise TrtpipeError(f"{paths[1]}: ONNX models are not grouped by compute capability; pass --name per model")
        from trtpipe.serve.models import describe_runner, open_runner

        with open_runner(paths[0], threads=1) as runner:
            return describe_runner(paths[0], runner, max_batch, name), "onnx"
    models = [describe_engine(p, max_batch, name) for p in paths]
    infos = [read_sidecar(p) for p in paths]
    first, engines = models[0], {}
    for path, model, info in zip(paths, models, infos):
        if (model.inputs, model.outputs) != (first.inputs, first.outputs) or info.backend != infos[0].backend:
            raise TrtpipeError(f"{path}: its inputs, outputs or backend differ from {paths[0]}'s; "
                               "one model's engines must differ only by target (pass --name to keep them apart)")
        if info.compute_capability in engines:
            raise TrtpipeError(f"{path}: {engines[info.compute_capability]} is also built for compute capability "
                               f"{info.compute_capability}; pass one engine per GPU")
        engines[info.compute_capability] = path
    batch = min(m.max_batch for m in models)
    maxima = {n: tuple(min(m.maxima[n][a] for m in models) for a in range(len(v))) for n, v in first.maxima.items()}
    model = ServedModel(first.name, first.path, "engine", first.precision, False, batch, first.inputs, first.outputs,
                        first.runner, engines, maxima)
    return model, infos[0].backend


def write_repository(paths: Sequence[str | os.PathLike], output: str | os.PathLike, options: RepositoryOptions,
                     name: str | None = None) -> list[Path]:
    """Write one model directory per family of `paths` under `output`; return the config files written.

    Every model is described and its config made before the first file is written, so a model this
    repository cannot serve leaves nothing behind."""
    families: dict[str, list[Path]] = {}
    if name is not None:
        check_model_name(name)
    for path in map(Path, paths):
        if not path.is_file():
            raise TrtpipeError(f"{path}: no such file; pass engines (.engine) or ONNX models (.onnx)")
        if path.suffix not in (ENGINE_SUFFIX, ".onnx"):
            raise TrtpipeError(f"{path}: not an engine (.engine) or an ONNX model (.onnx)")
        families.setdefault(name or model_name(path), []).append(path)
    planned = [describe_family(members, options.max_batch, family) for family, members in families.items()]
    configs = [(model, "python" if backend in PYTHON_BACKENDS else "tensorrt", version_files(model))
               for model, backend in planned]
    texts = [config_text(model, backend, options, files) for model, backend, files in configs]
    root = ensure_dir(output)
    with staged_outputs() as outputs:  # every model's files, or none: an interrupt leaves no model without its config
        return [write_model(root, model, files, text, backend == "python", outputs)
                for (model, backend, files), text in zip(configs, texts)]


def version_files(model: ServedModel) -> dict[str, str]:
    """Return the files of a model's version directory: compute capability (or "onnx") -> file name."""
    return {"onnx": "model.onnx"} if model.kind == "onnx" else {cc: plan_name(cc) for cc in sorted(model.engines)}


def write_model(root: Path, model: ServedModel, files: dict[str, str], config: str, python: bool,
                into: Outputs | None = None) -> Path:
    """Write `root/<model>/`: its files in 1/ (and model.py when `python`, the Python backend), config.pbtxt
    renamed last; `into`: stage them in a caller's Outputs, committed with its other files."""
    directory = root / model.name
    version = ensure_dir(directory / "1")
    with staged_outputs(into) as outputs:
        if model.kind == "onnx":
            shutil.copyfile(model.path, outputs.stage(version / files["onnx"]))
        else:
            for cc, engine in model.engines.items():
                shutil.copyfile(engine, outputs.stage(version / files[cc]))
                info = read_sidecar(engine)
                info.engine = files[cc]  # the sidecar names the file it describes, sealed anew for that name
                outputs.write(sidecar_path(version / files[cc]), json.dumps(sealed(info), indent=2) + "\n")
        if python:
            outputs.write(version / "model.py", (Path(__file__).parent / "python_model.py").read_text())
        outputs.write(directory / "config.pbtxt", config, last=True)
    return directory / "config.pbtxt"
