"""ONNX in, ONNX out: loading and saving, and the passes that give a graph its precision."""
