"""Every family of operations, imported in the order of the report's tables:
files, pickle, transports, metatensor (metatensor-core's objects moved by
blockmap, the bridges, keys_to_*). Importing this module fills
:data:`bench.registry.OPERATIONS` and :data:`bench.registry.TARGETS`."""

from . import files, pickle_rounds, pickling, transports

# isort: split
from . import bridges

__all__ = ["bridges", "files", "pickle_rounds", "pickling", "transports"]
