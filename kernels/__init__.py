"""Triton kernels, installed as ``vam_engine.kernels``.

``kernels.gate_stats`` holds the fused gate statistics (``gate_stats`` and ``gate_compare``).
Nothing is imported here: importing the package must not import triton, since the interpreter
switch TRITON_INTERPRET is read when the kernels are defined.
"""
