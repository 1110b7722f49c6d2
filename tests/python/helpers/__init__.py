"""Helpers shared by the Python tests, imported as ``from helpers import io_cases``.

- ``io_cases``: maps, blocks and labels to save and load, archive parsing,
  comparisons (also with metatensor-core), child processes;
- ``pickle_cases``: functions workers can import, the pickle buffers' order,
  crafted reconstructor input;
- ``strategies``: hypothesis strategies of valid maps, blocks and labels
  (needs hypothesis);
- ``dtypes``: the element types the tests iterate over, and the test ids
  they give;
- ``memory``: the address of an array or tensor, this process's mappings,
  the peak resident memory of a child process;
- ``child``: code run in a fresh interpreter (``run_python``);
- ``crafted_zips``: zip archives written byte by byte, whose directory may
  lie (entries over the same bytes, archives cut inside an entry);
- ``error_cases``: every blockmap error (each exception class, and the
  native module's), raised by workers of every host.
- ``stored_datasets``: the dataset files of every format version kept in
  tests/data/datasets/, and the append their tests make to a copy.

pytest finds this package through ``pythonpath`` in pyproject.toml; a child
process puts :data:`TESTS_DIR` on its ``sys.path`` first.
"""

from pathlib import Path

#: tests/python, the folder holding this package.
TESTS_DIR = Path(__file__).resolve().parent.parent
