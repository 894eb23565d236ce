"""No damaged candidate passes: each task's tiny model, its honest FP16 typed ONNX passing, and the same
candidate damaged in each way a wrong build damages outputs (a channel scaled, offset, zeroed or
permuted; boxes shifted or shrunk; classes swapped; a face dropped; landmarks moved; a character
changed; a constant output; NaN in one sample; the outputs of the wrong samples) fails validation,
decided by the check that sees that damage."""

from __future__ import annotations

from pathlib import Path

import damage as d
import numpy as np
import pytest

import models
from trtpipe.graph import onnxio
from trtpipe.quality.validate import compare, named_thresholds, thresholds_for
from trtpipe.runtime.onnxrt import OnnxRunner
from trtpipe.spec import load_spec, resolve_inputs


def _rng(seed):
    return np.random.default_rng(seed)


# Each family: the model, its validation data, and the [[outputs]] the spec judges it by.
FAMILIES = {
    "classification": (lambda: models.conv_net(batch="N"), lambda: _rng(0).normal(0, 1, (32, 3, 16, 16)),
                       '[[outputs]]\nname = "logits"\ntask = "classification"\n'),
    "yolov8": (lambda: models.yolo_like(), lambda: _rng(3).uniform(0, 1, (32, 3, 64, 64)),
               '[[outputs]]\nname = "output0"\ntask = "detection"\nlayout = "yolov8"\n'),
    "yolov5": (lambda: models.yolo_like(layout="yolov5"), lambda: _rng(3).uniform(0, 1, (32, 3, 64, 64)),
               '[[outputs]]\nname = "output0"\ntask = "detection"\nlayout = "yolov5"\n'),
    "yolox": (lambda: models.yolox_like(), lambda: _rng(3).uniform(0, 1, (32, 3, 64, 64)),
              '[[outputs]]\nname = "output"\ntask = "detection"\nlayout = "yolox"\n'),
    "separate": (lambda: models.separate_boxes(), lambda: _rng(3).uniform(0, 1, (32, 3, 64, 64)),
                 ('[[outputs]]\nname = "boxes"\ntask = "detection"\nlayout = "separate"\nscore_output = "scores"\n'
                  'class_output = "labels"\n')),
    "picodet": (lambda: models.picodet_like(), lambda: _rng(3).uniform(0, 1, (32, 3, 64, 48)),
                ('[[outputs]]\nname = "scores8"\ntask = "detection"\nlayout = "picodet"\nconf = 0.5\niou = 0.5\n'
                 'score_outputs = ["scores8", "scores16"]\nbox_outputs = ["boxes8", "boxes16"]\n')),
    "heatmap": (lambda: models.face_head(), lambda: models.face_images(),
                ('[[outputs]]\nname = "heatmap"\ntask = "detection"\nlayout = "heatmap"\nthreshold = 0.5\n'
                 'min_area = 1\nconf = 0.5\n')),
    "mask": (lambda: models.face_head(), lambda: models.face_images(),
             '[[outputs]]\nname = "heatmap"\ntask = "dense"\n'),
    "classes_map": (lambda: models.face_head(), lambda: models.face_images(),
                    '[[outputs]]\nname = "landmarks"\ntask = "dense"\n'),
    "embedding": (lambda: models.mlp(batch="N"), lambda: _rng(1).normal(0, 1, (32, 16)),
                  '[[outputs]]\nname = "probs"\ntask = "embedding"\n'),
    "sequence": (lambda: models.ctc_head(), lambda: _rng(0).normal(0, 1, (32, 24, 8)),
                 '[[outputs]]\nname = "probs"\ntask = "sequence"\n'),
    "generic": (lambda: models.face_head(), lambda: models.face_images(),
                '[[outputs]]\nname = "landmarks"\ntask = "generic"\n'),
    "face": (lambda: models.face_head(), lambda: models.face_images(),
             ('[[outputs]]\nname = "heatmap"\ntask = "face"\nscale_output = "scale"\noffset_output = "offset"\n'
              'landmark_output = "landmarks"\n')),
}
BOXES = {"yolov8": (slice(0, 2), slice(2, 4), slice(4, None), 1), "yolov5": (slice(0, 2), slice(2, 4), slice(5, None), 2)}

# (family, damage, the damage, the checks any of which must fail)
CASES = [
    ("classification", "classes swapped", d.permuted("logits", slice(0, 4)), {"top1_agreement"}),
    ("classification", "a logit scaled", d.scaled("logits", 3, 0.2), {"cosine", "top1_agreement"}),
    ("classification", "a logit offset", d.offset("logits", 3, 1.0), {"cosine", "top1_agreement"}),
    ("classification", "a logit zeroed", d.zeroed("logits", 3), {"cosine", "top1_agreement"}),
    ("classification", "constant", d.constant("logits"), {"top1_agreement", "cosine"}),
    ("classification", "NaN in one sample", d.nan_in_one_sample("logits"), {"finite"}),
    ("classification", "batch rolled", d.rolled("logits"), {"top1_agreement", "cosine"}),
    *[case for layout, (centre, size, classes, axis) in BOXES.items() for case in [
        (layout, "boxes shifted 3 px", d.offset("output0", centre, 3.0, axis), {"box_iou"}),
        (layout, "boxes shrunk to 0.8", d.scaled("output0", size, 0.8, axis), {"box_iou"}),
        (layout, "box width zeroed", d.zeroed("output0", 2, axis), {"map50", "f1"}),
        (layout, "classes swapped", d.permuted("output0", classes, axis), {"map50", "f1"}),
        (layout, "class scores x0.2", d.scaled("output0", classes, 0.2, axis), {"f1"}),
        (layout, "constant", d.constant("output0"), {"map50", "f1"}),
        (layout, "NaN in one sample", d.nan_in_one_sample("output0"), {"finite"}),
        (layout, "batch rolled", d.rolled("output0"), {"map50", "f1"}),
    ]],
    ("yolox", "boxes shifted 0.4 cell", d.offset("output", slice(0, 2), 0.4, 2), {"box_iou"}),
    ("yolox", "boxes shrunk to 0.8", d.offset("output", slice(2, 4), float(np.log(0.8)), 2), {"box_iou"}),
    ("yolox", "classes swapped", d.permuted("output", slice(5, None), 2), {"map50", "f1"}),
    ("yolox", "objectness x0.2", d.scaled("output", 4, 0.2, 2), {"f1"}),
    ("yolox", "NaN in one sample", d.nan_in_one_sample("output"), {"finite"}),
    ("yolox", "batch rolled", d.rolled("output"), {"map50", "f1"}),
    ("separate", "boxes shifted 3 px", d.offset("boxes", slice(0, 4), 3.0, 2), {"box_iou"}),
    ("separate", "boxes shrunk", d.offset("boxes", slice(2, 4), -1.5, 2), {"box_iou"}),
    ("separate", "classes swapped", d.relabelled("labels", 18), {"map50", "f1"}),
    ("separate", "scores x0.2", d.scaled("scores", slice(None), 0.2), {"f1"}),
    ("separate", "constant", d.constant("boxes"), {"map50", "f1"}),
    ("separate", "NaN in one sample", d.nan_in_one_sample("scores"), {"finite"}),
    ("separate", "batch rolled", d.rolled("boxes"), {"map50", "f1"}),
    ("picodet", "boxes shifted a stride", d.together(d.sides_moved("boxes8", 8, [0], 1), d.sides_moved("boxes8", 8, [2], -1),
                                                     d.sides_moved("boxes16", 8, [0], 1), d.sides_moved("boxes16", 8, [2], -1)),
     {"box_iou", "map50"}),
    ("picodet", "boxes shrunk", d.together(d.sides_moved("boxes8", 8, [0, 1, 2, 3], -1),
                                           d.sides_moved("boxes16", 8, [0, 1, 2, 3], -1)), {"box_iou", "map50"}),
    ("picodet", "a class dropped", d.together(d.zeroed("scores8", 0, 2), d.zeroed("scores16", 0, 2)), {"recall", "map50", "f1"}),
    ("picodet", "classes swapped", d.together(d.permuted("scores8", slice(None), 2), d.permuted("scores16", slice(None), 2)),
     {"map50", "f1"}),
    ("picodet", "NaN in one sample", d.nan_in_one_sample("boxes16"), {"finite"}),
    ("picodet", "batch rolled", d.rolled("scores8"), {"map50", "f1"}),
    ("heatmap", "a region dropped", d.one_face_zeroed("heatmap"), {"recall"}),
    # the regions stay where they were (each map is read relative to its own range); their peaks fall under conf
    ("heatmap", "peaks scaled x0.4", d.scaled("heatmap", 0, 0.4), {"recall"}),
    ("heatmap", "NaN in one sample", d.nan_in_one_sample("heatmap"), {"finite"}),
    ("heatmap", "batch rolled", d.rolled("heatmap"), {"recall", "precision"}),
    ("mask", "map scaled", d.scaled("heatmap", 0, 0.5), {"iou", "pixel_agreement"}),
    ("mask", "map offset", d.offset("heatmap", 0, 0.5), {"iou", "pixel_agreement"}),
    ("mask", "map zeroed", d.zeroed("heatmap", 0), {"iou", "pixel_agreement"}),
    ("mask", "NaN in one sample", d.nan_in_one_sample("heatmap"), {"finite"}),
    ("mask", "batch rolled", d.rolled("heatmap"), {"iou", "pixel_agreement"}),
    ("classes_map", "classes swapped", d.permuted("landmarks", slice(0, 10)), {"iou", "pixel_agreement"}),
    ("classes_map", "a class zeroed", d.zeroed("landmarks", 2), {"iou", "pixel_agreement"}),
    ("classes_map", "constant", d.constant("landmarks"), {"iou", "pixel_agreement"}),
    ("embedding", "dimensions permuted", d.permuted("probs", slice(0, 8)), {"cosine", "neighbour_agreement", "nearest_agreement"}),
    ("embedding", "a dimension scaled", d.scaled("probs", 2, 0.2), {"cosine", "neighbour_agreement", "nearest_agreement"}),
    ("embedding", "a dimension offset", d.offset("probs", 2, 0.3), {"cosine", "neighbour_agreement", "nearest_agreement"}),
    ("embedding", "constant", d.constant("probs"), {"cosine", "neighbour_agreement", "nearest_agreement"}),
    ("embedding", "NaN in one sample", d.nan_in_one_sample("probs"), {"finite"}),
    ("embedding", "batch rolled", d.rolled("probs"), {"cosine", "neighbour_agreement", "nearest_agreement"}),
    ("sequence", "a character changed", d.one_step_changed("probs"), {"exact_match"}),
    ("sequence", "a class scaled", d.scaled("probs", 3, 3.0, 2), {"exact_match", "char_agreement"}),
    ("sequence", "classes swapped", d.permuted("probs", slice(1, 12), 2), {"exact_match", "char_agreement"}),
    ("sequence", "constant", d.constant("probs"), {"exact_match", "char_agreement"}),
    ("sequence", "NaN in one sample", d.nan_in_one_sample("probs"), {"finite"}),
    ("sequence", "batch rolled", d.rolled("probs"), {"exact_match", "char_agreement"}),
    ("generic", "a channel scaled", d.scaled("landmarks", 4, 0.5), {"channel_snr_db_min"}),
    ("generic", "a channel offset", d.offset("landmarks", 4, 0.2), {"channel_snr_db_min", "channel_cosine_min"}),
    ("generic", "a channel zeroed", d.zeroed("landmarks", 4), {"channel_snr_db_min", "channel_cosine_min"}),
    ("generic", "channels permuted", d.permuted("landmarks", slice(0, 10)), {"channel_cosine_min", "cosine"}),
    ("generic", "constant", d.constant("landmarks"), {"cosine", "channel_cosine_min"}),
    ("generic", "NaN in one sample", d.nan_in_one_sample("landmarks"), {"finite"}),
    ("generic", "batch rolled", d.rolled("landmarks"), {"cosine", "channel_cosine_min"}),
    ("face", "a face dropped", d.one_face_zeroed("heatmap"), {"face_recall"}),
    ("face", "landmarks moved", d.offset("landmarks", slice(0, 10), 0.05), {"landmark_agreement"}),
    ("face", "boxes shifted half a cell", d.offset("offset", slice(0, 2), 0.5), {"box_iou", "face_recall"}),
    ("face", "boxes shrunk to 0.8", d.offset("scale", slice(0, 2), float(np.log(0.8))), {"box_iou"}),
    # this head's heatmap is ~0 or ~1: x0.6 keeps every face (and passes), x0.4 loses them
    ("face", "a landmark channel zeroed", d.zeroed("landmarks", 3), {"landmark_agreement"}),
    ("face", "box scales permuted", d.permuted("scale", slice(0, 2)), {"box_iou"}),
    ("face", "heatmap scaled", d.scaled("heatmap", 0, 0.4), {"face_recall"}),
    ("face", "NaN in one sample", d.nan_in_one_sample("landmarks"), {"finite"}),
    ("face", "batch rolled", d.rolled("heatmap"), {"face_recall", "face_precision"}),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Return a function giving each family's (FP32 path, FP16 path, data dir, spec), made once."""
    from click.testing import CliRunner

    from trtpipe.cli import main

    root, made = tmp_path_factory.mktemp("damaged"), {}

    def family(name: str):
        if name not in made:
            model, data, outputs = FAMILIES[name]
            where = root / name
            where.mkdir()
            models.save(model(), where / "fp32.onnx")
            models.save_batches(where / "val", np.asarray(data(), np.float32))
            (where / "model.toml").write_text(outputs)
            result = CliRunner().invoke(main, ["quantize", str(where / "fp32.onnx"), "--precision", "fp16",
                                               "-o", str(where / "fp16.onnx")])
            assert result.exit_code == 0, result.output
            made[name] = where
        return made[name]

    return family


def _report(where: Path, damage=None, precision: str = "fp16"):
    spec = resolve_inputs(load_spec(where / "model.toml"), onnxio.load(where / "fp32.onnx"), where / "fp32.onnx")
    with OnnxRunner(where / "fp16.onnx") as candidate, OnnxRunner(where / "fp32.onnx") as baseline:
        runner = d.DamagedRunner(candidate, damage) if damage is not None else candidate
        return compare(runner, baseline, spec, where / "val", precision, thresholds=thresholds_for(precision, spec),
                       show_progress=False, named=named_thresholds(precision, spec))


@pytest.mark.parametrize("family", FAMILIES)
def test_the_honest_fp16_candidate_passes(built, family):
    report = _report(built(family))
    assert report.passed, [c for c in report.checks if not c.passed]


@pytest.mark.parametrize("family, output", [("generic", "landmarks"), ("embedding", "probs")])
def test_one_ruined_sample_fails_on_its_own_cosine_and_is_named(built, family, output):
    """Judged by INT8's minimums, the mean over 32 samples (0.997) hides one turned to cosine 0.9: that sample's
    cosine fails alone, and the report names it."""
    report = _report(built(family), d.one_sample_turned(output), "int8")
    failed = {c.metric for c in report.checks if not c.passed}
    measured = report.outputs[output]
    assert failed == {"cosine_min"} and measured["cosine"] > 0.99 and measured["cosine_min"] == pytest.approx(0.9, abs=1e-3)
    assert measured["worst_sample"] == "000.npy[3]"


@pytest.mark.parametrize("family, what, damage, expected", CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_a_damaged_candidate_fails_on_the_check_that_sees_it(built, family, what, damage, expected):
    report = _report(built(family), damage)
    failed = {c.metric for c in report.checks if not c.passed}
    assert not report.passed and failed & expected, f"{what}: failed {failed or 'nothing'}, expected one of {expected}"
