"""`trtpipe init`: a starting spec that loads, with the task guessed from the model's shapes."""

import numpy as np
from onnx import TensorProto, helper

import models
from trtpipe.config import load_spec
from trtpipe.starting_spec import TensorFacts, guess_task, profile_shapes


def facts(*specs):
    return [TensorFacts(name, shape, dtype) for name, shape, dtype in specs]


def test_guesses_each_task_from_shapes():
    image = facts(("image", [-1, 3, 640, 640], "float32"))
    assert guess_task(image, facts(("logits", [-1, 1000], "float32"))).task == "classification"
    assert guess_task(image, facts(("output0", [-1, 84, 8400], "float32"))).task == "detection"
    assert guess_task(image, facts(("map", [-1, 1, 640, 640], "float32"))).task == "dense"
    tokens = facts(("input_ids", [-1, -1], "int64"), ("attention_mask", [-1, -1], "int64"))
    assert guess_task(tokens, facts(("ids", [-1, -1], "int64"), ("emb", [-1, 384], "float32"))).task == "embedding"
    assert guess_task(image, facts(("x", [-1, 7, 7, 7, 7], "float32"))).task == "generic"


def test_profile_takes_dynamic_dims_from_a_sample():
    assert profile_shapes([-1, 3, 224, 224], None) == "1x3x224x224/8x3x224x224/32x3x224x224"
    assert profile_shapes([-1, -1], (128,)) == "1x128/8x128/32x128"
    assert profile_shapes([-1, -1], None) is None


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
    assert spec.shapes == {"input": "1x3x16x16/8x3x16x16/32x3x16x16"}
    assert spec.calibration == data.resolve()


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
    assert '# tokens = "..."' in (tmp_path / "t.toml").read_text()
    assert load_spec(tmp_path / "t.toml").shapes == {}
