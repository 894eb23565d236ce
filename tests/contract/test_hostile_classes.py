"""The second battery's classes that need more than a hostile file in one option's place (session 18).

Each bad case keeps the contract as `test_hostile.check_refused` asserts it: exit 2, one line naming the
file or flag, no input changed, nothing left in the output folder. The classes of single hostile files
and paths are in test_hostile's variant tables, signals other than Ctrl-C in its interrupt test. Here:

- images that decode to something the spec did not expect, through every data option of every command
  (`test_hostile.ROLES`), on a workspace whose model reads images;
- a folder a command made for its output, left behind when it fails;
- an output that is an input's sidecar, or the command's other output;
- tensor names every file trtpipe writes must hold.
"""

from __future__ import annotations

import itertools
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import HAS_RTX
from onnx import TensorProto, helper, numpy_helper

import models
from contract.test_battery import ENGINE
from contract.test_hostile import BASES, NEEDS_RTX, ROLES, check_refused, command_line, run_cli

# ---- images the spec did not expect --------------------------------------------------------------

IMAGE_SPEC = """name = "mlp"
[[inputs]]
name = "x"
shape = [-1, 1, 16, 16]
[preprocess]
size = [16, 16]
color = "L"
scale = 0.0039215686
[data]
calibration = "data"
validation = "data"
"""
IMAGE_SHAPES = "x:1x1x16x16/8x1x16x16/32x1x16x16"


@pytest.fixture(scope="module")
def image_workspace(tmp_path_factory):
    """The workspace's files under their names, for a model that reads 16x16 grey images: a classifier on the
    flattened pixels, its FP16 ONNX, an INT8 cache, a spec with [preprocess], and good PNGs in data/."""
    from PIL import Image

    ws = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    weights = [rng.normal(0, 0.05, (256, 64)), rng.normal(0, 0.3, (64, 8))]
    models.save(models.renamed_input(models.mlp_classifier(weights, [np.zeros(64), np.zeros(8)], (1, 16, 16)), "image", "x"),
                ws / "mlp.onnx")
    (ws / "spec.toml").write_text(IMAGE_SPEC)
    (ws / "data").mkdir()
    for i in range(8):
        Image.fromarray(rng.integers(0, 255, (20, 20), np.uint8)).save(ws / "data" / f"{i:03d}.png")
    for argv in (["calibrate", ws / "mlp.onnx", "--spec", ws / "spec.toml", "-o", ws / "int8.cache"],
                 ["quantize", ws / "mlp.onnx", "--precision", "fp16", "-o", ws / "mlp.fp16.onnx"]):
        code, _out, err, _ = run_cli(argv)
        assert code == 0, err
    return ws


def _image(mode: str, array, **save):
    def make(path: Path) -> None:
        from PIL import Image

        Image.fromarray(array, mode).save(path, **save)
    return make


def _frames(path: Path) -> None:
    from PIL import Image

    first, *others = [Image.new("L", (16, 16), shade) for shade in (0, 128, 255)]
    first.save(path, save_all=True, append_images=others)


def _truncated(path: Path) -> None:
    from PIL import Image

    Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64), np.uint8)).save(path)
    path.write_bytes(path.read_bytes()[:300])


def _bmp_claiming(width: int, height: int):
    """Return a maker of a BMP header claiming `width` x `height` pixels and holding none (a decompression bomb in
    another format than the PNG of issue 26's class)."""
    def make(path: Path) -> None:
        path.write_bytes(b"BM" + struct.pack("<IHHI", 0, 0, 0, 54)
                         + struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 0, 0, 0, 0))
    return make


def _png_of_no_width(path: Path) -> None:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 0, 16, 8, 0, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b""))


# An image whose pixels are not 8 bits a channel ([preprocess] scale says what 0..255 means; Pillow
# clips wider values to 255 when it converts), one of several frames (which is the sample?), or that
# does not decode (init reads the first image for the spec's size, and took its header alone).
IMAGE_VARIANTS = {
    "16-bit": (_image(None, np.arange(256, dtype=np.uint16).reshape(16, 16) * 257), "000.png"),
    "32-bit-integers": (_image("I", np.arange(256, dtype=np.int32).reshape(16, 16) << 20, format="TIFF"), "000.png"),
    "floats": (_image("F", np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16), format="TIFF"), "000.png"),
    "several-frames": (_frames, "000.png"),
    "truncated": (_truncated, "000.png"),
    "no-width": (_png_of_no_width, "000.png"),
    "not-an-image": (lambda p: p.write_bytes(b"a text file named like a picture\n"), "000.jpg"),
    "bomb-in-a-bmp": (_bmp_claiming(100_000, 100_000), "000.bmp"),
}
VARIANT_SAYS = {"16-bit": "8 bits", "32-bit-integers": "8 bits", "floats": "8 bits", "several-frames": "3 frames",
                "bomb-in-a-bmp": "decompression bomb"}
DATA_OPTIONS = sorted((c, p) for (c, p), role in ROLES.items() if role == "data")


@pytest.mark.parametrize("command,param,variant", [(c, p, v) for c, p in DATA_OPTIONS for v in sorted(IMAGE_VARIANTS)],
                         ids=[f"{c}{p}-{v}" for c, p in DATA_OPTIONS for v in sorted(IMAGE_VARIANTS)])
def test_an_image_the_spec_did_not_expect(command, param, variant, image_workspace, tmp_path):
    if command in NEEDS_RTX and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    target = hostile / f"images-{variant}"
    target.mkdir(parents=True)
    make, name = IMAGE_VARIANTS[variant]
    make(target / name)
    values = {k: v.format(ws=image_workspace, out=out, taken=9) for k, v in BASES[command].items()}
    values[param] = str(target)
    if "--shapes" in values:
        values["--shapes"] = IMAGE_SHAPES
    line = check_refused(command_line(command, values), image_workspace, out, hostile, (f"{target.name}/{name}",))
    assert VARIANT_SAYS.get(variant, "") in line, line


# ---- a folder made for an output, when the command fails -------------------------------------------

WRITERS = sorted((c, p) for (c, p), role in ROLES.items() if role in ("output", "outdir") and p in BASES[c])


@pytest.mark.parametrize("command,param", WRITERS, ids=[f"{c}{p}" for c, p in WRITERS])
def test_a_folder_made_for_an_output_goes_when_the_command_fails(command, param, workspace, tmp_path):
    """The output under folders that do not exist yet, and an input the command fails on (samples of NaN, else a
    model that is missing): the folders it made go with its files."""
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    (hostile / "nan").mkdir(parents=True)
    np.save(hostile / "nan" / "000.npy", np.full((4, 16), np.nan, np.float32))
    values = {k: v.format(ws=workspace, out=out, taken=9) for k, v in BASES[command].items()}
    values[param] = str(out / "new" / "deeper" / Path(values[param]).name)
    if "--data" in values:
        values["--data"] = str(hostile / "nan")
    else:
        values[next(k for k in values if not k.startswith("-"))] = str(hostile / "missing.onnx")
    if command in NEEDS_RTX and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    check_refused(command_line(command, values), workspace, out, hostile, ("000.npy", "missing.onnx"))


# ---- an output that is another file of the run -----------------------------------------------------

def _sidecar_copy(workspace: Path, hostile: Path, name: str) -> Path:
    """Copy the workspace's `name` and its sidecar into hostile/; return the copy."""
    shutil.copy(workspace / name, hostile / Path(name).name)
    shutil.copy(workspace / f"{name}.json", hostile / f"{Path(name).name}.json")
    return hostile / Path(name).name


TUNE = ["tune", "{ws}/mlp.onnx", "--spec", "{ws}/spec.toml", "--precision", "int8", "--budget-min", "0.05",
        "-o", "{out}/t.cache"]
# An input's sidecar (what a cache was calibrated for, what an engine was built from) is part of the input;
# one command's two outputs cannot be one path (tune's report folder where its cache or exclusions go).
OTHER_FILES = {
    "quantize-o-is-the-caches-sidecar": (["quantize", "{ws}/mlp.onnx", "--precision", "int8", "--cache", "{hostile}/int8.cache",
                                          "-o", "{hostile}/int8.cache.json"], "int8.cache", "-o"),
    "validate--report-over-the-engines-sidecar": (["validate", f"{{hostile}}/{Path(ENGINE).name}", "--baseline", "{ws}/mlp.onnx",
                                                   "--data", "{ws}/data", "--report", "{hostile}"], ENGINE, "--report"),
    "tune--report-is-its-cache": ([*TUNE, "--report", "{out}/t.cache"], None, "--report"),
    "tune--report-is-its-exclusions": ([*TUNE, "--report", "{out}/t.toml"], None, "--report"),
}


@pytest.mark.parametrize("case", sorted(OTHER_FILES))
def test_an_output_that_is_another_file_of_the_run(case, workspace, tmp_path):
    argv, copied, flag = OTHER_FILES[case]
    if copied == ENGINE and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    hostile.mkdir()
    if copied is not None:
        _sidecar_copy(workspace, hostile, copied)
    check_refused([a.format(ws=workspace, out=out, hostile=hostile) for a in argv], workspace, out, hostile, (flag,))


# ---- tensor names every file trtpipe writes must hold ----------------------------------------------

# Names ONNX allows and TOML, a calibration cache, a report and a Triton config must each quote or escape.
ODD_NAMES = {"x": 'in "q" \\ ü/ sp', "probs": "out#]=[ 'x'", "h2": "a: b:c ", "h0": " lead", "h1": "tab\there",
             "h3": "名前/ü", "h4": "semi;colon,=x"}


def _renamed(names: dict[str, str]):
    model = models.dynamic_mlp()
    for node in model.graph.node:
        node.input[:] = [names.get(i, i) for i in node.input]
        node.output[:] = [names.get(o, o) for o in node.output]
        node.name += ' "node"'
    for value in [*model.graph.input, *model.graph.output]:
        value.name = names.get(value.name, value.name)
    return model


def test_odd_tensor_names_go_through_init_calibrate_quantize_and_validate(tmp_path):
    models.save(_renamed(ODD_NAMES), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (32, 16)).astype(np.float32))
    for argv in (["init", "m.onnx", "--data", "data", "-o", "m.toml"],
                 ["calibrate", "m.onnx", "--spec", "m.toml", "-o", "m.int8.cache"],
                 ["quantize", "m.onnx", "--precision", "int8", "--cache", "m.int8.cache", "--spec", "m.toml",
                  "-o", "m.int8.onnx"],
                 ["validate", "m.int8.onnx", "--baseline", "m.onnx", "--spec", "m.toml", "--report", "reports"]):
        code, out, err, exception = run_cli([tmp_path / a if a.startswith("m.") or a in ("data", "reports") else a
                                             for a in argv])
        assert code == 0, f"{argv[0]}: exit {code} {exception!r}: {out}{err}"
    from trtpipe.calibrators.cache import read_cache

    assert set(read_cache(tmp_path / "m.int8.cache").amax) == {ODD_NAMES["x"], ODD_NAMES["h2"]}


# A name a calibration cache cannot hold: TensorRT's format is one `name: scale` a line.
UNCACHEABLE = {"newline": "a\nb", "carriage-return": "a\rb"}
CALIBRATING = {
    "calibrate": ["calibrate", "{m}", "--data", "{ws}/data", "-o", "{out}/c.cache"],
    "tune": ["tune", "{m}", "--spec", "{spec}", "--data", "{ws}/data", "--validation", "{ws}/data", "--precision", "int8",
             "--budget-min", "0.05", "-o", "{out}/t.cache"],
    "build": ["build", "{m}", "--precision", "int8", "--data", "{ws}/data", "--target", "sm_89", "--backend", "tensorrt-rtx",
              "--shapes", "x:1x16/8x16/32x16", "-o", "{out}/engines"],
    "deploy": ["deploy", "{m}", "--data", "{ws}/data", "--precision", "int8", "--target", "sm_89", "--backend", "tensorrt-rtx",
               "--budget-min", "1", "-o", "{out}/deploy"],
}


def _case_folders(command: str, tmp_path: Path) -> tuple[Path, Path]:
    """Skip `command` where it needs TensorRT-RTX and lacks it; return the case's empty output and hostile folders."""
    if command in NEEDS_RTX and not HAS_RTX:
        pytest.skip("tensorrt-rtx is not installed: pip install 'trtpipe[rtx]'")
    out, hostile = tmp_path / "out", tmp_path / "hostile"
    out.mkdir()
    hostile.mkdir()
    return out, hostile


@pytest.mark.parametrize("command,name", [(c, n) for c in sorted(CALIBRATING) for n in sorted(UNCACHEABLE)])
def test_a_tensor_name_no_calibration_cache_can_hold(command, name, workspace, tmp_path):
    out, hostile = _case_folders(command, tmp_path)
    models.save(_renamed({"h2": UNCACHEABLE[name]}), hostile / "m.onnx")
    (hostile / "m.toml").write_text('name = "m"\n')
    argv = [a.format(m=hostile / "m.onnx", spec=hostile / "m.toml", ws=workspace, out=out) for a in CALIBRATING[command]]
    check_refused(argv, workspace, out, hostile, ("m.onnx",))



# ---- an [[outputs]] key that names another output --------------------------------------------------
# A detector's or face head's spec names the outputs its main output is read with (score_output,
# class_output, score_outputs, box_outputs, scale_output, offset_output, landmark_output); a user who
# names the wrong one gets one line, whichever output of whatever shape it names (session 21: a
# score_output of another count stopped validate with an IndexError's traceback).

def _many_outputs():
    """x [N, 3, 8, 8] to outputs of the shapes heads have: maps of 1, 2 and 10 channels, boxes [N, 32, 4], scores
    [N, 32], int64 labels [N, 32], rows [N, 64, 10] and one value a sample [N]."""
    rng = np.random.default_rng(3)
    n, shape = helper.make_node, lambda name, dims: helper.make_tensor(name, TensorProto.INT64, [len(dims)], dims)
    inits = [models._init("w1", rng.normal(0, 1, (1, 3, 1, 1))), models._init("w2", rng.normal(0, 1, (2, 3, 1, 1))),
             models._init("w10", rng.normal(0, 1, (10, 3, 1, 1))), models._init("three", np.float32(3)),
             shape("to_boxes", [0, 32, 4]), shape("to_rows", [0, -1]), shape("to_seq", [0, 64, 10])]
    nodes = [n("Conv", ["x", "w1"], ["c1"]), n("Sigmoid", ["c1"], ["heat"]), n("Conv", ["x", "w2"], ["map2"]),
             n("Conv", ["x", "w10"], ["map10"]), n("Reshape", ["map2", "to_boxes"], ["boxes"]),
             n("Conv", ["x", "w1"], ["half"], strides=[1, 2]), n("Sigmoid", ["half"], ["half_p"]),
             n("Reshape", ["half_p", "to_rows"], ["scores"]), n("Mul", ["scores", "three"], ["thrice"]),
             n("Floor", ["thrice"], ["floor"]), n("Cast", ["floor"], ["labels"], to=TensorProto.INT64),
             n("Reshape", ["map10", "to_seq"], ["seq"]), n("ReduceMax", ["scores"], ["top"], axes=[1], keepdims=0)]
    outputs = {"heat": [1, 8, 8], "map2": [2, 8, 8], "map10": [10, 8, 8], "boxes": [32, 4], "scores": [32],
               "labels": [32], "seq": [64, 10], "top": []}
    graph = helper.make_graph(nodes, "many_outputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info(name, TensorProto.INT64 if name == "labels" else TensorProto.FLOAT,
                                                             ["N", *dims]) for name, dims in outputs.items()], inits)
    return models._model(graph), list(outputs)


# {main}: the output judged, {ref}: the one a key names (every output in turn)
NAMING = {
    "separate-scores": 'layout = "separate"\nscore_output = "{ref}"\nclass_output = "labels"',
    "separate-classes": 'layout = "separate"\nscore_output = "scores"\nclass_output = "{ref}"',
    "detections-scores": 'layout = "detections"\nscore_output = "{ref}"',
    "detections-classes": 'layout = "detections"\nscore_output = "scores"\nclass_output = "{ref}"',
    "picodet": 'layout = "picodet"\nscore_outputs = ["{ref}"]\nbox_outputs = ["{main}"]',
    "face-scale": 'scale_output = "{ref}"\noffset_output = "map2"\nlandmark_output = "map10"',
    "face-landmarks": 'scale_output = "map2"\noffset_output = "map2"\nlandmark_output = "{ref}"',
}


@pytest.mark.parametrize("case", sorted(NAMING))
def test_a_key_that_names_an_output_of_another_shape(case, tmp_path):
    """Every output judged with every output named by the key, with and without a batch axis: a verdict (exit 0
    or 1) or one line naming an output, never a traceback."""
    model, names = _many_outputs()
    models.save(model, tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (8, 3, 8, 8)).astype(np.float32), per_file=4)
    task = "face" if case.startswith("face") else "detection"
    refused = 0
    for main, ref, batch_axis in itertools.product(names, names, ("", 'batch_axis = "none"\n')):
        keys = NAMING[case].format(main=main, ref=ref)
        spec = (f'name = "m"\n[data]\nvalidation = "data"\n[[outputs]]\nname = "{main}"\ntask = "{task}"\n'
                f"{keys}\n{batch_axis}")
        (tmp_path / "spec.toml").write_text(spec)
        code, _out, err, exception = run_cli(["validate", tmp_path / "m.onnx", "--baseline", tmp_path / "m.onnx",
                                              "--spec", tmp_path / "spec.toml", "--data", tmp_path / "data"])
        lines = [line for line in err.splitlines() if line.strip()]
        crashed = exception is not None and not isinstance(exception, SystemExit)  # exit 1 with a traceback
        assert not crashed and code in (0, 1) or (code == 2 and len(lines) == 1 and lines[0].startswith("trtpipe: error: ")
                                and "output" in lines[0]), \
            f"{spec}\nexit {code} {exception!r}: {err}"
        refused += code == 2
    assert refused, "no spec of the case was refused: the case does not reach the key"


# ---- weights that are not numbers -------------------------------------------------------------------
# A NaN in any weight, or infinity in a layer's, makes every output it reaches not a number whatever the
# data: calibrate blamed the data ("the model cannot run on this data ... check shapes and dtypes"),
# validate the sample, and quantize, smooth and awq wrote a model of garbage with numpy's warning (session 21).

def _with_weight(value: float, layer: bool):
    """The workspace's MLP with `value` in its first layer's weight (`layer`), or in a constant of its own read by a Max."""
    model = models.dynamic_mlp()
    if layer:
        tensor = model.graph.initializer[0]
        weight = numpy_helper.to_array(tensor).copy()
        weight.flat[3] = value
        tensor.CopyFrom(numpy_helper.from_array(weight, tensor.name))
    else:  # Max(x, floor): -inf is an exporter's "no floor", NaN a broken file
        model.graph.initializer.append(models._init("floor", np.full(16, value)))
        model.graph.node.insert(0, helper.make_node("Max", ["x", "floor"], ["x_floored"]))
        model.graph.node[1].input[0] = "x_floored"
    return model


COMPUTING = sorted(c for c in BASES if ROLES.get((c, "model")) == "model" and c not in ("init", "inspect", "bench", "triton"))
BROKEN_WEIGHTS = {"nan-in-a-layer": (np.nan, True), "infinity-in-a-layer": (np.inf, True), "nan-in-a-constant": (np.nan, False)}


@pytest.mark.parametrize("command,case", [(c, w) for c in COMPUTING for w in sorted(BROKEN_WEIGHTS)])
def test_a_weight_that_is_not_a_number(command, case, workspace, tmp_path):
    out, hostile = _case_folders(command, tmp_path)
    models.save(_with_weight(*BROKEN_WEIGHTS[case]), hostile / "broken.onnx")
    values = {k: (v.format(ws=workspace, out=out, taken=0) if v else v) for k, v in BASES[command].items()}
    values["model"] = str(hostile / "broken.onnx")
    line = check_refused(command_line(command, values), workspace, out, hostile, ("weight '",))
    assert "broken.onnx" in line and ("NaN" in line or "infinity" in line), line


def test_minus_infinity_outside_a_layer_is_a_bound_and_calibrates(workspace, tmp_path):
    models.save(_with_weight(-np.inf, False), tmp_path / "floored.onnx")
    code, _out, err, exception = run_cli(["calibrate", tmp_path / "floored.onnx", "--data", workspace / "data",
                                          "-o", tmp_path / "c.cache"])
    assert code == 0, f"{err}{exception!r}"


# ---- inputs that disagree on a dimension the model names on both ------------------------------------
# A signal and its scalogram, both 'T' long (OpenSpindleNet's raw_signal and spectrogram): a file that gave
# them two lengths ran until ONNX Runtime's Concat refused the pair, naming no file, with ONNX Runtime's
# own coloured log line beside trtpipe's (session 24). init read it into a profile of two lengths.

def _read_together(transposed: bool):
    """A model reading `signal` [N, 1, T] (or [N, T, 1], `transposed`) and `bands` [N, 15, T] together."""
    signal = helper.make_tensor_value_info("signal", TensorProto.FLOAT, ["N", "T", 1] if transposed else ["N", 1, "T"])
    bands = helper.make_tensor_value_info("bands", TensorProto.FLOAT, ["N", 15, "T"])
    nodes = [helper.make_node("Transpose", ["signal"], ["along"], perm=[0, 2, 1])] if transposed else []
    nodes += [helper.make_node("Concat", ["along" if transposed else "signal", "bands"], ["both"], axis=1),
              helper.make_node("Conv", ["both", "w"], ["y"], pads=[1, 1])]
    weight = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.3, (4, 16, 3)).astype(np.float32), "w")
    graph = helper.make_graph(nodes, "together", [signal, bands],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, "T"])], [weight])
    return models._model(graph)


READ_TOGETHER = {"calibrate": ["calibrate", "{m}", "--data", "{data}", "-o", "{out}/c.cache"],
                 "init": ["init", "{m}", "--data", "{data}", "-o", "{out}/m.toml"],
                 "validate": ["validate", "{m}", "--baseline", "{m}", "--data", "{data}", "--report", "{out}/r"],
                 "tune": ["tune", "{m}", "--spec", "{spec}", "--data", "{data}", "--validation", "{data}", "--precision", "int8",
                          "--budget-min", "0.05", "-o", "{out}/t.cache"],
                 "deploy": ["deploy", "{m}", "--data", "{data}", "-o", "{out}/deploy", "--target", "sm_89",
                            "--backend", "tensorrt-rtx"]}


@pytest.mark.parametrize("command,transposed", [(c, t) for c in sorted(READ_TOGETHER) for t in (False, True)])
def test_inputs_that_disagree_on_a_dimension_the_model_names_on_both(command, transposed, workspace, tmp_path):
    out, hostile = _case_folders(command, tmp_path)
    models.save(_read_together(transposed), hostile / "m.onnx")
    (hostile / "m.toml").write_text('name = "m"\ntask = "generic"\n')
    (hostile / "data").mkdir()
    rng = np.random.default_rng(1)
    for i, length in enumerate((40, 40, 36, 40)):  # the third file's bands are shorter than its signal
        signal = rng.normal(size=(2, 40, 1) if transposed else (2, 1, 40)).astype(np.float32)
        np.savez(hostile / "data" / f"{i}.npz", signal=signal, bands=rng.normal(size=(2, 15, length)).astype(np.float32))
    argv = [a.format(m=hostile / "m.onnx", spec=hostile / "m.toml", data=hostile / "data", out=out)
            for a in READ_TOGETHER[command]]
    line = check_refused(argv, workspace, out, hostile, ("2.npz",))
    assert "'T'" in line and "'signal'" in line and "'bands'" in line and "40 and 36" in line, line
