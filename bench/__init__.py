"""The demo and the benchmark harness of blockmap, kept outside the package:
the wheel holds the library only.

Run from the repository root: ``python -m bench demo`` or
``python -m bench bench`` (``--help`` for the options). The modules, each
importing only modules listed above it:

- ``workload``: the benchmark workload W, as numpy arrays, and the maps built
  from them;
- ``measure``: timing an operation and its peak memory growth; formatting and
  tables;
- ``registry``: the operations, each library's implementation, the prepared
  files, and the goals (``TARGETS``);
- ``checks``: what an operation produced, checked against W;
- ``files``, ``pickling``, ``transports``: the families of operations, which
  register themselves on import; ``families`` imports the three;
- ``runner``: every run in a fresh process (``python -m bench worker``), and
  the results;
- ``report``: the tables, the markdown page and the chart;
- ``training`` (with ``training_data`` and ``training_run``): metatrain's
  ``mtt train`` from its DiskDataset and MemmapDataset and from blockmap;
- ``demo``: ``python -m bench demo``;
- ``__main__``: the command line.
"""
