import numpy as np
import pytest

from trtpipe.quality.metrics import OutputMetrics, cosine_per_sample, snr_db, topk_agreement


def test_cosine_hand_computed():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    b = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 0.0]])
    np.testing.assert_allclose(cosine_per_sample(a, b), [0.0, 1 / np.sqrt(2), 1.0])


def test_snr_hand_computed():
    assert snr_db(100.0, 1.0) == pytest.approx(20.0)
    assert snr_db(1.0, 0.0) == float("inf")


def test_topk_agreement():
    candidate = np.array([[0.1, 0.5, 0.4], [0.6, 0.3, 0.1]])
    baseline = np.array([[0.1, 0.4, 0.5], [0.7, 0.2, 0.1]])
    assert topk_agreement(candidate, baseline, 1).tolist() == [False, True]
    assert topk_agreement(candidate, baseline, 2).tolist() == [True, True]


def test_streamed_metrics_match_hand_computation():
    baseline = np.array([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0]])
    candidate = np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    m = OutputMetrics(classifier=True)
    m.update(candidate[:1], baseline[:1], np.array([0]))
    m.update(candidate[1:], baseline[1:], np.array([2]))
    s = m.summary()
    assert s["max_abs_error"] == 1.0
    assert s["mean_abs_error"] == pytest.approx(2 / 6)
    assert s["max_rel_error"] == pytest.approx(1.0)  # |2-1| / |1|
    assert s["snr_db"] == pytest.approx(10 * np.log10(15 / 2))
    assert s["top1_agreement"] == 1.0
    assert s["accuracy"] == 0.5 and s["baseline_accuracy"] == 0.5


def test_one_value_a_sample_is_judged_by_its_cosine_across_the_samples():
    """A frame's voicing confidence, one number a sample: its per-sample cosine is its sign, 0 where FP32
    gives exactly 0 and the candidate 1e-6. SwiftF0's FP16, its voicing decisions 4 of 4096 off, read a
    cosine of 0.957 that way and failed; across the samples it is what the values say."""
    baseline = np.array([[0.0], [0.0], [0.9], [0.2], [0.6]])
    candidate = np.array([[1e-6], [0.0], [0.9], [0.21], [0.58]])
    m = OutputMetrics()
    m.update(candidate[:2], baseline[:2])  # streamed over two batches
    m.update(candidate[2:], baseline[2:])
    summary = m.summary()
    across = (candidate * baseline).sum() / np.sqrt((candidate ** 2).sum() * (baseline ** 2).sum())
    assert summary["values_per_sample"] == 1
    assert summary["cosine"] == pytest.approx(across) and summary["cosine_min"] == pytest.approx(across)
    assert across > 0.999  # per sample: 0 on the first, a mean of 0.8
    several = OutputMetrics()
    several.update(np.hstack([candidate, candidate]), np.hstack([baseline, baseline]))
    assert several.summary()["cosine"] == pytest.approx(0.8)  # two values a sample: per sample, as before


def test_a_streams_cosines_take_its_steps_together():
    """A streamed spec's samples are steps: GTCRN's FP8 read a cosine of 0.71 on a quiet frame (1/1300 of a
    typical frame's energy) of an utterance at 0.9987. With `stream`, the cosines are each stream's, its steps
    together, and the worst sample names the stream's file."""
    from trtpipe.quality.stream import stream_of

    rng = np.random.default_rng(0)
    baseline = rng.normal(0, 1, (6, 16))
    baseline[3] *= 1e-3  # a quiet step
    candidate = baseline + np.where(np.arange(6)[:, None] == 3, 1e-3, 1e-3 * rng.normal(0, 1, (6, 16)))
    ids = [f"a.npz[{i}]" for i in range(3)] + [f"b.npz[{i}]" for i in range(3)]
    steps, streams = OutputMetrics(), OutputMetrics(stream=stream_of)
    for i in range(6):  # a stream runs a step a batch
        steps.update(candidate[i:i + 1], baseline[i:i + 1], ids=ids[i:i + 1])
        streams.update(candidate[i:i + 1], baseline[i:i + 1], ids=ids[i:i + 1])
    by_step, by_stream = steps.summary(), streams.summary()
    assert by_step["cosine_min"] < 0.8 and by_step["worst_sample"] == "b.npz[0]"
    b = slice(3, 6)
    whole = (candidate[b] * baseline[b]).sum() / np.sqrt((candidate[b] ** 2).sum() * (baseline[b] ** 2).sum())
    assert by_stream["cosine_min"] == pytest.approx(whole) and whole > 0.9999
    a = slice(0, 3)
    other = (candidate[a] * baseline[a]).sum() / np.sqrt((candidate[a] ** 2).sum() * (baseline[a] ** 2).sum())
    assert by_stream["worst_sample"] == ("a.npz" if other < whole else "b.npz") and by_stream["snr_db"] == by_step["snr_db"]
    # A batch whose rows are not its samples (an output of its own row count) leaves the streams' sums short: per step
    uneven = OutputMetrics(stream=stream_of)
    uneven.update(candidate[:1], baseline[:1], ids=ids[:1])
    uneven.update(candidate[1:4], baseline[1:4], ids=ids[1:2])
    assert uneven.summary()["cosine_min"] == pytest.approx(cosine_per_sample(candidate[:4], baseline[:4]).min())
