"""TensorRT's calibrator glue: the cache header TensorRT reads, and the feed that hands it batches."""

import numpy as np
import pytest

from trtpipe.calibrators.cache import parse, render
from trtpipe.calibrators.tensorrt import tensorrt_version_number
from trtpipe.errors import TrtpipeError


def test_version_numbers_as_tensorrt_writes_them():
    assert tensorrt_version_number("8.6.1.6") == 8601
    assert tensorrt_version_number("10.13.0.35") == 101300


def test_header_is_rewritten_for_tensorrt_not_the_scales():
    ours = "TRT-101300-MinMaxCalibration\nx: 3f800000\n"
    handed = render(parse(ours), header="TRT-100300-EntropyCalibration2")
    assert handed == "TRT-100300-EntropyCalibration2\nx: 3f800000\n"


def _feed(batches, tmp_path, reuse_cache=True):
    from trtpipe.calibrators.tensorrt import CalibrationFeed

    return CalibrationFeed(iter(batches), {"x": (4, 16)}, tmp_path / "x.cache", "TRT-101300-EntropyCalibration2", reuse_cache)


def test_a_batch_of_the_wrong_shape_is_an_error_raised_after_tensorrt_returns(tmp_path):
    feed = _feed([{"x": np.zeros((4, 16), np.float32)}, {"x": np.zeros((4, 12), np.float32)}], tmp_path)
    assert feed.guard(lambda: feed.next_batch(["x"]), None)["x"].shape == (4, 16)
    assert feed.guard(lambda: feed.next_batch(["x"]), None) is None  # what TensorRT sees: the end
    with pytest.raises(TrtpipeError, match=r"input 'x' comes in batches of shape \[4, 12\].*calibrates at \[4, 16\]"):
        feed.raise_error()


def test_a_short_last_batch_ends_calibration_quietly(tmp_path):
    feed = _feed([{"x": np.zeros((4, 16), np.float32)}, {"x": np.zeros((3, 16), np.float32)}], tmp_path)
    assert feed.next_batch(["x"]) is not None and feed.next_batch(["x"]) is None
    feed.raise_error()
    assert feed.batches_read == 1


def test_any_exception_in_a_callback_is_kept_not_swallowed(tmp_path):
    feed = _feed([], tmp_path)
    feed.guard(lambda: feed.write_cache(b"not a cache"), None)
    with pytest.raises(TrtpipeError, match="calibration failed inside TensorRT's calibrator"):
        feed.raise_error()


def test_data_given_means_tensorrt_calibrates_from_it_not_from_the_old_cache(tmp_path):
    from trtpipe.calibrators.cache import CalibrationTable, write_cache

    write_cache(CalibrationTable({"x": 1.0}), tmp_path / "x.cache")
    assert b"x:" in _feed([], tmp_path, reuse_cache=True).read_cache()
    assert _feed([], tmp_path, reuse_cache=False).read_cache() is None
