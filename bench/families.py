"""Every family of operations, imported in the order of the report's tables:
files, pickle, transports. Importing this module fills
:data:`bench.registry.OPERATIONS` and :data:`bench.registry.TARGETS`."""

from . import files, pickling, transports

__all__ = ["files", "pickling", "transports"]
