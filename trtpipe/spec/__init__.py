"""The model spec (`model.toml`): inputs, shapes, preprocessing, data directories, labels, thresholds.

Where each part lives:
- model.py: the dataclasses the pipeline passes around (ModelSpec, InputSpec, OutputSpec, Preprocess);
- schema.py: every table and key a model.toml may hold, its type, default and meaning;
- validators.py: the checks the schema is made of;
- load.py: where a model.toml is parsed (load_spec) and checked against a model (resolve_inputs);
- shapes.py: build shapes, `NAME:MIN/OPT/MAX`, parsed from [shapes] and --shapes;
- toml_text.py: TOML read and written.
"""

from trtpipe.spec.load import (
           check_thresholds,
           decided_inputs,
           load_exclusions,
           load_spec,
           resolve_inputs,
           shared_dims,
           spec_for,
           spec_from_onnx,
)
from trtpipe.spec.model import NO_BLANK, InputSpec, ModelSpec, OutputSpec, Preprocess, Shape, ShapeRange
from trtpipe.spec.schema import DTYPES, TASKS, is_decision, is_float
from trtpipe.spec.shapes import parse_shapes
from trtpipe.spec.toml_text import toml_string, tomllib

__all__ = ["DTYPES", "NO_BLANK", "TASKS", "InputSpec", "ModelSpec", "OutputSpec", "Preprocess", "Shape", "ShapeRange",
           "check_thresholds",
           "decided_inputs", "is_decision", "is_float", "load_exclusions", "load_spec", "parse_shapes", "resolve_inputs", "shared_dims", "spec_for", "spec_from_onnx",
           "toml_string", "tomllib"]
