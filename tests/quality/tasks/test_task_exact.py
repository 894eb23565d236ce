"""Integer outputs are what a model decided itself, and are judged by whether the candidate decides the same:
a recognizer that reads its text out in the graph (an ArgMax beside the picked class's probability) changes
its text where the probability beside it barely moves."""

import json

import numpy as np
import pytest

from models import ctc_reader, save, save_batches

INPUTS = '[[inputs]]\nname = "features"\nshape = [-1, 24, 8]\n'


@pytest.fixture(scope="module")
def reader(tmp_path_factory):
    """The FP32 reader, and the FP16 typed ONNX of it and of a copy whose class 3 is a little likelier at every
    step (its probabilities move by less than FP16's minimums allow)."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("reader")
    save(ctc_reader(), root / "reader.onnx")
    save(ctc_reader(favour=0.05), root / "moved.fp32.onnx")
    for source, typed in (("reader.onnx", "honest.onnx"), ("moved.fp32.onnx", "moved.onnx")):
        result = CliRunner().invoke(main, ["quantize", str(root / source), "--precision", "fp16", "-o", str(root / typed)])
        assert result.exit_code == 0, result.output
    save_batches(root / "val", np.random.default_rng(0).normal(0, 1, (64, 24, 8)).astype(np.float32))
    return root


def _validate(cli, root, candidate, spec):
    (root / "model.toml").write_text(spec)
    code, out, err = cli("validate", root / candidate, "--baseline", root / "reader.onnx", "--data", root / "val",
                         "--spec", root / "model.toml", "--json")
    assert code in (0, 1), err
    return code, json.loads(out)


def test_an_argmax_output_is_judged_by_default_and_sees_what_the_probability_beside_it_hides(cli, reader):
    code, report = _validate(cli, reader, "moved.onnx", 'task = "generic"\n' + INPUTS)
    ids, conf = report["outputs"]["ids"], report["outputs"]["conf"]
    assert conf["cosine"] > 0.999 and all(c["passed"] for c in report["checks"] if c["output"] == "conf")
    assert ids["task"] == "exact" and "ArgMax" in ids["why"] and 0 < ids["changed_samples"] == 64 - round(64 * ids["exact_match"])
    assert ids["exact_match"] < 0.99 and ids["element_agreement"] > 0.99  # FP16's minimum; a step in a few hundred
    assert code == 1 and report["decided_by"] == {**report["decided_by"], "output": "ids", "metric": "exact_match", "passed": False}
    assert report["passthrough"] == {}
    code, report = _validate(cli, reader, "honest.onnx", 'task = "generic"\n' + INPUTS)
    assert code == 0 and report["outputs"]["ids"]["exact_match"] == 1.0


def test_the_picked_classes_read_as_a_ctc_sequence_judge_the_text(cli, reader):
    spec = INPUTS + '[[outputs]]\nname = "ids"\ntask = "sequence"\n'  # decode ctc, blank 0
    code, report = _validate(cli, reader, "moved.onnx", spec)
    text = report["outputs"]["ids"]
    assert code == 1 and text["task"] == "sequence" and text["baseline_characters"] > 64 * 5
    assert {c["metric"] for c in report["checks"] if not c["passed"]} <= {"exact_match", "char_agreement"}  # ints are finite
    # a step that moves between a repeat and the blank can keep the string: the text changes no more than the steps
    _, exact = _validate(cli, reader, "moved.onnx", INPUTS + '[[outputs]]\nname = "ids"\ntask = "exact"\n')
    assert exact["outputs"]["ids"]["exact_match"] <= text["exact_match"] < 0.99
    assert list(report["outputs"]) == ["ids"] and list(report["passthrough"]) == []


def test_exact_refuses_a_float_output(cli, reader):
    (reader / "model.toml").write_text(INPUTS + '[[outputs]]\nname = "conf"\ntask = "exact"\n')
    code, _, err = cli("validate", reader / "moved.onnx", "--baseline", reader / "reader.onnx", "--data", reader / "val",
                       "--spec", reader / "model.toml")
    assert code == 2 and "task exact judges integer and bool outputs" in err and "Traceback" not in err


@pytest.mark.parametrize("outputs, needle", [
    ('name = "ids"\ntask = "sequence"\ndecode = "viterbi"\ntransitions = "t.npz"\n', "viterbi decodes scores"),
    ('name = "ids"\ntask = "sequence"\nstep_axis = 2\n', "fix step_axis or batch_axis"),  # ids have no axis 2
    ('name = "conf"\ntask = "sequence"\n', "must hold the class picked at each step"),  # a probability a step
])
def test_picked_classes_a_sequence_cannot_read_are_one_line_exit_2(cli, reader, outputs, needle):
    np.savez(reader / "t.npz", transitions=np.zeros((12, 12)), start=np.zeros(12), end=np.zeros(12))
    (reader / "model.toml").write_text(INPUTS + "[[outputs]]\n" + outputs)
    code, _, err = cli("validate", reader / "moved.onnx", "--baseline", reader / "reader.onnx", "--data", reader / "val",
                       "--spec", reader / "model.toml")
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_ids_an_engine_gives_as_int32_are_compared_by_value(cli, reader):
    """TensorRT gives an ArgMax's indices as INT32 where the ONNX says int64: the same classes agree."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(reader / "honest.onnx"))
    for node in model.graph.node:
        node.output[:] = ["ids64" if o == "ids" else o for o in node.output]
    model.graph.node.append(helper.make_node("Cast", ["ids64"], ["ids"], to=TensorProto.INT32, name="as_int32"))
    next(o for o in model.graph.output if o.name == "ids").type.tensor_type.elem_type = TensorProto.INT32
    save(model, reader / "int32.onnx")
    code, report = _validate(cli, reader, "int32.onnx", 'task = "generic"\n' + INPUTS)
    assert code == 0 and report["outputs"]["ids"]["exact_match"] == 1.0


def test_an_output_of_another_length_is_a_change_and_the_report_draws_the_changed_samples(tmp_path):
    """NonZero's indices: an empty FP32 list and a candidate's list of one are not the same decision."""
    from trtpipe.quality.tasks import make_task
    from trtpipe.spec import OutputSpec

    task = make_task(OutputSpec("found", "exact", batch_axis=None))
    task.update({"found": np.array([1, 2])}, {"found": np.array([1, 2])}, ["b"], {})
    task.update({"found": np.array([3])}, {"found": np.zeros(0, np.int64)}, ["a"], {})
    assert task.summary()["exact_match"] == 0.5 and task.summary()["changed_samples"] == 1
    picture = task.picture()
    assert [(c.sample, c.baseline, c.candidate) for c in picture.changes] == [("a", (), (3,))]
    matplotlib = pytest.importorskip("matplotlib", reason="the report's pictures need matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    drawn = picture.draw(plt, "found")
    text = " ".join(t.get_text() for t in [*drawn.texts, *(t for ax in drawn.axes for t in ax.texts)])
    assert "(1 changed value)" in text and "edit" not in text and "first 1, values" in text
    plt.close(drawn)
