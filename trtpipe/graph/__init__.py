"""ONNX in, ONNX out: loading and saving, and the passes that give a graph its precision.

toolkit.py is what every pass uses to read and edit a graph (and lists where a graph is walked);
sessions.py makes every ONNX Runtime session; inputs.py draws every random input.
"""
