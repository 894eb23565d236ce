"""The model spec (`model.toml`): inputs, shapes, preprocessing, data directories, labels, thresholds."""

from __future__ import annotations

import itertools
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trtpipe.errors import TrtpipeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

Shape = tuple[int, ...]

DTYPES = ("float32", "float16", "int64", "int32", "int8", "uint8", "bool")


@dataclass
class InputSpec:
    """One model input: name, shape (-1 for a dynamic dimension) and numpy dtype."""

    name: str
    shape: list[int]
    dtype: str = "float32"


@dataclass
class Preprocess:
    """How an image file becomes an input array."""

    size: tuple[int, int] = (224, 224)  # height, width after resizing or cropping
    resize: int | None = None  # shorter side before a centre crop to `size`; None resizes to `size`
    color: str = "RGB"  # RGB, BGR or L (grayscale)
    scale: float = 1.0 / 255.0
    mean: list[float] = field(default_factory=lambda: [0.0])
    std: list[float] = field(default_factory=lambda: [1.0])
    layout: str = "NCHW"
    dtype: str = "float32"


@dataclass
class ModelSpec:
    """Everything the pipeline needs to know of a model beyond its ONNX file."""

    name: str
    root: Path
    task: str = "generic"  # classification, embedding or generic
    inputs: list[InputSpec] = field(default_factory=list)
    preprocess: Preprocess | None = None
    shapes: dict[str, str] = field(default_factory=dict)  # name -> "MIN/OPT/MAX" as trtexec writes them
    calibration: Path | None = None
    validation: Path | None = None
    labels: Path | None = None
    thresholds: dict[str, dict[str, float]] = field(default_factory=dict)
    smooth: float | None = None  # SmoothQuant alpha for INT8 ('trtpipe smooth'); None: not smoothed
    exclude: list[str] = field(default_factory=list)  # nodes kept out of INT8/FP8 when --exclude is not given

    def input(self, name: str) -> InputSpec:
        for spec in self.inputs:
            if spec.name == name:
                return spec
        raise KeyError(name)


def load_spec(path: str | os.PathLike) -> ModelSpec:
    """Return the spec in the TOML file at `path`; relative paths in it are relative to the file."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:
        raise TrtpipeError(f"--spec {path}: cannot read the spec ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise TrtpipeError(f"--spec {path}: not valid TOML ({exc}); fix the file") from None
    root = path.parent
    try:
        inputs = [InputSpec(name=i["name"], shape=[int(d) for d in i["shape"]], dtype=i.get("dtype", "float32"))
                  for i in raw.get("inputs", [])]
        for spec in inputs:
            if spec.dtype not in DTYPES:
                raise ValueError(f"input {spec.name}: dtype {spec.dtype} is not one of {', '.join(DTYPES)}")
        pre = raw.get("preprocess")
        preprocess = None
        if pre is not None:
            preprocess = Preprocess(
                size=tuple(pre.get("size", (224, 224))), resize=pre.get("resize"), color=pre.get("color", "RGB"),
                scale=float(pre.get("scale", 1.0 / 255.0)), mean=list(pre.get("mean", [0.0])),
                std=list(pre.get("std", [1.0])), layout=pre.get("layout", "NCHW"), dtype=pre.get("dtype", "float32"),
            )
            if preprocess.color not in ("RGB", "BGR", "L") or preprocess.layout not in ("NCHW", "NHWC"):
                raise ValueError("preprocess: color is RGB, BGR or L and layout is NCHW or NHWC")
        data = raw.get("data", {})
        quantize = raw.get("quantize", {})
        smooth = quantize.get("smooth")

        def rel(key):
            return (root / data[key]).resolve() if key in data else None

        return ModelSpec(
            name=raw.get("name", root.name), root=root, task=raw.get("task", "generic"), inputs=inputs,
            preprocess=preprocess, shapes=dict(raw.get("shapes", {})), calibration=rel("calibration"),
            validation=rel("validation"), labels=rel("labels"),
            thresholds={k: dict(v) for k, v in raw.get("thresholds", {}).items()},
            smooth=float(smooth) if smooth is not None else None, exclude=[str(e) for e in quantize.get("exclude", [])],
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TrtpipeError(f"--spec {path}: {exc}; see models/digits/model.toml for the format") from None


def load_exclusions(path: str | os.PathLike) -> list[str]:
    """Return the [quantize] exclude list of a TOML file (a spec, or the .toml 'trtpipe tune' writes)."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
        names = raw.get("quantize", {}).get("exclude", [])
    except OSError as exc:
        raise TrtpipeError(f"--exclude @{path}: cannot read it ({exc.strerror}); make it with 'trtpipe tune'") from None
    except (tomllib.TOMLDecodeError, AttributeError):
        raise TrtpipeError(f"--exclude @{path}: not a TOML file with [quantize] exclude; rerun 'trtpipe tune'") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrtpipeError(f"--exclude @{path}: [quantize] exclude must be a list of node names")
    return names


def spec_from_onnx(model, path: str | os.PathLike) -> ModelSpec:
    """Return a spec with just the inputs of `model`, for commands run without --spec."""
    from onnx import helper

    inputs = []
    initializers = {init.name for init in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
        dtype = str(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        inputs.append(InputSpec(value.name, shape, dtype))
    return ModelSpec(name=Path(path).stem, root=Path(path).parent, inputs=inputs)


def parse_shapes(values: Iterable[str], flag: str = "--shapes") -> dict[str, tuple[Shape, Shape, Shape]]:
    """Return {input: (min, opt, max)} from trtexec-style `name:1x64/32x64/256x64` values."""
    shapes = {}
    for value in values:
        name, sep, dims = value.rpartition(":")
        parts = dims.split("/")
        if not sep or not name or len(parts) != 3 or not all(re.fullmatch(r"\d+(x\d+)*", p) for p in parts):
            raise TrtpipeError(f"{flag} {value}: write NAME:MIN/OPT/MAX with dims joined by x, e.g. x:1x64/32x64/256x64")
        triple = tuple(tuple(int(d) for d in p.split("x")) for p in parts)
        if len({len(s) for s in triple}) != 1 or any(a > b for lo, hi in itertools.pairwise(triple) for a, b in zip(lo, hi)):
            raise TrtpipeError(f"{flag} {value}: MIN, OPT and MAX need the same rank and MIN <= OPT <= MAX")
        shapes[name] = triple
    return shapes
