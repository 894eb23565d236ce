"""A second hostile battery, written from issue 26's classes rather than its examples.

Every command `trtpipe --help` lists and every file option it has are read from the click command
tree: each file option has a role here (model, spec, data, ...), and each role is tried with every
way such a file can be unusable (a directory, a dangling link, a FIFO, empty, binary, not UTF-8,
oversize, a .npy whose header lies, ...). A new command or file option fails
`test_every_command_and_file_option_has_a_role` until it is given one, and is then covered by every
variant of its role. Then outputs that are inputs by another name (a symbolic or hard link, a file in
the data directory), numbers a spec may hold (NaN, infinite, negative, zero, huge), paths with spaces,
non-ASCII and leading dashes through each command's good path, and the runtime's Python API fed
wrong dtypes and shapes. Each bad case: exit code 2, one line naming the file or flag, no input
changed, nothing left behind; a FIFO must never be waited on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import HAS_RTX

import models
from contract.test_battery import GOOD_SPEC, _snapshot
from trtpipe.files import MAX_TEXT_INPUT_BYTES

# ---- every command's file options, by role ------------------------------------------------------

# The role of every file parameter of every command: which hostile variants it is tried with.
ROLES = {
    ("awq", "model"): "model", ("awq", "--data"): "data", ("awq", "--spec"): "spec", ("awq", "-o"): "output",
    ("bench", "candidate"): "model",
    ("build", "model"): "model", ("build", "--cache"): "cache", ("build", "--spec"): "spec",
    ("build", "--timing-cache"): "output", ("build", "--data"): "data", ("build", "-o"): "outdir",
    ("calibrate", "model"): "model", ("calibrate", "--data"): "data", ("calibrate", "--spec"): "spec",
    ("calibrate", "-o"): "output",
    ("deploy", "model"): "model", ("deploy", "--data"): "data", ("deploy", "--spec"): "spec", ("deploy", "-o"): "outdir",
    ("deploy", "--validation"): "data",
    ("init", "model"): "model", ("init", "--data"): "data", ("init", "-o"): "output",
    ("inspect", "path"): "model",
    ("loadtest", "--data"): "data", ("loadtest", "--spec"): "spec", ("loadtest", "--check"): "model",
    ("loadtest", "--plot"): "output",
    ("quantize", "model"): "model", ("quantize", "--cache"): "cache", ("quantize", "--spec"): "spec",
    ("quantize", "--data"): "data", ("quantize", "-o"): "output",
    ("sensitivity", "model"): "model", ("sensitivity", "--cache"): "cache", ("sensitivity", "--data"): "data",
    ("sensitivity", "--spec"): "spec",
    ("serve", "candidates"): "model", ("serve", "--spec"): "spec",
    ("smooth", "model"): "model", ("smooth", "--data"): "data", ("smooth", "--spec"): "spec", ("smooth", "-o"): "output",
    ("summary", "reports"): "report",
    ("triton", "engines"): "model", ("triton", "-o"): "outdir",
    ("tune", "model"): "model", ("tune", "--spec"): "spec", ("tune", "--data"): "data", ("tune", "--validation"): "data",
    ("tune", "--baseline"): "model", ("tune", "--report"): "outdir", ("tune", "-o"): "output",
    ("validate", "candidate"): "model", ("validate", "--baseline"): "model", ("validate", "--data"): "data",
    ("validate", "--labels"): "labels", ("validate", "--spec"): "spec", ("validate", "--report"): "outdir",
}
NO_FILES = {"plan"}

# A command line per command that gets as far as its files: {param: value} (None: an argument-less
# flag), each a good file of the workspace; a case swaps one for a hostile one.
BASES = {
    "awq": {"model": "{ws}/mlp.onnx", "--block-size": "32", "--data": "{ws}/data", "--spec": "{ws}/spec.toml", "-o": "{out}/a.onnx"},
    "bench": {"candidate": "{ws}/mlp.onnx", "--iterations": "1", "--warmup-ms": "0", "--duration-s": "0"},
    "build": {"model": "{ws}/mlp.onnx", "--precision": "int8", "--cache": "{ws}/int8.cache", "--data": "{ws}/data",
              "--spec": "{ws}/spec.toml",
              "--shapes": "x:1x16/8x16/32x16", "-o": "{out}/engines",
              "--target": "sm_89", "--backend": "tensorrt-rtx"},
    "calibrate": {"model": "{ws}/mlp.onnx", "--data": "{ws}/data", "--spec": "{ws}/spec.toml", "-o": "{out}/c.cache"},
    "deploy": {"model": "{ws}/mlp.onnx", "--data": "{ws}/data", "--spec": "{ws}/spec.toml", "-o": "{out}/deploy",
               "--target": "sm_89", "--backend": "tensorrt-rtx"},
    "init": {"model": "{ws}/mlp.onnx", "--data": "{ws}/data", "-o": "{out}/model.toml"},
    "inspect": {"path": "{ws}/mlp.onnx"},
    "loadtest": {"--model": "mlp", "--data": "{ws}/data", "--spec": "{ws}/spec.toml", "--check": "{ws}/mlp.onnx",
                 "--plot": "{out}/load.png"},
    "quantize": {"model": "{ws}/mlp.onnx", "--precision": "int8", "--cache": "{ws}/int8.cache", "--spec": "{ws}/spec.toml",
                 "--data": "{ws}/data", "-o": "{out}/q.onnx"},
    "sensitivity": {"model": "{ws}/mlp.onnx", "--cache": "{ws}/int8.cache", "--data": "{ws}/data", "--spec": "{ws}/spec.toml"},
    "serve": {"candidates": "{ws}/mlp.onnx", "--spec": "{ws}/spec.toml", "--http-port": "{taken}"},
    "smooth": {"model": "{ws}/mlp.onnx", "--data": "{ws}/data", "--spec": "{ws}/spec.toml", "-o": "{out}/s.onnx"},
    "summary": {"reports": "{ws}/report/mlp.fp16.onnx.json"},
    "triton": {"engines": "{ws}/mlp.fp16.onnx", "-o": "{out}/repo"},
    "tune": {"model": "{ws}/mlp.onnx", "--spec": "{ws}/spec.toml", "--precision": "int8", "--data": "{ws}/data",
             "--validation": "{ws}/data", "--baseline": "{ws}/mlp.onnx", "--report": "{out}/tune", "--budget-min": "0.05",
             "-o": "{out}/t.cache"},
    "validate": {"candidate": "{ws}/mlp.fp16.onnx", "--baseline": "{ws}/mlp.onnx", "--data": "{ws}/data",
                 "--spec": "{ws}/spec.toml", "--report": "{out}/report"},
}
FIRST_ARGUMENTS = {"loadtest": ["http://127.0.0.1:9"]}  # positional, not files
NEEDS_RTX = {"build", "deploy"}


def _params(command: str) -> dict:
    import click

    from trtpipe.cli import main

    return {_key(p): p for p in main.commands[command].params if isinstance(p.type, click.Path)}


def _key(param) -> str:
    """Return how the tables name a parameter: an option by its flag, an argument by its name."""
    import click

    return param.opts[0] if isinstance(param, click.Option) else param.name


def command_line(command: str, values: dict) -> list[str]:
    """Return the argv of `command` with `values` ({flag or argument name: value}); arguments after `--`."""
    argv, positional = [command, *FIRST_ARGUMENTS.get(command, [])], []
    for key, value in values.items():
        if key.startswith("-"):
            argv += [key, value]
        else:
            positional.append(value)
    return argv + ["--", *positional] if positional else argv


def test_every_command_and_file_option_has_a_role():
    from trtpipe.cli import main

    found = {(name, p) for name in main.commands for p in _params(name)}
    assert found == set(ROLES), sorted(found ^ set(ROLES))
    assert set(main.commands) == set(BASES) | NO_FILES, set(main.commands) ^ (set(BASES) | NO_FILES)


# ---- the hostile variants of each role --------------------------------------------------------

def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as file:
        file.truncate(size)


def _npy_header(shape) -> bytes:
    """Return a .npy whose header claims `shape` (float32) and which holds no data."""
    import io

    from numpy.lib import format as npformat

    out = io.BytesIO()
    npformat.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": tuple(shape)})
    return out.getvalue()


# variant -> (what makes it at {hostile}/<name>, the name). Files for file roles:
FILE_VARIANTS = {
    "directory": (lambda p: p.mkdir(), "adir.onnx"),
    "dangling-link": (lambda p: p.symlink_to(p.parent / "gone"), "gone-link.onnx"),
    "fifo": (lambda p: os.mkfifo(p), "pipe.onnx"),
    "empty": (lambda p: _write(p, b""), "empty.onnx"),
    "binary": (lambda p: _write(p, bytes(range(256)) * 8), "binary.onnx"),
    "not-utf8": (lambda p: _write(p, b'name = "caf\xe9"\n'), "latin1.onnx"),
    "oversize": (lambda p: _sparse(p, MAX_TEXT_INPUT_BYTES + 1), "huge.onnx"),  # holes: no disk, refused by its size
}


def _broken_mlp(break_it):
    """Return a maker of the workspace's MLP, parsed and then broken by `break_it(model)`: a file that
    reads as ONNX and is not a model anything can run (issue 26's class "a corrupt ONNX", past the
    bytes)."""
    def make(path: Path) -> None:
        model = models.dynamic_mlp()
        break_it(model)
        _write(path, model.SerializeToString())
    return make


def _weights_outside(path: Path) -> None:
    """The MLP with its weights in a file that exists, but outside the model's folder (an absolute path)."""
    model = models.dynamic_mlp()
    outside = path.parent / "elsewhere"
    outside.mkdir()
    onnx.save(model, str(path), save_as_external_data=True, location="w.data", size_threshold=0)
    (path.parent / "w.data").rename(outside / "w.data")
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = str(outside / "w.data")
    _write(path, model.SerializeToString())


def _short_weights(model) -> None:
    tensor = model.graph.initializer[0]
    data = onnx.numpy_helper.to_array(tensor).tobytes()
    tensor.ClearField("float_data")
    tensor.raw_data = data[: len(data) // 2]


def _widened_weight(model) -> None:
    tensor = model.graph.initializer[0]
    weight = onnx.numpy_helper.to_array(tensor)
    tensor.CopyFrom(onnx.numpy_helper.from_array(np.zeros((weight.shape[0] + 1, *weight.shape[1:]), weight.dtype), tensor.name))


# Models that parse and are broken inside, for the model role only:
ONNX_VARIANTS = {
    "edge-nobody-makes": (_broken_mlp(lambda m: m.graph.node[-1].input.__setitem__(0, "nobody_makes_this")), "edge.onnx"),
    "cycle": (_broken_mlp(lambda m: m.graph.node[0].input.__setitem__(0, m.graph.node[1].output[0])), "cycle.onnx"),
    "unknown-operator": (_broken_mlp(lambda m: setattr(m.graph.node[0], "op_type", "NoSuchOp")), "unknown-op.onnx"),
    "future-opset": (_broken_mlp(lambda m: setattr(m.opset_import[0], "version", 99)), "future-opset.onnx"),
    "no-outputs": (_broken_mlp(lambda m: m.graph.ClearField("output")), "no-outputs.onnx"),
    "short-weights": (_broken_mlp(_short_weights), "short-weights.onnx"),
    "weights-outside-its-folder": (_weights_outside, "outside.onnx"),
    # session 21: valid to ONNX's checker, wrong to its shape inference (init and inspect took them)
    "weight-of-another-shape": (_broken_mlp(_widened_weight), "wide-weight.onnx"),
    "input-of-another-type": (_broken_mlp(lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type",
                                                             onnx.TensorProto.INT64)), "int-input.onnx"),
}
FILE_VARIANTS.update(ONNX_VARIANTS)
# Paths the system refuses, for every role, outputs included (session 18): a link to itself (ELOOP), a name
# longer than a file system holds (ENAMETOOLONG), a path through a regular file (ENOTDIR). {suffix}: the
# option's own (an output keeps the name its command asks for).
PATH_VARIANTS = {
    "link-loop": (lambda p: p.symlink_to(p.name), "loop{suffix}"),
    "name-too-long": (lambda p: None, "n" * 300 + "{suffix}"),
    "through-a-file": (lambda p: _write(p.parent, b"a file, not a folder\n"), "afile/x{suffix}"),
}
FILE_VARIANTS.update(PATH_VARIANTS)


def _spec_beside(text: str, **files):
    """Return a maker of a spec holding `text`, with `files` ({name: maker of it}) made beside it."""
    def make(path: Path) -> None:
        for name, make_file in files.items():
            make_file(path.parent / name)
        _write(path, text.encode())
    return make


_VITERBI = GOOD_SPEC + '[[outputs]]\nname = "probs"\ntask = "sequence"\ndecode = "viterbi"\ntransitions = "{}"\n'
# Specs that parse and name a path no file can have, or nest deeper than any parser recurses: read by
# every command at load, so each is refused whatever the command would read of the spec.
SPEC_VARIANTS = {
    "nul-in-a-path": (_spec_beside(GOOD_SPEC.replace('calibration = "data"', 'calibration = "da\\u0000ta"')), "nul.toml"),
    "transitions-a-fifo": (_spec_beside(_VITERBI.format("t.npy"), **{"t.npy": os.mkfifo}), "fifo-inside.toml"),
    "transform-a-link-loop": (_spec_beside(GOOD_SPEC + '[[outputs]]\nname = "probs"\ntask = "generic"\n'
                                           'transform = "loop.py:answer"\n', **{"loop.py": lambda p: p.symlink_to(p.name)}),
                              "loop-inside.toml"),
    "arrays-nested-too-deep": (_spec_beside("name = " + "[" * 20000 + "]" * 20000 + "\n"), "deep.toml"),
    "tables-nested-too-deep": (_spec_beside("name = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n"), "deep-tables.toml"),
}
FILE_VARIANTS.update(SPEC_VARIANTS)


def _cache_with_sidecar(make_sidecar):
    """Return a maker of the workspace's INT8 cache (its bytes, made by calibrate) beside a sidecar `make_sidecar` makes."""
    def make(path: Path) -> None:
        from trtpipe.files import sidecar_path

        _write(path, CACHE_TEXT)
        make_sidecar(sidecar_path(path))
    return make


# A cache whose sidecar (the .json beside it, which says what the cache was calibrated for) cannot be used.
CACHE_TEXT = b"TRT-101300-EntropyCalibration2\nx: 3c010a14\nh2: 3c010a14\n"
SIDECAR_VARIANTS = {
    "sidecar-a-fifo": (_cache_with_sidecar(os.mkfifo), "fifo-sidecar.cache"),
    "sidecar-a-directory": (_cache_with_sidecar(lambda p: p.mkdir()), "dir-sidecar.cache"),
    "sidecar-nested-too-deep": (_cache_with_sidecar(lambda p: _write(p, b"[" * 100_000 + b"]" * 100_000)), "deep-sidecar.cache"),
    "sidecar-not-an-object": (_cache_with_sidecar(lambda p: _write(p, b"[]")), "list-sidecar.cache"),
    "sidecar-not-utf8": (_cache_with_sidecar(lambda p: _write(p, b'{"options": "caf\xe9"}')), "latin1-sidecar.cache"),
}
FILE_VARIANTS.update(SIDECAR_VARIANTS)


def _beside_a_sample(make_second):
    """Return a maker of a data directory of one good sample file and a second `make_second` makes."""
    def make(path: Path) -> None:
        path.mkdir()
        np.save(path / "000.npy", np.random.default_rng(0).normal(0, 1, (4, 16)).astype(np.float32))
        make_second(path / "001.npy")
    return make


def _two_arrays(path: Path) -> None:
    with open(path, "wb") as file:  # np.save twice into one file: np.load reads the first, the second is lost
        np.save(file, np.ones((4, 16), np.float32))
        np.save(file, np.ones((4, 16), np.float32))
# Data directories (each made under {hostile}/<name>/):
DATA_VARIANTS = {
    "a-file": lambda p: _write(p, GOOD_SPEC.encode()),
    "dangling-link": lambda p: p.symlink_to(p.parent / "gone"),
    "fifo-sample": lambda p: (p.mkdir(), os.mkfifo(p / "000.npy")),
    "directory-sample": lambda p: (p.mkdir(), (p / "000.npy").mkdir()),
    "object-npy": lambda p: (p.mkdir(), np.save(p / "000.npy", np.array([{"a": 1}] * 4, dtype=object))),
    "npy-header-lies": lambda p: (p.mkdir(), _write(p / "000.npy", _npy_header((10**12, 16)))),
    "npz-of-nothing": lambda p: (p.mkdir(), np.savez(p / "000.npz")),
    "wrong-rank": lambda p: (p.mkdir(), np.save(p / "000.npy", np.zeros((4, 4, 4), np.float32))),
    "strings": lambda p: (p.mkdir(), np.save(p / "000.npy", np.array([["a"] * 16] * 4))),
    # numbers that are not: every command would compute a range, a scale or a verdict of NaN from them
    "nan-sample": lambda p: (p.mkdir(), np.save(p / "000.npy", np.where(np.eye(4, 16) > 0, np.nan, 1).astype(np.float32))),
    "inf-in-a-later-file": lambda p: (p.mkdir(), np.save(p / "000.npy", np.ones((4, 16), np.float32)),
                                      np.save(p / "001.npy", np.full((4, 16), -np.inf, np.float32))),
    "not-utf8-name": lambda p: (p.mkdir(), _write(Path(os.fsdecode(os.fsencode(p) + b"/\xff\xfe.npy")), b"\x93NUMPY")),
    # session 18: the paths the system refuses (a maker may return the path it made, when it is not `p`) ...
    "link-loop": lambda p: p.symlink_to(p.name),
    "name-too-long": lambda p: p.parent / ("n" * 300),
    "through-a-file": lambda p: (_write(p, b"a file, not a folder\n"), p / "data")[1],
    # ... a file named as a sample, beside a good one, that is not a file of samples ...
    "dangling-link-beside-a-sample": _beside_a_sample(lambda p: p.symlink_to("gone.npy")),
    "link-loop-beside-a-sample": _beside_a_sample(lambda p: p.symlink_to(p.name)),
    "directory-beside-a-sample": _beside_a_sample(lambda p: p.mkdir()),
    "fifo-beside-a-sample": _beside_a_sample(os.mkfifo),
    # ... and arrays that are not what they seem: two in one .npy, float64 values no float32 holds.
    "two-arrays-in-one-npy": lambda p: (p.mkdir(), _two_arrays(p / "000.npy")),
    "beyond-float32": lambda p: (p.mkdir(), np.save(p / "000.npy", np.full((4, 16), 1e300))),
}
# What the line must say for these (the others: any message naming the file or flag).
VARIANT_SAYS = {"oversize": f"at most {MAX_TEXT_INPUT_BYTES >> 20} MiB", "edge-nobody-makes": "not a valid ONNX model",
                "cycle": "not a valid ONNX model", "unknown-operator": "NoSuchOp", "future-opset": "opset 99",
                "no-outputs": "no outputs", "short-weights": "raw_data size", "weights-outside-its-folder": "outside",
                "weight-of-another-shape": "not a valid ONNX model", "input-of-another-type": "not a valid ONNX model"}
BYTES = set(FILE_VARIANTS) - set(ONNX_VARIANTS) - set(SPEC_VARIANTS) - set(SIDECAR_VARIANTS)
ROLE_VARIANTS = {
    "model": set(FILE_VARIANTS) - {"not-utf8", "oversize"} - set(SPEC_VARIANTS) - set(SIDECAR_VARIANTS),  # an ONNX is
    # binary, and may be large
    "spec": BYTES - {"empty"} | set(SPEC_VARIANTS),  # an empty model.toml is a spec of every default
    "cache": BYTES | set(SIDECAR_VARIANTS), "labels": BYTES, "report": BYTES,
    "data": set(DATA_VARIANTS),
    "output": set(PATH_VARIANTS), "outdir": set(PATH_VARIANTS),
}
# Which variants a command refuses with its own message rather than the file's: none; every case
# must name the file or the flag.


@dataclass
class Case:
    id: str
    command: str
    param: str
    variant: str


def _cases() -> list[Case]:
    cases = []
    for (command, param), role in sorted(ROLES.items()):
        for variant in sorted(ROLE_VARIANTS.get(role, ())):
            cases.append(Case(f"{command}-{param}-{variant}", command, param, variant))
    return cases


CASES = _cases()


@contextlib.contextmanager
def fifo_watch(paths: list[Path]):
    """Yield a list that says whether something opened one of the FIFOs `paths` to read it (and would
    have waited for ever): each is opened for writing, which only succeeds while a reader waits, and
    closed at once, so that the reader gets end of file and the command goes on."""
    blocked, done = [], threading.Event()

    def watch():
        while not done.wait(0.05):
            for path in paths:
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                except OSError as exc:
                    if exc.errno in (errno.ENXIO, errno.ENOENT):
                        continue  # no reader: nothing waits on it
                    raise
                blocked.append(path)
                os.close(fd)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield blocked
    finally:
        done.set()
        thread.join()


def run_cli(argv):
    from click.testing import CliRunner

    from trtpipe.cli import main

    result = CliRunner().invoke(main, [str(a) for a in argv])
    return result.exit_code, result.stdout, result.stderr, result.exception


def check_refused(argv, workspace, out, hostile, needles_any, fifos=()) -> str:
    """Run `argv`; assert exit 2, one line holding one of `needles_any`, no input changed, nothing left in
    `out`; return the line."""
    before_ws, before_hostile = _snapshot(workspace), _snapshot(hostile)
    fifos = [*fifos, *(p for p in hostile.rglob("*") if p.is_fifo())]  # every FIFO a case made is watched
    with fifo_watch(fifos) as blocked:
        code, stdout, stderr, exception = run_cli(argv)
    assert not blocked, f"opened the FIFO {blocked[0]} to read it (it would wait for ever): {stderr}"
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("-- ")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("trtpipe: error: "), \
        f"exit {code} {exception!r}: {stdout}{stderr}"
    assert any(n in lines[0] for n in needles_any), f"none of {needles_any} in {lines[0]!r}"
    assert _snapshot(workspace) == before_ws, "an input changed"
    assert _snapshot(hostile) == before_hostile, "a hostile input changed"
    left = list(out.rglob("*"))  # a folder made for the output is left behind too (session 18)
    assert not left, f"left behind: {left}"
    return lines[0]


@pytest.fixture(scope="session")
def report(workspace):
    """A real validation report in the workspace (summary reads it)."""
    if not (workspace / "report").exists():
        code, _out, err, _ = run_cli(["validate", workspace / "mlp.fp16.onnx", "--baseline", workspace / "mlp.onnx",
                                      "--data", workspace / "data", "--report", workspace / "report"])
        assert code == 0, err
    return workspace / "report" / "mlp.fp16.onnx.json"


@pytest.fixture(scope="session")
def taken_port():
    """A port this test listens on: a serve that took a hostile file stops there, instead of serving."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_file_that_cannot_be_used(case: Case, workspace, report, taken_port, tmp_path):
    if case.command in NEEDS_RTX and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    hostile.mkdir()
    role = ROLES[(case.command, case.param)]
    if role == "data":
        target = hostile / f"data-{case.variant}"
        made = DATA_VARIANTS[case.variant](target)
        target = made if isinstance(made, Path) else target
    else:
        make, name = FILE_VARIANTS[case.variant]
        target = hostile / name.format(suffix=Path(BASES[case.command].get(case.param, "x.txt")).suffix)
        make(target)
    values = {k: v.format(ws=workspace, out=out, taken=taken_port) for k, v in BASES[case.command].items()}
    values[case.param] = str(target)
    flag = case.param if case.param.startswith("-") else target.name
    message = check_refused(command_line(case.command, values), workspace, out, hostile, (target.name, flag))
    if case.variant in VARIANT_SAYS:
        assert VARIANT_SAYS[case.variant] in message, message


# ---- outputs that are inputs by another name -------------------------------------------------

WRITERS = sorted((c, p) for (c, p), role in ROLES.items() if role == "output" and p in BASES[c])
# A link to an input is the input (written through, or renamed over, the model is gone); a file
# inside an input directory joins the data the next run reads.
OUTPUT_VARIANTS = ("symlink-to-an-input", "hardlink-to-an-input", "inside-the-data")


def _first_input(command: str) -> str:
    """Return the input file parameter a link is made to: the model, else the spec."""
    return next(p for p in ("model", "candidate", "--spec") if p in BASES[command])


@pytest.mark.parametrize("command,param,variant", [(c, p, v) for c, p in WRITERS for v in OUTPUT_VARIANTS
                                                   if v != "inside-the-data" or "--data" in BASES[c]],
                         ids=[f"{c}{p}-{v}" for c, p in WRITERS for v in OUTPUT_VARIANTS
                              if v != "inside-the-data" or "--data" in BASES[c]])
def test_an_output_that_is_an_input_by_another_name(command, param, variant, workspace, report, taken_port, tmp_path):
    import shutil

    if command in NEEDS_RTX and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    hostile.mkdir()
    values = {k: v.format(ws=workspace, out=out, taken=taken_port) for k, v in BASES[command].items()}
    suffix = Path(values[param]).suffix
    if variant == "inside-the-data":
        shutil.copytree(workspace / "data", hostile / "data")
        values["--data"] = str(hostile / "data")
        values[param] = str(hostile / "data" / f"written{suffix}")
    else:
        source = _first_input(command)
        original = Path(values[source])
        copy = hostile / original.name
        shutil.copy(original, copy)
        values[source] = str(copy)
        link = hostile / f"link{suffix}"
        if variant == "symlink-to-an-input":
            link.symlink_to(copy)
        else:
            os.link(copy, link)
        values[param] = str(link)
    check_refused(command_line(command, values), workspace, out, hostile, (param,))


# ---- numbers a spec holds ---------------------------------------------------------------------

# Each numeric place in model.toml, as TOML text with {v} for the number, and the values it must
# refuse: nan and the infinities everywhere, and what means nothing there.
SPEC_NUMBERS = {
    "[preprocess] scale": ("[preprocess]\nscale = {v}\n", ["nan", "inf", "-inf", "0"]),
    "[preprocess] mean": ("[preprocess]\nmean = [{v}]\n", ["nan", "inf", "-inf"]),
    "[preprocess] std": ("[preprocess]\nstd = [{v}]\n", ["nan", "inf", "-inf", "0"]),
    "[preprocess] size": ("[preprocess]\nsize = [{v}, 4]\n", ["0", "-4", "nan", "inf", "1e400"]),
    "[preprocess] resize": ("[preprocess]\nsize = [4, 4]\nresize = {v}\n", ["0", "-1", "nan", "inf"]),
    "[quantize] smooth": ("[quantize]\nsmooth = {v}\n", ["nan", "inf", "-0.5"]),
    "[quantize] min_weights": ("[quantize]\nmin_weights = {v}\n", ["-1", "nan", "inf"]),
    "[thresholds.fp16] cosine": ("[thresholds.fp16]\ncosine = {v}\n", ["nan", "inf", "-inf"]),
    "[thresholds.fp16] snr_db": ("[thresholds.fp16]\nsnr_db = {v}\n", ["nan", "inf"]),
    "[[inputs]] shape": ("", ["0", "-2", "nan", "1.5"]),
    "[[inputs]] value": ("", ["nan", "inf", "-inf"]),
}


def _spec_with(place: str, value: str) -> str:
    text, _ = SPEC_NUMBERS[place]
    if place == "[[inputs]] shape":
        return GOOD_SPEC.replace("shape = [-1, 16]", f"shape = [-1, {value}]")
    if place == "[[inputs]] value":
        return GOOD_SPEC.replace("shape = [-1, 16]", f"shape = [-1, 16]\nvalue = {value}")
    return GOOD_SPEC + text.format(v=value)


@pytest.mark.parametrize("place,value", [(p, v) for p, (_, values) in SPEC_NUMBERS.items() for v in values],
                         ids=[f"{p}={v}" for p, (_, values) in SPEC_NUMBERS.items() for v in values])
def test_a_number_in_the_spec_that_means_nothing(place, value, workspace, tmp_path):
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    hostile.mkdir()
    spec = hostile / "numbers.toml"
    spec.write_text(_spec_with(place, value))
    argv = (["validate", workspace / "mlp.fp16.onnx", "--baseline", workspace / "mlp.onnx", "--spec", spec,
             "--data", workspace / "data"] if place.startswith("[thresholds") else
            ["calibrate", workspace / "mlp.onnx", "--spec", spec, "-o", out / "c.cache"])
    check_refused(argv, workspace, out, hostile, ("numbers.toml",))


# ---- paths with spaces, non-ASCII and leading dashes, through each command's good path -------

STRANGE_FOLDER = "-dash ünï 名/with space"


@pytest.fixture(scope="module")
def strange(tmp_path_factory):
    """The workspace's model, spec and data under a folder whose name starts with a dash and holds spaces
    and non-ASCII; the model's own name starts with a dash too."""
    import shutil

    import models

    root = tmp_path_factory.mktemp("paths") / STRANGE_FOLDER
    root.mkdir(parents=True)
    models.save(models.dynamic_mlp(), root / "-m ø.onnx")
    models.save_batches(root / "dä ta", np.random.default_rng(0).normal(0, 1, (32, 16)).astype(np.float32))
    (root / "spéc.toml").write_text(GOOD_SPEC.replace('"data"', '"dä ta"'))
    code, _out, err, _ = run_cli(command_line("calibrate", {"model": root / "-m ø.onnx", "--spec": root / "spéc.toml",
                                                            "-o": root / "-c ü.cache"}))
    assert code == 0, err
    shutil.copy(root / "-m ø.onnx", root / "-base ø.onnx")
    return root


GOOD_PATHS = {
    "init": {"model": "{r}/-m ø.onnx", "--data": "{r}/dä ta", "-o": "{r}/out/-init ü.toml"},
    "smooth": {"model": "{r}/-m ø.onnx", "--spec": "{r}/spéc.toml", "-o": "{r}/out/-s ü.onnx"},
    "awq": {"model": "{r}/-m ø.onnx", "--round-to-nearest": None, "--block-size": "32", "-o": "{r}/out/-a ü.onnx"},
    "quantize": {"model": "{r}/-m ø.onnx", "--precision": "int8", "--cache": "{r}/-c ü.cache", "-o": "{r}/out/-q ü.onnx"},
    "sensitivity": {"model": "{r}/-m ø.onnx", "--cache": "{r}/-c ü.cache", "--spec": "{r}/spéc.toml", "--top": "1"},
    "bench": {"candidate": "{r}/-m ø.onnx", "--batch": "4", "--iterations": "2", "--warmup-ms": "0", "--duration-s": "0"},
    "triton": {"engines": "{r}/-m ø.onnx", "--name": "m", "-o": "{r}/out/rëpo"},
    "inspect": {"path": "{r}/-c ü.cache"},
    "validate": {"candidate": "{r}/-m ø.onnx", "--baseline": "{r}/-base ø.onnx", "--spec": "{r}/spéc.toml",
                 "--report": "{r}/out/rep orts"},
}


@pytest.mark.parametrize("command", sorted(GOOD_PATHS))
def test_strange_paths_work(command, strange):
    values = {k: (v.format(r=strange) if v is not None else None) for k, v in GOOD_PATHS[command].items()}
    argv = command_line(command, {k: v for k, v in values.items() if v is not None})
    argv[1:1] = [k for k, v in values.items() if v is None]  # flags without a value
    code, out, err, exception = run_cli(argv)
    assert code == 0, f"exit {code} {exception!r}: {out}{err}"
    if command == "validate":
        assert (strange / "out" / "rep orts" / "-m ø.onnx.json").is_file()


# ---- the runtime's Python API ------------------------------------------------------------------

RUNNER_FEEDS = {
    "float64": lambda: {"x": np.zeros((2, 16), np.float64)}, "int64": lambda: {"x": np.zeros((2, 16), np.int64)},
    "strings": lambda: {"x": np.array([["a"] * 16] * 2)}, "a-list": lambda: {"x": [[0.0] * 16]},
    "wrong-shape": lambda: {"x": np.zeros((2, 15), np.float32)}, "no-batch-axis": lambda: {"x": np.zeros(16, np.float32)},
    "no-inputs": dict, "an-extra-input": lambda: {"x": np.zeros((2, 16), np.float32), "y": np.zeros(1)},
}


@pytest.mark.parametrize("what", sorted(RUNNER_FEEDS))
def test_the_onnx_runner_refuses_feeds_in_one_line_naming_the_model(what, workspace):
    from trtpipe.errors import TrtpipeError
    from trtpipe.runtime import OnnxRunner

    with OnnxRunner(workspace / "mlp.onnx") as runner:
        with pytest.raises(TrtpipeError) as caught:
            runner(RUNNER_FEEDS[what]())
        assert str(caught.value).startswith("mlp.onnx: ") and "\n" not in str(caught.value), str(caught.value)
        assert runner({"x": np.zeros((2, 16), np.float32)})["probs"].shape == (2, 8)  # and it still runs


# ---- Ctrl-C, or a signal to terminate, while a command writes -----------------------------------

INTERRUPTED = {**{c: GOOD_PATHS[c] for c in ("init", "smooth", "awq", "quantize", "triton", "validate")},
               "calibrate": {"model": "{r}/-m ø.onnx", "--spec": "{r}/spéc.toml", "--force": None, "-o": "{r}/out/-c.cache"}}
# The long commands (session 18): what a scheduler or `timeout` stops with SIGTERM.
LONG = {
    "tune": {"model": "{r}/-m ø.onnx", "--spec": "{r}/spéc.toml", "--precision": "int8", "--budget-min": "0.02",
             "-o": "{r}/out/-t ü.cache", "--report": "{r}/out/tune"},
    "build": {"model": "{r}/-m ø.onnx", "--precision": "fp16", "--target": "sm_89", "--backend": "tensorrt-rtx",
              "--shapes": "x:1x16/8x16/32x16", "-o": "{r}/out/engines"},
    "deploy": {"model": "{r}/-m ø.onnx", "--data": "{r}/dä ta", "--precision": "fp16", "--target": "sm_89",
               "--backend": "tensorrt-rtx", "--budget-min": "1", "-o": "{r}/out/deploy"},
}


ONNX_ONLY = {"awq", "quantize", "smooth", "build"}  # their first output is an ONNX, staged and then saved by onnx
SIGNALS = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 129}  # exit 128 + the signal's number, as a shell reports it


def _interruptions():
    """Every command at its first staged output, and at its first write where that is trtpipe's, by SIGINT and
    SIGTERM; SIGHUP, handled as SIGTERM is, at the first staged output."""
    return [(c, w, s) for c in sorted({*INTERRUPTED, *LONG}) for w in ("staged", "written") for s in SIGNALS
            if (w == "staged" or c not in ONNX_ONLY) and (s != "SIGHUP" or w == "staged")]


@pytest.mark.parametrize("command,when,sig", _interruptions())
def test_ctrl_c_while_writing_leaves_nothing(command, when, sig, strange, monkeypatch):
    """A real signal the moment the command stages an output ("staged": its first; "written": the first
    whose bytes come from trtpipe.files): Ctrl-C's SIGINT, and (session 18) SIGTERM, what `timeout`, a
    scheduler or `kill` sends, and SIGHUP, a closed terminal's: exit 128 + the signal, the one line, and
    nothing of it left, finished or temporary, nor a folder made for it."""
    import shutil
    import signal

    from trtpipe import files

    if command in NEEDS_RTX and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    number = getattr(signal, sig)
    out = strange / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    real = getattr(files.Outputs, "stage" if when == "staged" else "write")

    def interrupted(self, *args, **kwargs):
        result = real(self, *args, **kwargs)
        os.kill(os.getpid(), number)  # handled at the next bytecode: inside the command
        return result

    class Unhandled(Exception):
        pass

    def unhandled(*_):
        raise Unhandled(f"trtpipe left {sig} to its default action, which ends the process where it stands")

    monkeypatch.setattr(files.Outputs, "stage" if when == "staged" else "write", interrupted)
    # A command that leaves the signal to its default action fails this test, rather than ending the test run.
    previous = signal.signal(number, unhandled) if sig != "SIGINT" else None
    try:
        paths = {**INTERRUPTED, **LONG}[command]
        values = {k: (v.format(r=strange) if v is not None else None) for k, v in paths.items()}
        argv = command_line(command, {k: v for k, v in values.items() if v is not None})
        argv[1:1] = [k for k, v in values.items() if v is None]
        code, stdout, stderr, exception = run_cli(argv)
    finally:
        if previous is not None:
            signal.signal(number, previous)
    last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    assert code == SIGNALS[sig] and last.startswith("trtpipe: interrupted") and \
        last.endswith("; nothing unfinished was written"), f"exit {code} {exception!r}: {stdout}{stderr}"
    assert list(out.rglob("*")) == []
