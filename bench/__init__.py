"""The demo and the benchmark harness of blockmap, outside the package.

Run from the repository root: ``python -m bench demo`` or ``python -m bench bench``.
"""
