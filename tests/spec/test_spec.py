"""The spec as loaded: [shapes] parsed once into ShapeRanges, read on each input's batch axis."""

from trtpipe.spec import ShapeRange, load_spec


def test_shapes_are_parsed_at_load_and_the_batch_is_read_on_each_inputs_axis(tmp_path):
    # silero-vad's inputs: the state stacks samples on axis 1; its axis 0 is the layers (2), not a batch.
    (tmp_path / "m.toml").write_text('[[inputs]]\nname = "input"\nshape = [-1, 576]\n\n'
                                     '[[inputs]]\nname = "state"\nshape = [2, -1, 128]\nbatch_axis = 1\n\n'
                                     '[[inputs]]\nname = "sr"\nshape = []\ndtype = "int64"\nbatched = false\n\n'
                                     '[shapes]\ninput = "1x576/16x576/32x576"\nstate = "2x1x128/2x16x128/2x32x128"\n')
    spec = load_spec(tmp_path / "m.toml")
    assert spec.shapes["state"] == ShapeRange((2, 1, 128), (2, 16, 128), (2, 32, 128))
    assert spec.shapes["input"].opt == (16, 576) and str(spec.shapes["state"]) == "2x1x128/2x16x128/2x32x128"
    assert spec.max_batch() == 32


def test_shapes_joined_by_commas_are_read_as_trtexec_writes_them_and_a_name_may_hold_a_comma_or_a_colon():
    from trtpipe.runtime.bench import shape_entries
    from trtpipe.spec import parse_shapes

    assert set(parse_shapes(["x:1x96x16/1x96x392/1x96x776,widths:1/1/1"])) == {"x", "widths"}
    assert shape_entries(["input_1:0:1x3", "a,b:1x2", "x:1x2,y:3"]) == ["input_1:0:1x3", "a,b:1x2", "x:1x2", "y:3"]
    assert shape_entries(["x:1x2,widths"]) == ["x:1x2,widths"]  # not every piece a shape: one value, whose error names it
