"""The vectorized entropy search against a plain, loop-by-loop reference of the same algorithm."""

import numpy as np
import pytest

from trtpipe.calibrators.amax import compute_amax, percentile_amax
from trtpipe.calibrators.entropy import entropy_amax
from trtpipe.calibrators.histogram import MAX_BINS, StreamingHistogram


def reference_entropy_amax(counts, width, levels=128, start_bin=128):
    """TensorRT's entropy calibration written plainly: one candidate threshold at a time."""
    bins = counts.astype(np.float64).copy()
    bins[0] = bins[1]
    best_kl, best_i = np.inf, None
    for i in range(start_bin, len(bins) + 1):
        p = bins[:i].copy()
        p[i - 1] += bins[i:].sum()  # outliers fold into the last kept bin
        level = np.arange(i) * levels // i
        nonzero = bins[:i] > 0
        level_mass = np.bincount(level, weights=bins[:i], minlength=levels)
        level_count = np.bincount(level, weights=nonzero, minlength=levels)
        q = np.where(nonzero, level_mass[level] / np.maximum(level_count[level], 1), 0.0)
        p, q = p / p.sum(), q / q.sum()
        if np.any((p > 0) & (q == 0)):
            kl = np.inf
        else:
            kl = float(np.sum(p[p > 0] * np.log(p[p > 0] / q[p > 0])))
        if kl <= best_kl:  # '<=': the last minimum wins, as in TensorRT
            best_kl, best_i = kl, i
    return best_i * width


def histogram_of(samples, batches=4):
    hist = StreamingHistogram()
    for part in np.array_split(samples, batches):
        hist.update(part)
    return hist


rng = np.random.default_rng(0)
DISTRIBUTIONS = {
    "uniform": rng.uniform(-1, 1, 200_000),
    "gaussian": rng.normal(0, 1, 200_000),
    "laplace": rng.laplace(0, 1, 200_000),
    "gaussian_outliers": rng.permutation(np.concatenate([rng.normal(0, 1, 199_800), rng.normal(0, 40, 200)])),
}


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_entropy_matches_reference(name):
    hist = histogram_of(DISTRIBUTIONS[name])
    expected = reference_entropy_amax(hist.counts, hist.width)
    assert entropy_amax(hist.counts, hist.width) == pytest.approx(expected, rel=0.01)


def test_entropy_clips_outliers_but_max_does_not():
    hist = histogram_of(DISTRIBUTIONS["gaussian_outliers"])
    entropy = compute_amax(hist, "entropy")
    assert entropy < 0.5 * hist.max
    assert compute_amax(hist, "max") == pytest.approx(np.abs(DISTRIBUTIONS["gaussian_outliers"]).max())


def test_percentile_of_uniform_is_its_quantile():
    hist = histogram_of(DISTRIBUTIONS["uniform"])
    assert percentile_amax(hist.counts, hist.width, 90.0) == pytest.approx(0.9, abs=2 * hist.width)


def test_mse_is_between_entropy_and_max_for_gaussian():
    hist = histogram_of(DISTRIBUTIONS["gaussian"])
    mse = compute_amax(hist, "mse")
    assert 2.0 < mse < hist.max


def test_streamed_histogram_equals_one_shot():
    samples = DISTRIBUTIONS["laplace"]
    first, rest = samples[:1000], samples[1000:]
    hist = StreamingHistogram()
    hist.update(first)
    for part in np.array_split(rest, 7):
        hist.update(part)
    magnitudes = np.abs(samples).astype(np.float32)
    index = np.maximum(np.ceil(magnitudes / np.float32(hist.width)).astype(np.int64) - 1, 0)
    one_shot = np.bincount(index, minlength=len(hist.counts))
    numpy_hist, _ = np.histogram(magnitudes, bins=hist.edges)
    assert hist.width == pytest.approx(np.abs(first).max() / 2048)
    assert len(hist.counts) > 2048  # later batches reached further and added bins
    np.testing.assert_array_equal(hist.counts, one_shot)
    # Against float64 edges only values on a bin boundary may land one bin over.
    assert np.abs(hist.counts - numpy_hist).sum() <= samples.size * 1e-4
    assert hist.total == samples.size


def test_a_sample_far_out_of_scale_merges_bins_instead_of_asking_for_billions():
    """A stray 1e30 (or raw 0-65535 pixels among normalized ones) asked for ~1e33 bins of the first batch's width."""
    samples = DISTRIBUTIONS["gaussian"]
    hist = StreamingHistogram()
    hist.update(samples)
    hist.update(np.array([65535.0 * 300]))
    hist.update(np.array([-1e30]))
    assert len(hist.counts) <= MAX_BINS and hist.edges[-1] >= 1e30 and hist.max == pytest.approx(1e30)
    assert hist.counts.sum() == hist.total == samples.size + 2
    assert hist.counts[-1] == 1  # the 1e30 alone in the last bin; the rest merged, none lost
    assert compute_amax(hist, "max") == pytest.approx(1e30)
