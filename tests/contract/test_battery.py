"""The contract, across every command: bad input gets exit code 2, ONE line naming the file or flag
and the fix, no traceback, and nothing written.

Each case runs the CLI in-process against one shared workspace (a real model, data, caches made by
`trtpipe calibrate`, an engine built by TensorRT-RTX). After each case: the exit code, the message,
the workspace unchanged byte for byte (no input destroyed), and the case's output folder empty
(no file, finished or temporary, left behind).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import HAS_RTX

import models

ENGINE = "engines/mlp.fp16.sm89.engine"
RTX = ("--target", "sm_89", "--backend", "tensorrt-rtx")


@dataclass
class Case:
    """A command line ({ws}: the workspace, {out}: this case's empty output folder) and what it must say."""

    id: str
    args: tuple
    needles: tuple  # each must be in the one error line
    setup: Callable[[Path, Path], None] | None = None  # (workspace, hostile): makes this case's own bad files
    rtx: bool = False  # needs TensorRT-RTX (the engine in the workspace, or a build)
    phases: bool = False  # tune: its "-- phase" progress lines on stderr come before the one error line


# ---- the workspace ----------------------------------------------------------------------------

GOOD_SPEC = """name = "mlp"
[[inputs]]
name = "x"
shape = [-1, 16]
[data]
calibration = "data"
validation = "data"
"""

# Hostile inputs, written once into the workspace; the commands only read them.
HOSTILE_MODELS = {
    "text.onnx": b"this is not a model\n",
    "empty.onnx": b"",
    "binary.onnx": bytes(range(256)) * 4,
}
CACHE_HEADER = "TRT-101300-EntropyCalibration2\n"
HOSTILE_CACHES = {
    "nan.cache": CACHE_HEADER + "x: 7fc00000\n",
    "inf.cache": CACHE_HEADER + "x: 7f800000\n",
    "negative.cache": CACHE_HEADER + "x: bf800000\n",
    "hexzero.cache": CACHE_HEADER + "x: 00000000\n",
    "garbage.cache": CACHE_HEADER + "x: hello\n",
    "noheader.cache": "x: 3c010a14\n",
    "empty.cache": "",
    "headeronly.cache": CACHE_HEADER,
    "twice.cache": CACHE_HEADER + "x: 3c010a14\nx: 3c010a15\n",
    "binary.cache": bytes(range(256)).decode("latin-1"),
}
HOSTILE_SPECS = {
    "misspelt-table.toml": GOOD_SPEC + "[quantise]\nexclude = []\n",
    "misspelt-key.toml": GOOD_SPEC + "[quantize]\nexlude = [\"fc0\"]\n",
    "string-list.toml": GOOD_SPEC + "[quantize]\nexclude = \"fc0\"\n",
    "threshold-type.toml": GOOD_SPEC + "[thresholds.int8]\ncosine = \"high\"\n",
    "unknown-input.toml": GOOD_SPEC.replace('name = "x"', 'name = "image"'),
    "bad-shapes.toml": GOOD_SPEC + "[shapes]\nx = \"1x16/8x16\"\n",
    "not-toml.toml": "name = \n[[",
    "bad-dtype.toml": GOOD_SPEC.replace("shape = [-1, 16]", "shape = [-1, 16]\ndtype = \"complex64\""),
    "smooth-range.toml": GOOD_SPEC + "[quantize]\nsmooth = 2\n",
    "std-zero.toml": GOOD_SPEC + "[preprocess]\nstd = [0]\n",
    "top-key.toml": "nmae = \"mlp\"\n" + GOOD_SPEC.split("\n", 1)[1],
    "exclude-nothing.toml": GOOD_SPEC + "[quantize]\nexclude = [\"no_such_node\"]\n",
}
# The user's transform of an output ([[outputs]] transform, docs/validation.md), each file beside its spec: one
# that is missing, one whose function raises, one that answers a row count other than the samples'.
TRANSFORM_SPEC = GOOD_SPEC + '[[outputs]]\nname = "probs"\ntask = "generic"\ntransform = "{file}:answer"\ntolerance = 0.1\n'
HOSTILE_TRANSFORMS = {
    "transform-missing.toml": ("nope.py", None, "does not exist"),
    "transform-raises.toml": ("raises.py", "def answer(probs):\n    raise KeyError('landmarks')\n", "raised KeyError"),
    "transform-rows.toml": ("rows.py", "def answer(probs):\n    return probs[:1]\n", "returned shape [1, 8] for 16 samples"),
}
SPEC_NEEDLES = {
    "misspelt-table.toml": "did you mean [quantize]?", "misspelt-key.toml": "did you mean 'exclude'?",
    "string-list.toml": "must be a list, not a string", "threshold-type.toml": "must be a number",
    "unknown-input.toml": "'image'", "bad-shapes.toml": "MIN/OPT/MAX", "not-toml.toml": "not valid TOML",
    "bad-dtype.toml": "complex64", "smooth-range.toml": "between 0 and 1", "std-zero.toml": "must not be 0",
    "top-key.toml": "did you mean 'name'?", "exclude-nothing.toml": "no_such_node",
}


def _calibrate(cli, ws, precision):
    code, _, err = cli("calibrate", ws / "mlp.onnx", "--spec", ws / "spec.toml", "--precision", precision,
                       "-o", ws / f"{precision}.cache")
    assert code == 0, err


def make_workspace(tmp_path_factory):
    """Return the shared workspace (tests/contract/conftest.py makes it once for both batteries)."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    def cli(*args):
        result = CliRunner().invoke(main, [str(a) for a in args])
        return result.exit_code, result.stdout, result.stderr

    ws = tmp_path_factory.mktemp("ws")
    models.save(models.dynamic_mlp(), ws / "mlp.onnx")
    good = (ws / "mlp.onnx").read_bytes()
    (ws / "truncated.onnx").write_bytes(good[: len(good) // 2])
    for name, content in HOSTILE_MODELS.items():
        (ws / name).write_bytes(content)
    (ws / "folder.onnx").mkdir()
    models.save_batches(ws / "data", np.random.default_rng(0).normal(0, 1, (32, 16)).astype(np.float32))
    (ws / "spec.toml").write_text(GOOD_SPEC)
    for name, content in HOSTILE_SPECS.items():
        (ws / name).write_text(content)
    for name, (file, source, _) in HOSTILE_TRANSFORMS.items():
        (ws / name).write_text(TRANSFORM_SPEC.format(file=file))
        if source is not None:
            (ws / file).write_text(source)
    for name, content in HOSTILE_CACHES.items():
        (ws / name).write_text(content)
    (ws / "folder.cache").mkdir()
    _calibrate(cli, ws, "int8")
    _calibrate(cli, ws, "fp8")
    code, _, err = cli("quantize", ws / "mlp.onnx", "--precision", "fp16", "-o", ws / "mlp.fp16.onnx")
    assert code == 0, err
    # data directories that break the loader
    (ws / "nodata").mkdir()
    (ws / "nodata" / "readme.txt").write_text("no samples here\n")
    (ws / "corrupt").mkdir()
    (ws / "corrupt" / "000.npy").write_bytes(b"\x93NUMPY garbage")
    (ws / "wrongshape").mkdir()
    np.save(ws / "wrongshape" / "000.npy", np.zeros((4, 15), np.float32))
    (ws / "wrongdtype").mkdir()
    np.save(ws / "wrongdtype" / "000.npy", np.zeros((4, 16), np.complex64))
    (ws / "images").mkdir()
    from PIL import Image

    Image.new("L", (4, 4)).save(ws / "images" / "000.png")
    (ws / "badlabels.txt").write_text("000.npy[0] cat\n")
    _hostile_workspace(ws)
    (ws / "report.json").write_text(json.dumps({"not": "a report"}))
    if HAS_RTX:
        code, _, err = cli("build", ws / "mlp.onnx", "--precision", "fp16", *RTX, "--shapes", "x:1x16/8x16/32x16",
                           "-o", ws / "engines")
        assert code == 0, err
    return ws


def _png_header(width: int, height: int) -> bytes:
    """Return a PNG that claims `width` x `height` pixels and holds none: a decompression bomb's header."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) + chunk(b"IEND", b"")


def _hostile_workspace(ws: Path) -> None:
    """The files of the hostile cases added for issue 26: data, models and specs each command must refuse."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    (ws / "truncnpz").mkdir()
    np.savez(ws / "truncnpz" / "000.npz", x=np.zeros((4, 16), np.float32))
    whole = (ws / "truncnpz" / "000.npz").read_bytes()
    (ws / "truncnpz" / "000.npz").write_bytes(whole[: len(whole) // 2])
    (ws / "nosamples").mkdir()
    np.save(ws / "nosamples" / "000.npy", np.zeros((0, 16), np.float32))
    (ws / "mixed").mkdir()
    np.save(ws / "mixed" / "000.npy", rng.normal(0, 1, (16, 16)).astype(np.float32))
    np.save(ws / "mixed" / "001.npy", rng.normal(0, 1, (16, 16)))  # float64
    (ws / "bomb").mkdir()
    (ws / "bomb" / "000.png").write_bytes(_png_header(20000, 20000))  # past twice Pillow's limit: its error
    (ws / "bigimage").mkdir()
    (ws / "bigimage" / "000.png").write_bytes(_png_header(10000, 10000))  # past the limit: Pillow only warns
    # Pictures beside good ones that would have been left out without a word, or read as what they are not.
    from PIL import Image

    for name, write in (("heic", lambda d: (d / "001.HEIC").write_bytes(b"\0\0\0\x18ftypheic")),
                        ("animation", lambda d: Image.new("L", (4, 4)).save(d / "001.gif", save_all=True,
                                                                           append_images=[Image.new("L", (4, 4), 255)])),
                        ("floattiff", lambda d: Image.new("F", (4, 4), 0.5).save(d / "001.tiff"))):
        (ws / name).mkdir()
        Image.new("L", (4, 4)).save(ws / name / "000.png")
        write(ws / name)
    # Samples where users keep them but trtpipe does not look: a folder a class, an archive, audio not yet features.
    for folder in ("cat", "dog"):
        (ws / "byclass" / folder).mkdir(parents=True)
        np.save(ws / "byclass" / folder / "000.npy", rng.normal(0, 1, (4, 16)).astype(np.float32))
    (ws / "archived").mkdir()
    (ws / "archived" / "samples.tar.gz").write_bytes(b"\x1f\x8b\x08\x00")
    (ws / "audio").mkdir()
    (ws / "audio" / "000.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt ")
    (ws / "latin1.txt").write_bytes(b"000.npy[0] caf\xe9 1\n")
    (ws / "latin1.toml").write_bytes(b'[quantize]\nexclude = ["caf\xe9"]\n')
    (ws / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (ws / "image-spec.toml").write_text(GOOD_SPEC + '[preprocess]\nsize = [4, 4]\ncolor = "L"\n')
    (ws / "x.toml").write_text(GOOD_SPEC)  # tune -o x.cache would write its exclusions over it
    (ws / "fraction.toml").write_text(GOOD_SPEC.replace('shape = [-1, 16]', 'shape = [-1, 16]\ndtype = "int64"\nvalue = 2.5'))
    (ws / "bool-value.toml").write_text(GOOD_SPEC.replace('shape = [-1, 16]', 'shape = [-1, 16]\ndtype = "bool"\nvalue = 2'))
    (ws / "share-above-one.toml").write_text(GOOD_SPEC + "[thresholds.fp16]\ncosine = 1.5\n")
    (ws / "zero-samples.toml").write_text(GOOD_SPEC.replace('"data"', '"nosamples"'))
    opset = [helper.make_opsetid("", 17)]
    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["o"])], "strings",
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [1])],
                              [helper.make_tensor_value_info("o", TensorProto.STRING, [1])])
    onnx.save(helper.make_model(graph, opset_imports=opset, ir_version=8), ws / "strings.onnx")
    graph = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "fails",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([4, 4], np.int64), "shape")])
    onnx.save(helper.make_model(graph, opset_imports=opset, ir_version=8), ws / "fails.onnx")  # 6 values into 16
    models.save(models.mlp(batch=0), ws / "zerodim.onnx")
    awq = models.dynamic_mlp()
    awq.metadata_props.add(key="trtpipe.awq.block_size", value="many")
    models.save(awq, ws / "badmeta.onnx")


def _snapshot(root: Path) -> dict:
    """Return {relative path: sha256 or 'dir' or the file type} for everything under `root`."""
    found = {}
    for path in sorted(root.rglob("*")):
        mode = path.lstat().st_mode
        rel = str(path.relative_to(root))
        if stat.S_ISREG(mode):
            found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[rel] = "dir" if stat.S_ISDIR(mode) else oct(stat.S_IFMT(mode))
    return found


# ---- hostile files a case makes for itself (in {out}/../hostile, outside the output folder) -------

def _engine_copy(edit):
    """Setup: copy the workspace engine and its sidecar into hostile/, then `edit(engine, sidecar)`."""
    def setup(ws, hostile):
        engine = hostile / "mlp.fp16.sm89.engine"
        shutil.copy(ws / ENGINE, engine)
        shutil.copy(ws / f"{ENGINE}.json", f"{engine}.json")
        edit(engine, Path(f"{engine}.json"))
    return setup


def _edit_sidecar(change, reseal=True):
    """Setup: edit the sidecar's JSON; `reseal`: recompute its digest, as a careful forger would."""
    def edit(engine, sidecar):
        from trtpipe.runtime.sidecar import SEAL, _digest

        raw = json.loads(sidecar.read_text())
        change(raw)
        if reseal:
            raw[SEAL] = _digest(raw)
        sidecar.write_text(json.dumps(raw))
    return _engine_copy(edit)


def _fifo(ws, hostile):
    os.mkfifo(hostile / "pipe")


def _device(ws, hostile):
    try:
        os.mknod(hostile / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")


def _output_is_input(ws, hostile):
    shutil.copy(ws / "mlp.onnx", hostile / "model.onnx")


# ---- the cases --------------------------------------------------------------------------------

def _cases() -> list[Case]:
    cases = []
    calib = ("calibrate", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "-o", "{out}/c.cache")
    smooth = ("smooth", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "-o", "{out}/s.onnx")
    sens = ("sensitivity", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "--cache", "{ws}/int8.cache")
    validate = ("validate", "{ws}/mlp.fp16.onnx", "--baseline", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml")

    # Numbers: every count at least 1, percentiles in (0, 100], alpha in [0, 1], all finite.
    numbers = [
        (calib, "--limit", ["0", "-5", "abc"]), (calib, "--batch-size", ["0", "-1", "x"]),
        (calib, "--percentile", ["150", "0", "-1", "nan", "inf", "abc"]), (calib, "--seed", ["-1"]),
        (smooth, "--limit", ["0", "-3"]), (smooth, "--batch-size", ["0"]), (smooth, "--alpha", ["1.5", "-0.1", "nan", "abc"]),
        (sens, "--limit", ["0", "-2"]), (sens, "--batch-size", ["0"]), (sens, "--top", ["0", "-3", "x"]),
        (validate, "--limit", ["0", "-1"]), (validate, "--batch-size", ["0", "-4"]),
    ]
    for base, flag, values in numbers:
        for value in values:
            cases.append(Case(f"{base[0]}{flag}={value}", (*base, flag, value), (flag, value)))
    for value, needle in (("cosine=abc", "METRIC=NUMBER"), ("cosine=nan", "finite"), ("cosine", "METRIC=NUMBER"),
                          ("bogus=0.5", "unknown metric")):
        cases.append(Case(f"validate--threshold={value}", (*validate, "--threshold", value), ("--threshold", needle)))

    # Models that are not ONNX, in every command that reads one.
    bad_models = {"text.onnx": "not a readable ONNX model", "truncated.onnx": "not a readable ONNX model",
                  "empty.onnx": "not an ONNX model", "binary.onnx": "ONNX", "missing.onnx": "no such file",
                  "folder.onnx": "no such file"}
    readers = {
        "calibrate": lambda m: ("calibrate", m, "--data", "{ws}/data", "-o", "{out}/c.cache"),
        "quantize": lambda m: ("quantize", m, "--precision", "fp16", "-o", "{out}/q.onnx"),
        "smooth": lambda m: ("smooth", m, "--data", "{ws}/data", "-o", "{out}/s.onnx"),
        "build": lambda m: ("build", m, "--precision", "fp16", *RTX, "-o", "{out}/engines"),
        "sensitivity": lambda m: ("sensitivity", m, "--cache", "{ws}/int8.cache", "--data", "{ws}/data"),
        "validate-candidate": lambda m: ("validate", m, "--baseline", "{ws}/mlp.onnx", "--data", "{ws}/data"),
        "validate-baseline": lambda m: ("validate", "{ws}/mlp.fp16.onnx", "--baseline", m, "--data", "{ws}/data"),
        "inspect": lambda m: ("inspect", m),
    }
    for model, needle in bad_models.items():
        for command, make in readers.items():
            if command == "inspect" and model == "folder.onnx":
                needle = "not a regular file"
            cases.append(Case(f"{command}-{model}", make(f"{{ws}}/{model}"), (model, needle)))

    # Caches: NaN, infinite, negative or zero scales, bad lines, no header, nothing in it, not a file.
    cache_needles = {"nan.cache": "scale nan", "inf.cache": "scale inf", "negative.cache": "scale -",
                     "hexzero.cache": "scale 0.0", "garbage.cache": "line 2", "noheader.cache": "line 1",
                     "empty.cache": "line 1", "headeronly.cache": "holds no tensors", "twice.cache": "second scale",
                     "binary.cache": "line", "missing.cache": "no such file", "folder.cache": "no such file"}
    users = {
        "quantize": lambda c: ("quantize", "{ws}/mlp.onnx", "--precision", "int8", "--cache", c, "-o", "{out}/q.onnx"),
        "build": lambda c: ("build", "{ws}/mlp.onnx", "--precision", "int8", *RTX, "--cache", c,
                            "--shapes", "x:1x16/8x16/32x16", "-o", "{out}/engines"),
        "sensitivity": lambda c: ("sensitivity", "{ws}/mlp.onnx", "--cache", c, "--data", "{ws}/data"),
        "inspect": lambda c: ("inspect", c),
    }
    for cache, needle in cache_needles.items():
        for command, make in users.items():
            if command == "inspect" and cache in ("headeronly.cache",):
                continue  # an empty table is a valid thing to look at
            if cache == "folder.cache":
                needle = "not a regular file" if command == "inspect" else "is a directory"
            cases.append(Case(f"{command}-{cache}", make(f"{{ws}}/{cache}"), (cache, needle)))

    # A cache calibrated for the other grid.
    cases += [
        Case("quantize-fp8-with-int8-cache", ("quantize", "{ws}/mlp.onnx", "--precision", "fp8", "--cache", "{ws}/int8.cache",
                                              "-o", "{out}/q.onnx"), ("int8.cache", "calibrated for int8, not fp8")),
        Case("quantize-int8-with-fp8-cache", ("quantize", "{ws}/mlp.onnx", "--precision", "int8", "--cache", "{ws}/fp8.cache",
                                              "-o", "{out}/q.onnx"), ("fp8.cache", "calibrated for fp8, not int8")),
        Case("sensitivity-fp8-with-int8-cache", ("sensitivity", "{ws}/mlp.onnx", "--precision", "fp8", "--cache",
                                                 "{ws}/int8.cache", "--data", "{ws}/data"), ("calibrated for int8",)),
        Case("build-fp8-with-int8-cache", ("build", "{ws}/mlp.onnx", "--precision", "fp8", *RTX, "--cache", "{ws}/int8.cache",
                                           "--shapes", "x:1x16/8x16/32x16", "-o", "{out}/engines"), ("calibrated for int8",)),
    ]

    # Outputs that must not be written: a directory, a FIFO, a device, the model itself.
    writers = {
        "calibrate": lambda o, m="{ws}/mlp.onnx": ("calibrate", m, "--data", "{ws}/data", "-o", o),
        "quantize": lambda o, m="{ws}/mlp.onnx": ("quantize", m, "--precision", "fp16", "-o", o),
        "smooth": lambda o, m="{ws}/mlp.onnx": ("smooth", m, "--data", "{ws}/data", "-o", o),
    }
    for command, make in writers.items():
        cases += [
            Case(f"{command}-o-directory", make("{ws}/data"), ("-o", "is a directory")),
            Case(f"{command}-o-fifo", make("{hostile}/pipe"), ("-o", "not a regular file"), setup=_fifo),
            Case(f"{command}-o-device", make("{hostile}/null"), ("-o", "not a regular file"), setup=_device),
            Case(f"{command}-o-is-the-model", make("{hostile}/model.onnx", "{hostile}/model.onnx"),
                 ("-o", "is also an input"), setup=_output_is_input),
            Case(f"{command}-o-under-a-file", make("{ws}/spec.toml/x"), ("-o", "is a file, not a folder")),
        ]
    cases += [
        Case("quantize-o-is-the-cache", ("quantize", "{ws}/mlp.onnx", "--precision", "int8", "--cache", "{ws}/int8.cache",
                                         "-o", "{ws}/int8.cache"), ("-o", "is also an input")),
        Case("calibrate-o-is-the-spec", ("calibrate", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "-o", "{ws}/spec.toml"),
             ("-o", "is also an input")),
        Case("build-o-is-a-file", ("build", "{ws}/mlp.onnx", "--precision", "fp16", *RTX, "--shapes", "x:1x16/8x16/32x16",
                                   "-o", "{ws}/spec.toml"), ("-o", "is a file")),
    ]

    # Spec mistakes, wherever a spec is read.
    spec_users = {
        "calibrate": lambda s: ("calibrate", "{ws}/mlp.onnx", "--spec", s, "--data", "{ws}/data", "-o", "{out}/c.cache"),
        "quantize": lambda s: ("quantize", "{ws}/mlp.onnx", "--precision", "int8", "--cache", "{ws}/int8.cache",
                               "--spec", s, "-o", "{out}/q.onnx"),
        "validate": lambda s: ("validate", "{ws}/mlp.fp16.onnx", "--baseline", "{ws}/mlp.onnx", "--spec", s,
                               "--data", "{ws}/data"),
    }
    for spec, needle in SPEC_NEEDLES.items():
        for command, make in spec_users.items():
            if spec == "exclude-nothing.toml" and command != "quantize":
                continue  # only quantize and build use [quantize] exclude
            cases.append(Case(f"{command}-{spec}", make(f"{{ws}}/{spec}"), (spec if spec != "exclude-nothing.toml" else "--exclude", needle)))
    # A transform that does not work, wherever it runs: validate, and auto's check at the outputs in calibrate
    # and tune (the missing file is refused wherever the spec is read).
    for spec, (file, source, needle) in HOSTILE_TRANSFORMS.items():
        users = {**spec_users, "tune": lambda s: ("tune", "{ws}/mlp.onnx", "--spec", s, "--precision", "int8",
                                                  "--budget-min", "0.05", "-o", "{out}/t.cache")}
        for command, make in users.items():
            if command == "quantize" and source is not None:
                continue  # quantize runs no transform
            cases.append(Case(f"{command}-{spec}", make(f"{{ws}}/{spec}"), (spec if source is None else file, needle),
                              phases=command == "tune"))
    cases.append(Case("calibrate-missing-spec", ("calibrate", "{ws}/mlp.onnx", "--spec", "{ws}/nope.toml", "-o", "{out}/c.cache"),
                      ("nope.toml", "cannot read")))
    cases.append(Case("calibrate-binary-spec", ("calibrate", "{ws}/mlp.onnx", "--spec", "{ws}/binary.onnx", "-o", "{out}/c.cache"),
                      ("binary.onnx", "--spec")))

    # --exclude that matches nothing.
    cases += [
        Case("quantize-exclude-nothing-int8", ("quantize", "{ws}/mlp.onnx", "--precision", "int8", "--cache", "{ws}/int8.cache",
                                               "--exclude", "fc9", "-o", "{out}/q.onnx"), ("--exclude fc9", "matches no node")),
        Case("quantize-exclude-nothing-fp16", ("quantize", "{ws}/mlp.onnx", "--precision", "fp16", "--exclude", "Conv",
                                               "-o", "{out}/q.onnx"), ("--exclude Conv", "matches no node")),
        Case("build-exclude-nothing", ("build", "{ws}/mlp.onnx", "--precision", "fp16", *RTX, "--exclude", "fc9",
                                       "--shapes", "x:1x16/8x16/32x16", "-o", "{out}/engines"), ("--exclude fc9",)),
    ]

    # Data directories that do not hold samples the model takes.
    data_cases = {"nodata": "no .npy, .npz or image files", "missing": "no such directory", "corrupt": "not a readable .npy",
                  "wrongshape": "has shape [4, 15]", "wrongdtype": "complex64", "images": "images need a spec"}
    for directory, needle in data_cases.items():
        cases.append(Case(f"calibrate-data-{directory}", ("calibrate", "{ws}/mlp.onnx", "--data", f"{{ws}}/{directory}",
                                                          "-o", "{out}/c.cache"), (directory, needle)))
    for directory in ("nodata", "corrupt", "wrongshape"):
        cases.append(Case(f"smooth-data-{directory}", ("smooth", "{ws}/mlp.onnx", "--data", f"{{ws}}/{directory}",
                                                       "-o", "{out}/s.onnx"), (directory, data_cases[directory])))
    cases.append(Case("validate-bad-labels", (*validate, "--labels", "{ws}/badlabels.txt"), ("badlabels.txt", "line 1")))
    cases.append(Case("calibrate-no-data", ("calibrate", "{ws}/mlp.onnx", "-o", "{out}/c.cache"), ("--data DIR is needed",)))

    # --shapes, --precision and --target.
    build = ("build", "{ws}/mlp.onnx", *RTX, "-o", "{out}/engines")
    for value, needle in (("x", "NAME:MIN/OPT/MAX"), ("x:1/2", "NAME:MIN/OPT/MAX"), ("x:0x16/1x16/2x16", "dims >= 1"),
                          ("x:4x16/2x16/8x16", "MIN <= OPT <= MAX"), ("x:1x16/2x16/4x16x1", "same rank")):
        cases.append(Case(f"build--shapes={value}", (*build, "--precision", "fp16", "--shapes", value), ("--shapes", needle)))
    cases.append(Case("build--shapes-unknown-input", (*build, "--precision", "fp16", "--shapes", "x:1x16/2x16/4x16",
                                                                 "--shapes", "y:1x16/2x16/4x16"),
                      ("--shapes y", "no such input"), rtx=True))
    cases.append(Case("build--precision=int3", (*build, "--precision", "int3"), ("--precision int3",)))
    cases.append(Case("build-fp8-on-A100", ("build", "{ws}/mlp.onnx", "--precision", "fp8", "--target", "A100",
                                            "--cache", "{ws}/fp8.cache", "-o", "{out}/engines"), ("fp8", "8.9")))
    cases.append(Case("plan--target=sm_xx", ("plan", "--target", "sm_xx"), ("--target sm_xx",)))

    # Engines whose file or sidecar is not what was built.
    engine_edits = {
        "truncated": (_engine_copy(lambda e, s: e.write_bytes(e.read_bytes()[:1000])), "sha256"),
        "appended": (_engine_copy(lambda e, s: e.write_bytes(e.read_bytes() + b"\0")), "sha256"),
        "no-sidecar": (_engine_copy(lambda e, s: s.unlink()), "no sidecar"),
        "sidecar-garbage": (_engine_copy(lambda e, s: s.write_text("{not json")), "not a trtpipe engine sidecar"),
        "sidecar-list": (_engine_copy(lambda e, s: s.write_text("[]")), "not a JSON object"),
        "sidecar-sha-edited": (_edit_sidecar(lambda r: r.update(engine_sha256="0" * 64)), "sha256"),
        "sidecar-precision-type": (_edit_sidecar(lambda r: r.update(precision=8)), "'precision' has the wrong type"),
        "sidecar-unknown-field": (_edit_sidecar(lambda r: r.update(fastest=True)), "unknown field 'fastest'"),
        "sidecar-shape-strings": (_edit_sidecar(lambda r: r["tensors"][0].update(shape=["N", 16])), "not a list of integers"),
        "engine-missing": (_engine_copy(lambda e, s: e.unlink()), "no such"),
        "sidecar-precision-edited": (_edit_sidecar(lambda r: r.update(precision="int8"), reseal=False), "edited after the build"),
        "sidecar-target-edited": (_edit_sidecar(lambda r: r.update(target="sm80", compute_capability="8.0"), reseal=False),
                                  "edited after the build"),
    }
    for name, (setup, needle) in engine_edits.items():
        cases.append(Case(f"inspect-engine-{name}", ("inspect", "{hostile}/mlp.fp16.sm89.engine"), (needle,), setup, rtx=True))
        cases.append(Case(f"validate-engine-{name}", ("validate", "{hostile}/mlp.fp16.sm89.engine", "--baseline", "{ws}/mlp.onnx",
                                                      "--data", "{ws}/data"), (needle,), setup, rtx=True))
        # The other commands that take an engine (session 16: inspect and validate were the only ones tried).
        cases.append(Case(f"bench-engine-{name}", ("bench", "{hostile}/mlp.fp16.sm89.engine"), (needle,), setup, rtx=True))
        cases.append(Case(f"triton-engine-{name}", ("triton", "{hostile}/mlp.fp16.sm89.engine", "-o", "{out}/repo"),
                          (needle,), setup, rtx=True))
        cases.append(Case(f"serve-engine-{name}", ("serve", "{hostile}/mlp.fp16.sm89.engine", "--http-port", "18431", "--grpc-port", "18432",
                                                "--metrics-port", "18433"),
                          (needle,), setup, rtx=True))

    # summary takes validation reports only.
    for name, path in (("cache-sidecar", "{ws}/int8.cache.json"), ("engine-sidecar", f"{{ws}}/{ENGINE}.json"),
                       ("not-a-report", "{ws}/report.json"), ("missing", "{ws}/nope.json"), ("a-cache", "{ws}/int8.cache")):
        needle = "no such file" if name == "missing" else "not a validation report"
        cases.append(Case(f"summary-{name}", ("summary", path), (needle,), rtx=name == "engine-sidecar"))
    cases.append(Case("inspect-a-json", ("inspect", "{ws}/int8.cache.json"), ("a JSON file",)))
    return cases + _issue_26_cases()


def _issue_26_cases() -> list[Case]:
    """The classes of issue 26, each tried on every command it reaches."""
    cases = []
    bench = ("bench", "{ws}/mlp.onnx")
    tune = ("tune", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "--precision", "int8", "-o", "{out}/t.cache")
    serve = ("serve", "{ws}/mlp.onnx")
    triton = ("triton", "{ws}/mlp.fp16.onnx", "-o", "{out}/repo")
    loadtest = ("loadtest", "http://127.0.0.1:9", "--model", "mlp", "--data", "{ws}/data")
    awq = ("awq", "{ws}/mlp.onnx", "--data", "{ws}/data", "-o", "{out}/a.onnx")
    validate = ("validate", "{ws}/mlp.fp16.onnx", "--baseline", "{ws}/mlp.onnx", "--data", "{ws}/data")

    # Numbers that mean nothing: nan and inf (they hung), negatives, zero where it measures nothing.
    numbers = [
        (bench, "--duration-s", ["nan", "inf", "-1"]), (bench, "--warmup-ms", ["nan", "-5"]), (bench, "--iterations", ["0"]),
        (bench, "--batch", ["0", "-2"]),
        (tune, "--budget-min", ["nan", "inf", "0", "-1"]), (tune, "--slack", ["2", "nan"]), (tune, "--confidence", ["1", "nan"]),
        (tune, "--tuning-samples", ["0"]), (tune, "--batch-size", ["0"]),
        (serve, "--threads", ["-3", "0"]), (serve, "--instances", ["0"]), (serve, "--max-batch", ["0"]),
        (serve, "--http-port", ["0", "70000"]), (serve, "--max-queue-delay-us", ["-1"]),
        (triton, "--max-queue-delay-us", ["-1"]), (triton, "--instances", ["0"]), (triton, "--max-batch", ["-4"]),
        (loadtest, "--duration-s", ["nan", "inf", "0"]), (loadtest, "--batch", ["0"]), (loadtest, "--limit", ["0"]),
        (awq, "--tokens", ["8", "nan"]), (awq, "--batch-size", ["0"]),
    ]
    for base, flag, values in numbers:
        for value in values:
            cases.append(Case(f"{base[0]}{flag}={value}", (*base, flag, value), (flag,)))
    cases.append(Case("loadtest--concurrency=0", (*loadtest, "--concurrency", "1,0"), ("--concurrency",)))
    cases.append(Case("validate--threshold-share-above-one", (*validate, "--threshold", "cosine=1.5"),
                      ("--threshold cosine=1.5", "at most 1")))
    cases.append(Case("validate-spec-share-above-one", (*validate[:4], "--spec", "{ws}/share-above-one.toml", "--data", "{ws}/data"),
                      ("share-above-one.toml", "[thresholds.fp16] cosine", "at most 1")))
    for value, needle in (("x:0x16", "at least 1"), ("x:", "NAME:DIMS")):
        cases.append(Case(f"bench--shapes={value}", (*bench, "--shapes", value), ("--shapes",needle)))

    # Outputs that would destroy an input, or a file the command writes beside its output.
    cases += [
        Case("awq-o-is-the-model", ("awq", "{hostile}/model.onnx", "--data", "{ws}/data", "-o", "{hostile}/model.onnx"),
             ("-o", "is also an input"), setup=_output_is_input),
        Case("awq-rtn-o-is-the-model", ("awq", "{hostile}/model.onnx", "--round-to-nearest", "-o", "{hostile}/model.onnx"),
             ("-o", "is also an input"), setup=_output_is_input),
        Case("tune-o-beside-its-spec", ("tune", "{ws}/mlp.onnx", "--spec", "{ws}/x.toml", "--precision", "int8",
                                        "-o", "{ws}/x.cache"), ("-o", "would also write", "x.toml", "is an input")),
        Case("tune-o-is-the-data", ("tune", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "--precision", "int8",
                                    "-o", "{ws}/spec.toml"), ("-o", ".cache")),
        Case("quantize-o-is-its-exclude-file", ("quantize", "{hostile}/model.onnx", "--precision", "fp16",
                                                "--exclude", "@{ws}/x.toml", "-o", "{ws}/x.toml"), ("-o", "is also an input"),
             setup=_output_is_input),
        Case("init-o-is-the-model", ("init", "{hostile}/model.onnx", "--force", "-o", "{hostile}/model.onnx"),
             ("-o", "is also an input"), setup=_output_is_input),
        Case("smooth-o-is-the-spec", ("smooth", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "-o", "{ws}/spec.toml"),
             ("-o", "is also an input")),
        Case("loadtest--plot-is-the-spec", (*loadtest, "--spec", "{ws}/spec.toml", "--plot", "{ws}/spec.toml"),
             ("--plot", "is also an input")),
        Case("validate--report-over-its-spec", (*validate[:4], "--spec", "{hostile}/mlp.fp16.onnx.json", "--data", "{ws}/data",
                                                "--report", "{hostile}"), ("--report", "is also an input"),
             setup=lambda ws, hostile: (hostile / "mlp.fp16.onnx.json").write_text(GOOD_SPEC)),
        Case("loadtest--plot-directory", (*loadtest, "--plot", "{ws}/data"), ("--plot", "is a directory")),
    ]

    # Data no command can use: every failure names the file.
    for command in ("calibrate", "smooth"):
        base = (command, "{ws}/mlp.onnx", "-o", f"{{out}}/{command}.out")
        cases += [
            Case(f"{command}-data-truncated-npz", (*base, "--data", "{ws}/truncnpz"), ("000.npz", "not a readable .npz")),
            Case(f"{command}-data-zero-samples", (*base, "--data", "{ws}/nosamples"), ("000.npy", "holds no samples")),
            Case(f"{command}-data-float64-beside-float32", (*base, "--data", "{ws}/mixed"),
                 ("001.npy", "float64", "000.npy holds float32")),
            Case(f"{command}-decompression-bomb", (*base, "--spec", "{ws}/image-spec.toml", "--data", "{ws}/bomb"),
                 ("000.png", "decompression bomb")),
        ]
    for command, base in (("calibrate", ("calibrate", "{ws}/mlp.onnx", "--spec", "{ws}/image-spec.toml", "-o", "{out}/c.cache")),
                          ("validate", (*validate[:4], "--spec", "{ws}/image-spec.toml")),
                          ("init", ("init", "{ws}/mlp.onnx", "-o", "{out}/s.toml"))):
        for directory, needles in (("heic", ("001.HEIC", "HEIC picture", "convert it to PNG")),
                                   ("animation", ("001.gif", "holds 2 frames")), ("floattiff", ("001.tiff", "32-bit float"))):
            if command == "init" and directory != "heic":
                continue  # init reads one image's size, not its pixels
            cases.append(Case(f"{command}-pictures-{directory}", (*base, "--data", f"{{ws}}/{directory}"), needles))
    layouts = {"calibrate": ("calibrate", "{ws}/mlp.onnx", "-o", "{out}/c.cache"), "validate": validate[:4],
               "init": ("init", "{ws}/mlp.onnx", "-o", "{out}/s.toml"), "smooth": ("smooth", "{ws}/mlp.onnx", "-o", "{out}/s.onnx"),
               "sensitivity": ("sensitivity", "{ws}/mlp.onnx", "--cache", "{ws}/int8.cache"),
               "awq": ("awq", "{ws}/mlp.onnx", "--block-size", "32", "-o", "{out}/a.onnx"),
               "deploy": ("deploy", "{ws}/mlp.onnx", "--target", "sm_89", "-o", "{out}/d")}
    for command, base in layouts.items():
        for directory, needles in (("byclass", ("byclass", "folders cat, dog", "move the samples up")),
                                   ("archived", ("samples.tar.gz", "unpack it")),
                                   ("audio", ("000.wav is audio", ".npy")),
                                   ("data/000.npy", ("000.npy: a file, not a directory", "directory that holds it"))):
            cases.append(Case(f"{command}-data-layout-{directory.replace('/', '-')}", (*base, "--data", f"{{ws}}/{directory}"),
                              needles))
    cases += [
        Case("calibrate-image-past-the-pixel-limit", ("calibrate", "{ws}/mlp.onnx", "--spec", "{ws}/image-spec.toml", "--data",
                                                      "{ws}/bigimage", "-o", "{out}/c.cache"), ("000.png", "decompression bomb")),
        Case("validate-decompression-bomb", (*validate[:4], "--spec", "{ws}/image-spec.toml", "--data", "{ws}/bomb"),
             ("000.png", "decompression bomb")),
        Case("validate-data-zero-samples", (*validate[:4], "--data", "{ws}/nosamples"), ("000.npy", "holds no samples")),
        Case("sensitivity-data-zero-samples", ("sensitivity", "{ws}/mlp.onnx", "--cache", "{ws}/int8.cache", "--data",
                                               "{ws}/nosamples"), ("000.npy", "holds no samples")),
        Case("tune-data-zero-samples", ("tune", "{ws}/mlp.onnx", "--spec", "{ws}/zero-samples.toml", "--precision", "int8",
                                        "--budget-min", "0.05", "-o", "{out}/t.cache"), ("000.npy", "holds no samples"),
             phases=True),
        Case("awq-data-zero-samples", ("awq", "{ws}/mlp.onnx", "--data", "{ws}/nosamples", "--block-size", "32",
                                       "-o", "{out}/a.onnx"),
             ("000.npy", "holds no samples")),
        Case("init-corrupt-npy", ("init", "{ws}/mlp.onnx", "--data", "{ws}/corrupt", "-o", "{out}/s.toml"),
             ("000.npy", "not a readable .npy")),
        Case("init-truncated-npz", ("init", "{ws}/mlp.onnx", "--data", "{ws}/truncnpz", "-o", "{out}/s.toml"),
             ("000.npz", "not a readable .npz")),
        Case("init-images-for-a-vector-model", ("init", "{ws}/mlp.onnx", "--data", "{ws}/images", "-o", "{out}/s.toml"),
             ("--data", "images", "no input")),
        Case("validate-labels-not-utf8", (*validate, "--labels", "{ws}/latin1.txt"), ("--labels", "latin1.txt", "UTF-8")),
        Case("quantize-exclude-file-not-utf8", ("quantize", "{ws}/mlp.onnx", "--precision", "fp16", "--exclude",
                                                "@{ws}/latin1.toml", "-o", "{out}/q.onnx"), ("--exclude @", "UTF-8")),
        Case("summary-deeply-nested-json", ("summary", "{ws}/deep.json"), ("deep.json", "not a validation report")),
    ]

    # Models and runs bench or the low-bit passes cannot take.
    cases += [
        Case("bench-string-input", ("bench", "{ws}/strings.onnx"), ("input 's'", "string")),
        Case("bench-fails-at-run-time", ("bench", "{ws}/fails.onnx"), ("fails.onnx", "failed to run")),
        Case("bench-a-static-zero-dim", ("bench", "{ws}/zerodim.onnx"), ("input 'x'", "[0, 16]")),
        Case("bench-huge-batch", (*bench, "--batch", "100000000000"), ("input 'x'", "GiB", "--batch")),
        Case("quantize-int4-metadata-not-a-number", ("quantize", "{ws}/badmeta.onnx", "--precision", "int4",
                                                     "-o", "{out}/q.onnx"), ("trtpipe.awq.block_size", "'many'")),
        Case("quantize-fp4-with-int8-cache", ("quantize", "{ws}/mlp.onnx", "--precision", "fp4", "--cache", "{ws}/int8.cache",
                                              "-o", "{out}/q.onnx"), ("int8.cache", "not fp4", "fp8")),
        Case("build-fp4-with-int8-cache", ("build", "{ws}/mlp.onnx", "--precision", "fp4", "--target", "sm_120", "--backend",
                                           "tensorrt-rtx", "--cache", "{ws}/int8.cache",
                                           "--shapes", "x:1x16/8x16/32x16", "-o", "{out}/engines"), ("not fp4",)),
    ]

    # A spec value the input cannot hold.
    for spec, needle in (("fraction.toml", "value 2.5"), ("bool-value.toml", "value 2")):
        for command in ("calibrate", "validate"):
            base = (("calibrate", "{ws}/mlp.onnx", "--data", "{ws}/data", "-o", "{out}/c.cache") if command == "calibrate"
                    else validate)
            cases.append(Case(f"{command}-{spec}", (*base, "--spec", f"{{ws}}/{spec}"), (spec, needle)))
    return cases


CASES = _cases()


def test_the_battery_is_big_enough():
    assert len(CASES) >= 250, len(CASES)
    assert len({c.id for c in CASES}) == len(CASES), "case ids are unique"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input(case: Case, workspace, cli, tmp_path):
    uses_build = case.args[0] == "build" and "--backend" in case.args
    if (case.rtx or uses_build) and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    hostile.mkdir()
    if case.setup is not None:
        case.setup(workspace, hostile)
    before_ws, before_hostile = _snapshot(workspace), _snapshot(hostile)
    args = [str(a).format(ws=workspace, out=out, hostile=hostile) for a in case.args]

    code, stdout, stderr = cli(*args)

    assert code == 2, f"exit {code}: {stdout}{stderr}"
    lines = [line for line in stderr.splitlines() if line.strip() and not (case.phases and line.startswith("-- "))]
    assert len(lines) == 1 and lines[0].startswith("trtpipe: error: "), stderr
    for needle in case.needles:
        assert needle in lines[0], f"{needle!r} not in {lines[0]!r}"
    assert _snapshot(workspace) == before_ws, "an input changed"
    assert _snapshot(hostile) == before_hostile, "a hostile input changed"
    left = list(out.rglob("*"))  # a folder made for an output is left behind too
    assert not left, f"left behind: {left}"


if __name__ == "__main__":  # print every case's message, to read them all at once
    import sys
    import tempfile

    from click.testing import CliRunner

    from trtpipe.cli import main
    ws = Path(sys.argv[1])
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            out, hostile = Path(tmp) / "out", Path(tmp) / "hostile"
            out.mkdir()
            hostile.mkdir()
            if case.setup is not None:
                case.setup(ws, hostile)
            result = CliRunner().invoke(main, [str(a).format(ws=ws, out=out, hostile=hostile) for a in case.args])
            print(f"{case.id:45} {result.exit_code} {result.stderr.strip().replace(str(ws), '{ws}').replace(tmp, '{tmp}')}")
