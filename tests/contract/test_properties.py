"""Property tests (hypothesis, 500 examples each) of the parsers that read what users and other
tools hand us: the calibration cache, the spec, --shapes, the engine sidecar and the data loader.

Each has two properties: what we write (or what a valid input holds) reads back exactly, and any
input whatever either parses into something that keeps the invariants or raises the one error type
the CLI prints as one line. Nothing else may escape: that would be a traceback.
"""

from __future__ import annotations

import json
import math
import os
import string
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trtpipe.calibrators.cache import INT8_MAX, CacheError, CalibrationTable, parse, render
from trtpipe.data import iter_batches
from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks import judged_by
from trtpipe.runtime.sidecar import EngineInfo, TensorInfo, read_sidecar
from trtpipe.spec import DTYPES, InputSpec, ModelSpec, load_spec, parse_shapes

# No example database: runs stay independent and nothing is written into the checkout.
EXAMPLES = settings(max_examples=int(os.environ.get("TRTPIPE_EXAMPLES", "500")), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# ---- the calibration cache --------------------------------------------------------------------

names = st.text(st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), min_size=1, max_size=16) \
    .filter(lambda s: s.strip())
# amax whose float32 scale (amax / 127) is a finite number above 0: what a cache can hold.
amaxes = st.floats(min_value=1e-30, max_value=1e30, allow_nan=False, allow_infinity=False)


def _float32(x: float) -> float:
    return struct.unpack(">f", struct.pack(">f", x))[0]


@EXAMPLES
@given(st.dictionaries(names, amaxes, max_size=6), st.sampled_from(["EntropyCalibration2", "MinMaxCalibration"]),
       st.integers(0, 10**6))
def test_cache_round_trip(amax, algorithm, version):
    table = CalibrationTable(amax, algorithm, version)
    back = parse(render(table))
    assert back.header == table.header
    assert list(back.amax) == list(amax)
    for name, value in amax.items():
        # the file holds the float32 scale: reading gives back amax to float32 precision
        assert back.amax[name] == _float32(value / INT8_MAX) * INT8_MAX
        assert math.isclose(back.amax[name], value, rel_tol=1e-6)


cache_lines = st.one_of(
    st.builds(lambda n, h: f"{n}: {h}", names, st.text("0123456789abcdefABCDEF", min_size=1, max_size=9)),
    st.builds(lambda n, b: f"{n}: {struct.pack('>f', b).hex()}", names, st.floats(width=32)),
    st.text(max_size=30),
)


@EXAMPLES
@given(st.one_of(st.just("TRT-101300-EntropyCalibration2"), st.text(max_size=30)), st.lists(cache_lines, max_size=5))
def test_any_cache_text_parses_to_finite_positive_amax_or_one_error(header, lines):
    text = "\n".join([header, *lines]) + "\n"
    try:
        table = parse(text, "c.cache")
    except CacheError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("c.cache: line ")
        return
    for value in table.amax.values():
        assert math.isfinite(value) and value >= 0  # 0 only from TensorRT's bare "0"
    assert parse(render(table)).amax == table.amax  # what we read, we can write back


# ---- --shapes ---------------------------------------------------------------------------------

shape_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


@st.composite
def profiles(draw):
    rank = draw(st.integers(1, 5))
    lo = draw(st.lists(st.integers(1, 64), min_size=rank, max_size=rank))
    opt = [d + draw(st.integers(0, 64)) for d in lo]
    hi = [d + draw(st.integers(0, 64)) for d in opt]
    return tuple(lo), tuple(opt), tuple(hi)


@EXAMPLES
@given(st.dictionaries(shape_names, profiles(), min_size=1, max_size=4))
def test_shapes_round_trip(expected):
    text = [f"{name}:{'/'.join('x'.join(map(str, s)) for s in triple)}" for name, triple in expected.items()]
    assert parse_shapes(text) == expected


@EXAMPLES
@given(st.lists(st.one_of(st.text(max_size=30), st.text("0123456789x/:ab-", max_size=30)), max_size=3))
def test_any_shapes_text_parses_to_valid_profiles_or_one_error(values):
    try:
        shapes = parse_shapes(values)
    except TrtpipeError as exc:
        assert str(exc).startswith("--shapes ") and "\n" not in str(exc)
        return
    for lo, opt, hi in shapes.values():
        assert len(lo) == len(opt) == len(hi) >= 1
        assert all(1 <= a <= b <= c for a, b, c in zip(lo, opt, hi))


# ---- the spec ---------------------------------------------------------------------------------

def _toml(value) -> str:
    """TOML for the values specs hold (JSON's strings, numbers and arrays are valid TOML)."""
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")  # TOML forbids a raw DEL


identifiers = st.text(string.ascii_letters + "_", min_size=1, max_size=8)  # cheaper to draw than from_regex
finite = st.floats(min_value=0.001, max_value=1e6) | st.floats(min_value=-1e6, max_value=-0.001)  # never 0 (std divides)


input_specs = st.lists(st.tuples(identifiers, st.lists(st.just(-1) | st.integers(1, 512), min_size=1, max_size=4),
                                 st.sampled_from(DTYPES)), max_size=2, unique_by=lambda t: t[0])
tasks = st.sampled_from(["classification", "embedding", "generic"])
excludes = st.lists(st.text(max_size=6), max_size=2)
alphas = st.none() | st.floats(0, 1)
channel_values = st.lists(finite, min_size=1, max_size=2)
sizes = st.lists(st.integers(1, 1024), min_size=2, max_size=2)
colors = st.sampled_from(["RGB", "BGR", "L"])


def threshold_tables(task: str):
    """Thresholds of metrics `task` judges (a spec naming another is refused at load)."""
    return st.dictionaries(st.sampled_from(["fp16", "int8", "fp8"]),
                           st.dictionaries(st.sampled_from(judged_by(task)), finite, min_size=1, max_size=2), max_size=1)


@st.composite
def specs(draw):
    """Return (sections, expected values) for a valid spec: sections maps a table header ('' for the
    top-level keys) to its lines, so a test can replace one table."""
    inputs = draw(input_specs)
    task = draw(tasks)
    sections = {"": [f"name = {_toml(draw(identifiers))}", f"task = {_toml(task)}"]}
    sections["[[inputs]]"] = [line for name, shape, dtype in inputs for line in
                              ("[[inputs]]", f"name = {_toml(name)}", f"shape = {_toml(shape)}", f"dtype = {_toml(dtype)}")]
    exclude = draw(excludes)
    smooth = draw(alphas)
    sections["[quantize]"] = ["[quantize]", f"exclude = {_toml(exclude)}"] + ([f"smooth = {smooth!r}"] if smooth is not None else [])
    mean = draw(channel_values)
    std = draw(channel_values)
    size = draw(sizes)
    sections["[preprocess]"] = ["[preprocess]", f"size = {_toml(size)}", f"mean = {_toml(mean)}", f"std = {_toml(std)}",
                                f"color = {_toml(draw(colors))}"]
    thresholds = draw(threshold_tables(task))
    for precision, values in thresholds.items():
        sections[f"[thresholds.{precision}]"] = [f"[thresholds.{precision}]"] + [f"{k} = {v!r}" for k, v in values.items()]
    expected = {"inputs": inputs, "exclude": exclude, "smooth": smooth, "mean": mean, "std": std, "size": tuple(size),
                "thresholds": thresholds}
    return sections, expected


def _text(sections: dict) -> str:
    return "\n".join(line for lines in sections.values() for line in lines) + "\n"


def _load(text: str):
    """Return load_spec of `text` written to a model.toml, and the path it had."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "model.toml"
        path.write_text(text)
        try:
            return load_spec(path), path
        except TrtpipeError as exc:
            return exc, path


@EXAMPLES
@given(specs())
def test_valid_specs_load_exactly(case):
    sections, expected = case
    spec, _ = _load(_text(sections))
    assert not isinstance(spec, TrtpipeError), spec
    assert [(i.name, i.shape, i.dtype) for i in spec.inputs] == [(n, s, d) for n, s, d in expected["inputs"]]
    assert spec.exclude == expected["exclude"] and spec.smooth == expected["smooth"]
    assert spec.preprocess.mean == expected["mean"] and spec.preprocess.std == expected["std"]
    assert spec.preprocess.size == expected["size"]
    assert spec.thresholds == expected["thresholds"]


# (header the mistake replaces, its lines, what the one-line error must say)
MISTAKES = [
    ("[quantise]", ["[quantise]", "exclude = []"], "did you mean [quantize]?"),
    ("[quantize]", ["[quantize]", 'exlude = ["a"]'], "did you mean 'exclude'?"),
    ("[quantize]", ["[quantize]", 'exclude = "conv"'], "must be a list, not a string"),
    ("[quantize]", ["[quantize]", "smooth = 1.5"], "between 0 and 1"),
    ("[thresholds.int8]", ["[thresholds.int8]", 'cosine = "high"'], "must be a number"),
    ("[thresholds.int9]", ["[thresholds.int9]", "cosine = 0.9"], "'int9' is not one of"),
    ("[preprocess]", ["[preprocess]", "mean = 0.5"], "must be a list"),
    ("[preprocess]", ["[preprocess]", 'colour = "RGB"'], "did you mean 'color'?"),
    ("[preprocess]", ["[preprocess]", "std = [0.5, 0]"], "must not be 0"),
    ("[[inputs]]", ["[[inputs]]", 'name = "x"', 'shape = [1, "a"]'], "must be an integer"),
    ("[[inputs]]", ["[[inputs]]", 'name = "x"', "shape = [1]", 'dtype = "complex64"'], "not one of"),
    ("[[inputs]]", ["[[inputs]]", "shape = [1]"], "needs a key 'name'"),
    ("[shapes]", ["[shapes]", 'x = "1x2"'], "[shapes] x:1x2: write NAME:MIN/OPT/MAX"),
    ("[dat]", ["[dat]", 'calibration = "c"'], "did you mean [data]?"),
    ("", ['nmae = "m"'], "did you mean 'name'?"),
    ("", ["task = 3"], "task must be a string"),
]


@EXAMPLES
@given(specs(), st.sampled_from(MISTAKES))
def test_one_mistake_in_a_valid_spec_is_one_line_naming_it(case, mistake):
    sections, _ = case
    header, lines, needle = mistake
    sections = dict(sections)
    if header == "":  # a top-level key replaces the spec's own (TOML forbids a key twice)
        keys = {line.split(" =")[0] for line in lines}
        sections[""] = [line for line in sections[""] if line.split(" =")[0] not in keys] + lines
    else:
        sections[header] = lines
    error, path = _load(_text(sections))
    assert isinstance(error, TrtpipeError), f"accepted: {lines}"
    message = str(error)
    assert message.startswith(f"--spec {path}: ") and needle in message and "\n" not in message


@EXAMPLES
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))))
def test_any_text_is_a_spec_or_one_error(text):
    result, path = _load(text)
    if isinstance(result, TrtpipeError):
        assert str(result).startswith(f"--spec {path}")


# ---- the engine sidecar -----------------------------------------------------------------------

sha = st.binary(min_size=32, max_size=32).map(bytes.hex)
dims = st.lists(st.one_of(st.just(-1), st.integers(1, 4096)), max_size=4)


# Strategies are built once, here: building them inside a composite costs more than drawing from them.
tensor_infos = st.builds(TensorInfo, names, st.sampled_from(["input", "output"]), st.sampled_from(DTYPES), dims,
                         st.none() | st.lists(st.lists(st.integers(1, 64), max_size=3), min_size=3, max_size=3))
sidecars = st.builds(
    EngineInfo, engine=identifiers, backend=st.sampled_from(["tensorrt", "tensorrt-rtx"]), backend_version=st.just("1.7.1"),
    target=st.just("sm89"), compute_capability=st.builds("{}.{}".format, st.integers(5, 12), st.integers(0, 9)),
    precision=st.sampled_from(["fp16", "int8", "fp8"]), onnx=identifiers, onnx_sha256=sha, engine_sha256=sha,
    cache_sha256=st.none() | sha, build_seconds=st.floats(0, 1e4),
    options=st.dictionaries(identifiers, st.integers() | st.text(max_size=5), max_size=2),
    tensors=st.lists(tensor_infos, max_size=3))


def _read_sidecar(raw) -> tuple[object, Path]:
    """Return read_sidecar of `raw` written as an engine's sidecar (or the error), and the engine path."""
    with tempfile.TemporaryDirectory() as directory:
        engine = Path(directory) / "m.engine"
        Path(f"{engine}.json").write_text(json.dumps(raw))
        try:
            return read_sidecar(engine), engine
        except TrtpipeError as exc:
            return exc, engine


@EXAMPLES
@given(sidecars)
def test_sidecar_round_trip(info):
    assert _read_sidecar(info.to_json())[0] == info


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                           max_leaves=4)


@EXAMPLES
@given(sidecars, st.sampled_from(["engine", "precision", "engine_sha256", "tensors", "compute_capability",
                                    "build_seconds", "cache_sha256", "options", "extra"]), json_values)
def test_an_edited_sidecar_field_reads_or_is_one_error(info, key, value):
    raw = info.to_json()
    raw[key] = value
    read, engine = _read_sidecar(raw)
    if isinstance(read, TrtpipeError):
        assert str(read).startswith(f"{engine}.json: ") and "\n" not in str(read)
        return
    # what was accepted has the types the runtime relies on
    assert isinstance(read.engine, str) and isinstance(read.engine_sha256, str) and len(read.engine_sha256) == 64
    assert all(isinstance(t, TensorInfo) and all(isinstance(d, int) for d in t.shape) for t in read.tensors)
    read.capability  # noqa: B018 - parses MAJOR.MINOR


# ---- the data loader --------------------------------------------------------------------------



@st.composite
def data_files(draw):
    """Return (dtype, features, files): arrays of random sample counts, a bare sample when the count is 0."""
    features = draw(st.integers(1, 5))
    dtype = draw(st.sampled_from(["float32", "int64", "uint8"]))
    files, start = [], 0
    for _ in range(draw(st.integers(1, 5))):
        count = draw(st.integers(0, 6))
        array = np.arange(start * features, (start + max(count, 1)) * features).reshape(-1, features).astype(dtype)
        start += max(count, 1)
        files.append(array[0] if count == 0 else array)
    return dtype, features, files


@EXAMPLES
@given(data_files(), st.integers(1, 8), st.none() | st.integers(1, 30))
def test_batches_hold_every_sample_in_order(case, batch_size, limit):
    dtype, features, files = case
    samples = [row for array in files for row in array.reshape(-1, features)]
    with tempfile.TemporaryDirectory() as directory:
        for i, array in enumerate(files):
            np.save(Path(directory) / f"{i:03d}.npy", array)
        spec = ModelSpec("m", Path(directory), inputs=[InputSpec("x", [-1, features], dtype)])
        batches = list(iter_batches(spec, directory, batch_size, limit))
    expected = samples[:limit] if limit is not None else samples
    assert all(1 <= len(b) <= batch_size for b in batches)
    assert all(len(b) == batch_size for b in batches[:-1])
    got = [row for b in batches for row in b.arrays["x"]]
    assert len(got) == len(expected) and all(np.array_equal(a, b) for a, b in zip(got, expected))
    assert all(b.arrays["x"].dtype == np.dtype(dtype) for b in batches)


@EXAMPLES
@given(st.binary(max_size=300), st.sampled_from([".npy", ".npz", ".png", ".jpg"]))
def test_any_file_bytes_load_or_are_one_error(content, suffix):
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / f"000{suffix}").write_bytes(content)
        spec = ModelSpec("m", Path(directory), inputs=[InputSpec("x", [-1, 4], "float32")])
        try:
            list(iter_batches(spec, directory, 4))
        except TrtpipeError as exc:
            assert str(exc).startswith(directory) and "\n" not in str(exc)


# ---- every numeric option of every command ------------------------------------------------------

# What each numeric option means, written out here (not read from the options): (kind, low, high,
# low_open, high_open). A value outside, nan, inf or not a number at all is one line naming the flag.
COUNT, NONNEGATIVE = ("int", 1, None, False, False), ("int", 0, None, False, False)
PORT = ("int", 1, 65535, False, False)
OPTION_RANGES = {
    ("bench", "--batch"): COUNT, ("bench", "--warmup-ms"): ("float", 0, None, False, False),
    ("bench", "--duration-s"): ("float", 0, None, False, False), ("bench", "--iterations"): COUNT,
    ("tune", "--budget-min"): ("float", 0, None, True, False), ("tune", "--tuning-samples"): COUNT,
    ("tune", "--confidence"): ("float", 0, 1, False, True), ("tune", "--slack"): ("float", 0, 1, False, False),
    ("tune", "--batch-size"): COUNT,
    ("serve", "--http-port"): PORT, ("serve", "--grpc-port"): PORT, ("serve", "--metrics-port"): PORT,
    ("serve", "--max-batch"): COUNT, ("serve", "--max-queue-delay-us"): NONNEGATIVE, ("serve", "--instances"): COUNT,
    ("serve", "--threads"): COUNT,
    ("triton", "--max-batch"): COUNT, ("triton", "--max-queue-delay-us"): NONNEGATIVE, ("triton", "--instances"): COUNT,
    ("loadtest", "--duration-s"): ("float", 0, None, True, False), ("loadtest", "--batch"): COUNT,
    ("loadtest", "--limit"): COUNT,
    ("calibrate", "--percentile"): ("float", 0, 100, True, False), ("calibrate", "--batch-size"): COUNT,
    ("calibrate", "--limit"): COUNT, ("calibrate", "--seed"): NONNEGATIVE,
    ("smooth", "--alpha"): ("float", 0, 1, False, False), ("smooth", "--batch-size"): COUNT, ("smooth", "--limit"): COUNT,
    ("awq", "--tokens"): ("int", 16, None, False, False), ("awq", "--batch-size"): COUNT, ("awq", "--limit"): COUNT,
    ("sensitivity", "--limit"): COUNT, ("sensitivity", "--batch-size"): COUNT, ("sensitivity", "--top"): COUNT,
    ("validate", "--batch-size"): COUNT, ("validate", "--limit"): COUNT,
    ("quantize", "--min-weights"): NONNEGATIVE, ("build", "--min-weights"): NONNEGATIVE,
    ("deploy", "--budget-min"): ("float", 0, None, False, False), ("deploy", "--batch-size"): COUNT,
}

# Each command with a file it cannot open and an output it must refuse: once every option is
# accepted, the command stops at one of them, before any work, saying so in its one line.
STOPPED = {
    "bench": (["{d}/missing.onnx"], "no such file"),
    "tune": (["{d}/missing.onnx", "--spec", "{d}/missing.toml", "--precision", "int8", "-o", "{d}/t.cache"], "cannot read"),
    "serve": (["{d}/missing.onnx"], "no such file"),
    "triton": (["{d}/missing.engine", "-o", "{d}/repo"], "no such file"),
    "loadtest": (["http://127.0.0.1:9", "--model", "m", "--data", "{d}", "--plot", "{d}"], "is a directory"),
    "calibrate": (["{d}/missing.onnx", "--data", "{d}", "-o", "{d}"], "is a directory"),
    "smooth": (["{d}/missing.onnx", "--data", "{d}", "-o", "{d}"], "is a directory"),
    "awq": (["{d}/missing.onnx", "--data", "{d}", "-o", "{d}"], "is a directory"),
    "quantize": (["{d}/missing.onnx", "--precision", "int8", "-o", "{d}"], "is a directory"),
    "build": (["{d}/missing.onnx", "--precision", "fp16", "--target", "sm_89", "-o", "{d}/engines"], "no such file"),
    "sensitivity": (["{d}/missing.onnx", "--cache", "{d}/missing.cache", "--data", "{d}"], "no such file"),
    "validate": (["{d}/missing.onnx", "--baseline", "{d}/missing.onnx", "--data", "{d}"], "no such file"),
    "deploy": (["{d}/missing.onnx", "--data", "{d}", "--target", "sm_89", "-o", "{d}/out"], "no such file"),
}


def _numeric_options():
    import click

    from trtpipe.cli import main

    for name, command in sorted(main.commands.items()):
        for param in command.params:
            if isinstance(param, click.Option) and isinstance(param.type, (click.types._NumberParamTypeBase)):
                yield name, param


def test_every_numeric_option_has_a_range_and_a_finite_type():
    """A new numeric option must say what it means here, and take a ranged type (plain int or float
    take nan, inf and negative counts)."""
    import click

    from trtpipe.cli.options import FiniteFloatRange

    found = {(name, param.opts[0]): param for name, param in _numeric_options()}
    assert set(found) == set(OPTION_RANGES), set(found) ^ set(OPTION_RANGES)
    for key, param in found.items():
        kind = OPTION_RANGES[key][0]
        assert isinstance(param.type, click.IntRange if kind == "int" else FiniteFloatRange), (key, param.type)


def _expected(text: str, kind: str, low, high, low_open: bool, high_open: bool) -> bool:
    """Return whether `text` is a value the option means something for (the spec above, not click's code)."""
    try:
        value = int(text) if kind == "int" else float(text)
    except ValueError:
        return False
    if not math.isfinite(value):
        return False
    if low is not None and (value < low or (low_open and value == low)):
        return False
    return not (high is not None and (value > high or (high_open and value == high)))


option_values = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(-2, 200).map(lambda v: f"{v:.3g}"),
    st.sampled_from(["nan", "inf", "-inf", "NaN", "1e400", "-0", "0", "1", "16", "15", "65535", "65536", "abc", "",
                     "1.5", "0x10", " 3"]),
)


@pytest.mark.parametrize("key", sorted(OPTION_RANGES), ids=[f"{c}{o}" for c, o in sorted(OPTION_RANGES)])
@settings(max_examples=int(os.environ.get("TRTPIPE_OPTION_EXAMPLES", "40")), deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=option_values)
def test_any_value_of_a_numeric_option_is_taken_or_one_line_naming_the_flag(key, text, tmp_path_factory):
    from click.testing import CliRunner

    from trtpipe.cli import main

    command, flag = key
    directory = tmp_path_factory.getbasetemp() / "options"
    directory.mkdir(exist_ok=True)
    args, stop = STOPPED[command]
    result = CliRunner().invoke(main, [command, *(a.format(d=directory) for a in args), flag, text])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("trtpipe: error: "), (result.exit_code,
                                                                                                   result.stderr)
    if _expected(text, *OPTION_RANGES[key]):
        assert "no such file" in lines[0] or "is a directory" in lines[0] or stop in lines[0], lines[0]  # the value was taken: the command went on to its inputs
    else:
        assert f"'{flag}'" in lines[0] or f"{flag} " in lines[0], lines[0]
    assert sorted(p.name for p in directory.iterdir()) == [], "nothing written"
