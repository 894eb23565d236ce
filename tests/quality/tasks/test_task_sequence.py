"""Sequences are judged by the strings they decode to (CTC greedy: argmax per step, repeats collapsed,
blank dropped); an output without a batch axis is one sample per run."""

import json

import numpy as np
import onnx
import pytest
from damage import favour_class

from models import ctc_head, save, save_batches, tagger, unbatched
from trtpipe.errors import TrtpipeError
from trtpipe.quality.tasks import make_task
from trtpipe.quality.tasks.sequence import ctc_greedy, edit_distance, kept, viterbi
from trtpipe.quality.validate import DEFAULT_THRESHOLDS, judge
from trtpipe.spec import NO_BLANK, OutputSpec, load_spec
from trtpipe.spec.load import Transitions

SPEC = '[[outputs]]\nname = "probs"\ntask = "sequence"\n'


def test_ctc_greedy_collapses_repeats_then_drops_the_blank():
    steps = np.array([[1, 1, 0, 1, 2, 2, 0, 0, 3]])  # the best class per step
    assert ctc_greedy(steps, blank=0) == [(1, 1, 2, 3)]  # the blank between the 1s keeps both
    assert ctc_greedy(steps, blank=2) == [(1, 0, 1, 0, 3)]
    assert edit_distance((1, 2, 3), (1, 3)) == 1 and edit_distance((), (4, 4)) == 2 and edit_distance((5,), (5,)) == 0


def test_tags_keep_every_step_and_drop_only_the_padding():
    steps = np.array([[1, 1, 2, 3, 3, 3, 0, 0]])  # B I I / E E E, then padding
    assert kept(steps, blank=0) == [(1, 1, 2, 3, 3, 3)]
    assert ctc_greedy(steps, blank=0) == [(1, 2, 3)]  # CTC would hide where a morpheme ends


def test_a_tagger_without_a_padding_class_keeps_every_tag(tmp_path):
    """khmersm's B/I tags are both real (a mask input marks padding): blank = "none" drops neither."""
    steps = np.eye(2)[[[0, 1, 1, 0, 1, 0, 0]]]  # three words: B I I / B I / B / B
    (tmp_path / "model.toml").write_text('[[outputs]]\nname = "emissions"\ntask = "sequence"\nblank = "none"\n'
                                         'decode = "tags"\n')
    spec = load_spec(tmp_path / "model.toml").outputs[0]
    assert spec.blank == NO_BLANK and kept(steps.argmax(-1), spec.blank) == [(0, 1, 1, 0, 1, 0, 0)]
    task = make_task(spec)
    moved = np.eye(2)[[[0, 1, 0, 0, 1, 0, 0]]]  # the first word split in two
    task.update({"emissions": moved}, {"emissions": steps}, ["p0"], {})
    outputs, _checks = judge([task], "fp16", DEFAULT_THRESHOLDS["fp16"])
    assert outputs["emissions"]["changed_sequences"] == 1 and outputs["emissions"]["baseline_characters"] == 7
    with pytest.raises(TrtpipeError, match='needs decode = "tags"'):
        make_task(OutputSpec("probs", "sequence", blank=NO_BLANK))


def test_a_tagger_whose_boundary_moves_by_one_character_fails_only_as_tags():
    """A root one character longer (I I E -> I I I E with the ending shortened) is the same CTC string."""
    def word(root: int, moved: bool) -> list[int]:  # B, root x I, E, two ending tags, padding to 10
        tags = [1] + [2] * (root + moved) + [3] + [4] * (2 - moved)
        return tags + [0] * (10 - len(tags))

    baseline = np.eye(5)[[word(2 + i % 4, False) for i in range(50)]]
    candidate = np.eye(5)[[word(2 + i % 4, i < 5) for i in range(50)]]
    for decode, changed in (("ctc", 0), ("tags", 5)):
        task = make_task(OutputSpec("tags", "sequence", decode=decode))
        task.update({"tags": candidate}, {"tags": baseline}, [f"w{i}" for i in range(50)], {})
        outputs, _checks = judge([task], "int8", DEFAULT_THRESHOLDS["int8"])
        assert outputs["tags"]["changed_sequences"] == changed, decode
        assert task.described()["decode"] == decode


def test_the_captcha_case_fails_at_the_default_minimum():
    """INT8 changed 6.2% of a CTC captcha recognizer's strings and passed; at exact_match >= 0.98 it fails."""
    rng = np.random.default_rng(0)
    baseline = np.eye(12)[rng.integers(0, 12, (500, 24))]
    candidate = baseline.copy()
    changed = rng.choice(500, 31, replace=False)  # 6.2%
    candidate[changed, 5] = np.roll(candidate[changed, 5], 1, axis=-1)
    task = make_task(OutputSpec("probs", "sequence"))
    for lo in range(0, 500, 100):
        ids = [f"s{i}" for i in range(lo, lo + 100)]
        task.update({"probs": candidate[lo:lo + 100]}, {"probs": baseline[lo:lo + 100]}, ids, {})
    outputs, checks = judge([task], "int8", DEFAULT_THRESHOLDS["int8"])
    exact = next(c for c in checks if c.metric == "exact_match")
    assert not exact.passed and exact.value == pytest.approx(1 - outputs["probs"]["changed_sequences"] / 500)
    assert outputs["probs"]["changed_sequences"] <= 31 and exact.value < 0.95  # a roll can leave a blank step blank


@pytest.fixture(scope="module")
def recognizer(tmp_path_factory):
    from click.testing import CliRunner

    from trtpipe.cli import main

    root = tmp_path_factory.mktemp("ctc")
    save(ctc_head(), root / "ctc.onnx")
    rng = np.random.default_rng(0)
    save_batches(root / "val", rng.normal(0, 1, (64, 24, 8)).astype(np.float32))
    (root / "model.toml").write_text(SPEC)
    result = CliRunner().invoke(main, ["quantize", str(root / "ctc.onnx"), "--precision", "fp16", "-o", str(root / "ctc.fp16.onnx")])
    assert result.exit_code == 0, result.output
    return root


def _validate(cli, root, candidate, *args):
    code, out, err = cli("validate", candidate, "--baseline", root / "ctc.onnx", "--data", root / "val",
                         "--spec", root / "model.toml", "--json", *args)
    assert code in (0, 1), err
    return code, json.loads(out)


def test_honest_fp16_reads_the_same_strings(cli, recognizer):
    code, report = _validate(cli, recognizer, recognizer / "ctc.fp16.onnx", "--report", recognizer / "reports")
    probs = report["outputs"]["probs"]
    assert code == 0 and probs["task"] == "sequence" and probs["exact_match"] == 1.0 and probs["baseline_characters"] > 64 * 10
    assert {"exact_match", "char_agreement"} <= {c["metric"] for c in report["checks"]}


def test_a_class_favoured_by_a_little_changes_strings_and_fails(cli, recognizer):
    damaged = favour_class(onnx.load(str(recognizer / "ctc.fp16.onnx")), "probs", 3, 0.1, 12)
    save(damaged, recognizer / "ctc.damaged.onnx")
    code, report = _validate(cli, recognizer, recognizer / "ctc.damaged.onnx")
    probs = report["outputs"]["probs"]
    assert code == 1 and probs["exact_match"] < 0.98 and probs["changed_sequences"] > 1
    assert "exact_match" in {c["metric"] for c in report["checks"] if not c["passed"]}


def test_an_output_without_a_batch_axis_is_one_sample_per_run(tmp_path, cli):
    save(unbatched(), tmp_path / "seg.onnx")
    code, _, err = cli("quantize", tmp_path / "seg.onnx", "--precision", "fp16", "-o", tmp_path / "seg.fp16.onnx")
    assert code == 0, err
    (tmp_path / "val").mkdir()
    for i, sample in enumerate(np.random.default_rng(0).normal(0, 2, (8, 16)).astype(np.float32)):
        np.save(tmp_path / "val" / f"{i}.npy", sample)
    inputs = '[[inputs]]\nname = "chars"\nshape = [16]\nbatched = false\n'
    for batch_axis, samples in (("", 8 * 16), ('batch_axis = "none"\n', 8)):
        (tmp_path / "model.toml").write_text(f'{inputs}[[outputs]]\nname = "boundaries"\n{batch_axis}')
        code, out, err = cli("validate", tmp_path / "seg.fp16.onnx", "--baseline", tmp_path / "seg.onnx", "--data", tmp_path / "val",
                             "--spec", tmp_path / "model.toml", "--batch-size", 1, "--json")
        assert code in (0, 1), err
        # read on axis 0, each run's 16 values were 16 samples of one value; without a batch axis, one sample per run
        assert json.loads(out)["outputs"]["boundaries"]["samples"] == samples


def test_samples_of_their_own_lengths_are_judged_one_run_each(tmp_path, cli):
    """A model whose batch is fixed at 1 and whose length follows its input (khmersm: one phrase a run):
    each sample is its own file and its own length, and no two runs' outputs have one shape."""
    save(ctc_head(steps="T"), tmp_path / "ctc.onnx")
    code, _, err = cli("quantize", tmp_path / "ctc.onnx", "--precision", "fp16", "-o", tmp_path / "ctc.fp16.onnx")
    assert code == 0, err
    (tmp_path / "val").mkdir()
    rng = np.random.default_rng(0)
    lengths = [5, 17, 9, 30, 12, 21]
    for i, steps in enumerate(lengths):
        np.save(tmp_path / "val" / f"{i}.npy", rng.normal(0, 1, (1, steps, 8)).astype(np.float32))
    (tmp_path / "model.toml").write_text('[[inputs]]\nname = "features"\nshape = [1, -1, 8]\n' + SPEC)
    code, out, err = cli("validate", tmp_path / "ctc.fp16.onnx", "--baseline", tmp_path / "ctc.onnx", "--data",
                         tmp_path / "val", "--spec", tmp_path / "model.toml", "--json")
    assert code == 0, err
    probs = json.loads(out)["outputs"]["probs"]
    assert probs["samples"] == len(lengths) and probs["exact_match"] == 1.0
    assert len(lengths) * 2 < probs["baseline_characters"] <= sum(lengths)


TAGGER_SPEC = ('[[inputs]]\nname = "ids"\nshape = [-1, -1]\ndtype = "int32"\n'
               '[[outputs]]\nname = "tags"\ntask = "sequence"\ndecode = "tags"\nblank = "none"\n')


def _tagger_table(rng, padding_tag: int) -> np.ndarray:
    """Return a tagger's [9 ids, 4 tags] logits: each real id one clear tag, id 0 (padding) `padding_tag`."""
    table = rng.normal(0, 0.3, (9, 4))
    table[np.arange(1, 9), rng.integers(0, 4, 8)] += 4
    table[0] = 0
    table[0, padding_tag] = 1
    return table


def _validated_tags(cli, folder, candidate: str, keys: str):
    """Validate `candidate`.onnx against fp32.onnx on val/ with TAGGER_SPEC and `keys`; return the exit code and the
    report of the tags output."""
    (folder / "model.toml").write_text(TAGGER_SPEC + keys)
    code, out, err = cli("validate", folder / f"{candidate}.onnx", "--baseline", folder / "fp32.onnx",
                         "--data", folder / "val", "--spec", folder / "model.toml", "--json")
    assert code in (0, 1), err
    return code, json.loads(out)["outputs"]["tags"]


def test_a_tagger_is_judged_on_its_real_steps_only(tmp_path, cli):
    """slovorez: candidates that differ only in what they emit after the word pass with padding_input, and
    fail without it; one real id tagged otherwise fails either way."""
    rng = np.random.default_rng(3)
    table = _tagger_table(rng, padding_tag=1)
    save(tagger(table), tmp_path / "fp32.onnx")
    save(tagger(_tagger_table(np.random.default_rng(3), padding_tag=2)), tmp_path / "padding.onnx")
    damaged = table.copy()
    damaged[5] = np.roll(damaged[5], 1)  # id 5's tag changes: a real step
    save(tagger(damaged), tmp_path / "damaged.onnx")
    lengths = rng.integers(3, 12, 64)
    ids = np.where(np.arange(16) < lengths[:, None], rng.integers(1, 9, (64, 16)), 0).astype(np.int32)
    assert (ids == 5).any(axis=1).mean() > 0.3 and (ids == 0).any(axis=1).all()
    save_batches(tmp_path / "val", ids)

    def judged(candidate, keys):
        return _validated_tags(cli, tmp_path, candidate, keys)

    padding = 'padding_input = "ids"\npadding_value = 0\n'
    code, tags_out = judged("padding", padding)
    assert code == 0 and tags_out["exact_match"] == 1.0 and tags_out["baseline_characters"] == lengths.sum()
    assert tags_out["padding_input"] == "ids"
    code, tags_out = judged("padding", "")
    assert code == 1 and tags_out["exact_match"] == 0.0  # every sample has padding, all of it tagged otherwise
    code, tags_out = judged("damaged", padding)
    assert code == 1 and tags_out["exact_match"] < 0.7 and tags_out["changed_sequences"] == (ids == 5).any(axis=1).sum()


def test_a_masked_language_model_is_judged_at_its_mask_id_alone(tmp_path, cli):
    """g2p-id-bert: the package reads the class at the masked steps (id 8 here) alone. A candidate that tags every
    other id otherwise passes with judged_value and fails without it; one that changes the mask's tag fails."""
    rng = np.random.default_rng(5)
    table = _tagger_table(rng, padding_tag=1)
    save(tagger(table), tmp_path / "fp32.onnx")
    others = table.copy()
    others[1:8] = np.roll(others[1:8], 1, axis=1)  # every id but the mask (8) tagged otherwise
    save(tagger(others), tmp_path / "others.onnx")
    masked = table.copy()
    masked[8] = np.roll(masked[8], 1)
    save(tagger(masked), tmp_path / "masked.onnx")
    ids = rng.integers(1, 8, (64, 16)).astype(np.int32)
    ids[:60, 0] = 8  # every word but the last four has a masked letter; those four no reader reads
    save_batches(tmp_path / "val", ids)

    def judged(candidate, keys):
        return _validated_tags(cli, tmp_path, candidate, keys)

    at_mask = 'padding_input = "ids"\njudged_value = 8\n'
    code, tags_out = judged("others", at_mask)
    assert code == 0 and tags_out["baseline_characters"] == (ids == 8).sum() and tags_out["judged_value"] == "8"
    assert tags_out["unjudged_samples"] == 4 and tags_out["changed_sequences"] == 0
    assert judged("others", "")[0] == 1
    code, tags_out = judged("masked", at_mask)
    assert code == 1 and tags_out["exact_match"] == 0.0
    (tmp_path / "model.toml").write_text(TAGGER_SPEC + 'padding_input = "ids"\njudged_value = 30\n')  # no such id
    code, _out, err = cli("validate", tmp_path / "others.onnx", "--baseline", tmp_path / "fp32.onnx", "--data",
                          tmp_path / "val", "--spec", tmp_path / "model.toml")
    assert code == 2 and "never holds judged_value 30" in err and "Traceback" not in err


@pytest.mark.parametrize("padding, message", [
    ('padding_input = "idz"\n', "'idz' is not an input"),
    ('judged_value = 30\n', "judged_value without padding_input"),
    ('padding_input = "ids"\npadding_value = 0\njudged_value = 30\n', "give one of them"),
    ('padding_input = "ids"\njudged_value = 30\ndecode = "viterbi"\ntransitions = "t.npy"\n', "viterbi's best path"),
    ('padding_input = "ids"\ndecode = "ctc"\n', 'is for a tagger'),
    ('padding_value = 0\n', "padding_value without padding_input"),
])
def test_a_padding_input_that_cannot_mark_the_steps_is_refused_at_load(tmp_path, padding, message):
    spec = TAGGER_SPEC.replace('decode = "tags"\n', "" if "decode" in padding else 'decode = "tags"\n')
    (tmp_path / "model.toml").write_text(spec + padding)
    with pytest.raises(TrtpipeError, match=message):
        load_spec(tmp_path / "model.toml")


def test_a_float_padding_input_is_refused_and_a_mask_needs_no_value(tmp_path):
    (tmp_path / "model.toml").write_text(TAGGER_SPEC.replace("int32", "float32") + 'padding_input = "ids"\n')
    with pytest.raises(TrtpipeError, match="is float32"):
        load_spec(tmp_path / "model.toml")
    for key in ("padding_value", "judged_value"):
        (tmp_path / "model.toml").write_text(TAGGER_SPEC.replace("int32", "bool") + f'padding_input = "ids"\n{key} = 0\n')
        with pytest.raises(TrtpipeError, match=f"remove {key}"):
            load_spec(tmp_path / "model.toml")


def test_a_mask_marks_the_padding_where_it_is_false():
    steps = np.eye(3)[[[1, 2, 1, 2], [2, 2, 1, 1]]]
    mask = np.array([[True, True, False, False], [True, True, True, False]])
    assert kept(steps.argmax(-1), NO_BLANK, mask) == [(1, 2), (2, 2, 1)]


def test_viterbi_takes_the_best_allowed_path_where_argmax_does_not():
    """Two tags, B (0) and I (1), I never after I: the argmax path B I I is not allowed, and the best
    allowed path, summed by hand, is another one than argmax's on every step."""
    no = -np.inf
    transitions = Transitions(np.array([[0.0, 0.0], [0.0, no]]), np.zeros(2), np.zeros(2))
    scores = np.array([[[0.0, -1.0], [-0.2, 0.0], [-0.5, 0.0]]])  # argmax: B I I
    # allowed paths: B B B -0.7, B B I -0.2, B I B -0.5, I B B -1.7, I B I -1.2; the best is B B I
    assert kept(scores.argmax(-1), NO_BLANK) == [(0, 1, 1)]
    assert viterbi(scores, transitions).tolist() == [[0, 0, 1]]
    ending = transitions._replace(end=np.array([0.0, -1.0]))  # ending on I costs 1: B I B (-0.5) wins
    assert viterbi(scores, ending).tolist() == [[0, 1, 0]]
    starting = transitions._replace(start=np.array([no, 0.0]))  # only I starts: I B I (-1.2) beats I B B (-1.7)
    assert viterbi(scores, starting).tolist() == [[1, 0, 1]]
    # a step not judged is skipped: over steps 0 and 2 alone, B I (0) beats B B (-0.5)
    assert viterbi(scores, transitions, np.array([[True, False, True]])).tolist()[0][::2] == [0, 1]


VITERBI_SPEC = TAGGER_SPEC.replace('decode = "tags"', 'decode = "viterbi"') + (
    'transitions = "tags.npz"\nemissions = "probabilities"\npadding_input = "ids"\n')


def test_a_tagger_is_judged_by_the_path_its_decoder_takes(tmp_path, cli):
    """slovorez's case: a near-tie between a tag the decoder never takes (its padding and unknown tags)
    and a real one flips under INT8. Argmax (tags) fails it; the decoder reads the same words, so viterbi
    passes; a real id tagged otherwise fails either way."""
    rng = np.random.default_rng(5)
    table = _tagger_table(rng, padding_tag=3)
    table[4] = [0.0, 2.0, 0.0, 2.05]  # id 4: tag 3 (never allowed) just over tag 1
    flipped = table.copy()
    flipped[4] = [0.0, 2.0, 0.0, 1.95]
    damaged = table.copy()
    damaged[6] = np.roll(damaged[6], 1)  # id 6's tag changes: a real step
    for name, weights in (("fp32", table), ("flipped", flipped), ("damaged", damaged)):
        save(tagger(weights), tmp_path / f"{name}.onnx")
    no = -np.inf
    allowed = np.zeros((4, 4))
    allowed[:, 3] = no
    np.savez(tmp_path / "tags.npz", transitions=allowed, start=np.array([0, 0, 0, no]))
    lengths = rng.integers(3, 12, 64)
    ids = np.where(np.arange(16) < lengths[:, None], rng.integers(1, 9, (64, 16)), 0).astype(np.int32)
    save_batches(tmp_path / "val", ids)

    def judged(candidate, spec):
        (tmp_path / "model.toml").write_text(spec)
        code, out, err = cli("validate", tmp_path / f"{candidate}.onnx", "--baseline", tmp_path / "fp32.onnx",
                             "--data", tmp_path / "val", "--spec", tmp_path / "model.toml", "--json")
        assert code in (0, 1), err
        return code, json.loads(out)["outputs"]["tags"]

    argmax = TAGGER_SPEC + 'padding_input = "ids"\n'
    code, out = judged("flipped", argmax)
    assert code == 1 and out["changed_sequences"] == (ids == 4).any(axis=1).sum() > 10
    code, out = judged("flipped", VITERBI_SPEC)
    assert code == 0 and out["exact_match"] == 1.0 and out["decode"] == "viterbi"
    assert out["baseline_characters"] == lengths.sum()
    code, out = judged("damaged", VITERBI_SPEC)
    assert code == 1 and out["changed_sequences"] >= (ids == 6).any(axis=1).sum() // 2 > 5


@pytest.mark.parametrize("arrays, message", [
    ({"transitions": np.zeros((4, 3))}, r"transitions has shape \[4, 3\]"),
    ({"transitions": np.full((4, 4), np.nan)}, "NaN or \\+inf"),
    ({"transitions": np.zeros((4, 4)), "start": np.zeros(3)}, r"start has shape \[3\], not \[4\]"),
    ({"scores": np.zeros((4, 4))}, "holds scores"),
    (None, "not a numpy file"),
])
def test_a_transition_file_that_cannot_decode_is_refused_at_load(tmp_path, arrays, message):
    if arrays is None:
        (tmp_path / "tags.npz").write_text("not numpy")
    elif arrays != "missing":
        np.savez(tmp_path / "tags.npz", **arrays)
    (tmp_path / "model.toml").write_text(VITERBI_SPEC)
    with pytest.raises(TrtpipeError, match=message):
        load_spec(tmp_path / "model.toml")


def test_a_missing_transition_file_is_named_before_anything_runs(tmp_path):
    """The zoo makes its files with the data: the spec loads without it, and validate's task names it."""
    (tmp_path / "model.toml").write_text(VITERBI_SPEC)
    output = load_spec(tmp_path / "model.toml").outputs[0]
    with pytest.raises(TrtpipeError, match=r"transitions .*tags.npz: cannot read it \([Nn]o such file"):
        make_task(output)


def test_viterbi_needs_its_transitions_and_they_need_viterbi(tmp_path):
    (tmp_path / "model.toml").write_text(VITERBI_SPEC.replace('transitions = "tags.npz"\n', ""))
    with pytest.raises(TrtpipeError, match="needs transitions"):
        load_spec(tmp_path / "model.toml")
    (tmp_path / "model.toml").write_text(TAGGER_SPEC + 'transitions = "tags.npz"\n')
    with pytest.raises(TrtpipeError, match='transitions is for decode = "viterbi"'):
        load_spec(tmp_path / "model.toml")


def _padded_lines(rng, samples=32, steps=20, classes=6):
    """Return [samples, steps, classes] one-hot scores of lines padded to the widest, their lengths, and a copy
    whose steps after each line hold other classes (what a recognizer reads in the padding means nothing).
    No class follows itself, so every step is a character, CTC's or a tagger's."""
    lengths = rng.integers(5, steps, samples)
    moves = rng.integers(1, classes - 1, (samples, steps))  # to another of the classes 1..classes-1
    scores = np.eye(classes)[1 + np.cumsum(moves, axis=1) % (classes - 1)]
    noise = scores.copy()
    noise[np.arange(steps)[None, :] >= lengths[:, None]] = np.eye(classes)[rng.integers(1, classes)]
    return scores, lengths, noise


@pytest.mark.parametrize("decode", ["ctc", "tags"])
def test_each_line_is_read_up_to_its_own_length(decode):
    """A batch of lines padded to the widest, as TrueOCR's recognizer reads them with their `lengths`: a candidate
    that differs only past each line's length passes with lengths and fails without; one whose own count cuts a
    real character fails either way (each run is cut at its own lengths)."""
    rng = np.random.default_rng(7)
    baseline, lengths, noise = _padded_lines(rng)
    ids = [f"l{i}" for i in range(len(lengths))]

    def changed(candidate, counts, spec):
        task = make_task(spec)
        task.update({"probs": candidate, "lengths": counts}, {"probs": baseline, "lengths": lengths}, ids, {})
        outputs, _checks = judge([task], "int8", DEFAULT_THRESHOLDS["int8"])
        return outputs["probs"]["changed_sequences"], outputs["probs"]

    cut = OutputSpec("probs", "sequence", decode=decode, lengths="lengths")
    assert changed(noise, lengths, OutputSpec("probs", "sequence", decode=decode))[0] > len(lengths) // 2
    count, out = changed(noise, lengths, cut)
    assert count == 0 and out["baseline_characters"] <= lengths.sum() and out["lengths"] == "lengths"
    shorter = lengths.copy()
    shorter[:3] -= 1
    assert changed(baseline, shorter, cut)[0] == 3


def test_lengths_may_be_an_input_the_whole_batch_is_cut_by():
    rng = np.random.default_rng(8)
    baseline, lengths, noise = _padded_lines(rng)
    task = make_task(OutputSpec("probs", "sequence", lengths="widths"))
    task.update({"probs": noise}, {"probs": baseline}, [f"l{i}" for i in range(len(lengths))], {"widths": lengths})
    outputs, _checks = judge([task], "int8", DEFAULT_THRESHOLDS["int8"])
    assert outputs["probs"]["exact_match"] == 1.0


@pytest.mark.parametrize("counts, message", [
    ({"widths": np.arange(4)}, "'lengths' is neither an output nor an input"),
    ({"lengths": np.full(4, 3.0)}, "holds float64 of shape"),
    ({"lengths": np.full((4, 2), 3)}, r"shape \[4, 2\], and it must count the steps of each of the 4 samples"),
])
def test_lengths_that_cannot_count_the_steps_are_named(counts, message):
    task = make_task(OutputSpec("probs", "sequence", lengths="lengths"))
    scores = np.eye(3)[np.ones((4, 6), int)]
    with pytest.raises(TrtpipeError, match=message):
        task.update({"probs": scores, **counts}, {"probs": scores, **counts}, ["a", "b", "c", "d"], {})


@pytest.mark.parametrize("extra, message", [
    ('[[outputs]]\nname = "boxes"\nlengths = "ids"\n', "lengths is for a sequence"),
    ('[[outputs]]\nname = "tags"\ntask = "sequence"\nlengths = "ids"\n', "lengths 'ids' is float32"),
])
def test_lengths_on_another_task_or_a_float_input_is_refused_at_load(tmp_path, extra, message):
    (tmp_path / "model.toml").write_text('[[inputs]]\nname = "ids"\nshape = [-1]\ndtype = "float32"\n' + extra)
    with pytest.raises(TrtpipeError, match=message):
        load_spec(tmp_path / "model.toml")


def test_lengths_the_model_does_not_have_is_one_line_exit_2(cli, recognizer, tmp_path):
    (tmp_path / "model.toml").write_text(SPEC + 'lengths = "widths"\n')
    code, _, err = cli("validate", recognizer / "ctc.fp16.onnx", "--baseline", recognizer / "ctc.onnx", "--data",
                       recognizer / "val", "--spec", tmp_path / "model.toml")
    assert code == 2 and "lengths 'widths' is neither an output nor an input" in err and "Traceback" not in err
