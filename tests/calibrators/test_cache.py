import struct

import pytest

from trtpipe.calibrators.cache import CacheError, CalibrationTable, parse, render

# As TensorRT 8.6 and 10 write them: names with spaces, brackets, colons; a bare 0.
TRT8_CACHE = """TRT-8601-EntropyCalibration2
input: 3c010a14
/conv1/Conv_output_0: 3d8e2f4a
(Unnamed Layer* 4) [Fully Connected]_output: 3d65992f
onnx::MatMul_12: 3e11094c
zero: 0
"""
TRT10_CACHE = "TRT-101300-EntropyCalibration2\nimages: 3c008912\nmodel.0/conv/Conv_output_0: 3e2f1b6c\n"


def hex_to_float(text):
    return struct.unpack(">f", bytes.fromhex(text))[0]


def test_reads_tensorrt_8_cache():
    table = parse(TRT8_CACHE)
    assert table.algorithm == "EntropyCalibration2" and table.trt_version == 8601
    assert table.amax["input"] == pytest.approx(hex_to_float("3c010a14") * 127)
    assert table.amax["(Unnamed Layer* 4) [Fully Connected]_output"] == pytest.approx(hex_to_float("3d65992f") * 127)
    assert table.amax["onnx::MatMul_12"] == pytest.approx(hex_to_float("3e11094c") * 127)
    assert table.amax["zero"] == 0.0
    assert len(table.amax) == 5


def test_reads_tensorrt_10_cache():
    table = parse(TRT10_CACHE)
    assert table.header == "TRT-101300-EntropyCalibration2"
    assert table.scale("images") == pytest.approx(hex_to_float("3c008912"))


def test_round_trip_is_byte_exact():
    assert render(parse(TRT10_CACHE)) == TRT10_CACHE


def test_written_scale_is_amax_over_127_big_endian():
    text = render(CalibrationTable({"x": 127.0}))
    assert text.splitlines()[1] == "x: 3f800000"  # scale 1.0


@pytest.mark.parametrize("text,line", [("hello\n", 1), ("TRT-8601-EntropyCalibration2\nx 3f800000\n", 2),
                                       ("TRT-8601-EntropyCalibration2\nx: zz\n", 2)])
def test_bad_cache_names_the_line(text, line):
    with pytest.raises(CacheError, match=f"line {line}"):
        parse(text)
