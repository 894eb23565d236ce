from calibrators.cache import parse, render
from calibrators.tensorrt import tensorrt_version_number


def test_version_numbers_as_tensorrt_writes_them():
    assert tensorrt_version_number("8.6.1.6") == 8601
    assert tensorrt_version_number("10.13.0.35") == 101300


def test_header_is_rewritten_for_tensorrt_not_the_scales():
    ours = "TRT-101300-MinMaxCalibration\nx: 3f800000\n"
    handed = render(parse(ours), header="TRT-100300-EntropyCalibration2")
    assert handed == "TRT-100300-EntropyCalibration2\nx: 3f800000\n"
