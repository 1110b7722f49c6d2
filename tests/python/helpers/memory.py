"""Where memory is: the address of an array's first byte, this process's
mappings (``/proc/self/maps``), and the peak resident memory of a child
process (:data:`PEAK`).

Zero-copy claims are tested by addresses: two objects share memory when
their first bytes are at the same address (and ``np.shares_memory`` agrees),
and a value views a file or a segment when its address lies in that
mapping.
"""

from typing import NamedTuple

import numpy as np


def address_of(obj):
    """The address of the first byte of a numpy array, a torch tensor
    (``data_ptr()``) or any object exporting a buffer."""
    if hasattr(obj, "data_ptr"):
        return obj.data_ptr()
    if not isinstance(obj, np.ndarray):
        obj = np.asarray(memoryview(obj))
    return obj.__array_interface__["data"][0]


class Mapping(NamedTuple):
    """One region of ``/proc/self/maps``."""

    start: int
    end: int
    offset: int
    #: the file mapped ("" for anonymous memory), as the kernel names it
    #: (a deleted file ends with " (deleted)", a memfd starts "/memfd:")
    path: str
    #: the line of /proc/self/maps, as the kernel wrote it
    line: str

    def holds(self, address, size=1):
        """Whether ``size`` bytes from ``address`` lie in this region."""
        return self.start <= address and address + size <= self.end


def mappings():
    """This process's mappings, in address order (Linux)."""
    with open("/proc/self/maps") as lines:
        for line in lines:
            fields = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5].strip() if len(fields) > 5 else ""
            yield Mapping(start, end, int(fields[2], 16), path, line.strip())


def mapping_containing(address):
    """The :class:`Mapping` that holds ``address``, or None."""
    return next((m for m in mappings() if m.start <= address < m.end), None)


#: Code for a child process (prepend it to the child's code) measuring its
#: own peak resident memory: ``reset_peak()`` then, after the work,
#: ``peak_bytes()`` (``VmHWM``; not ``ru_maxrss``, which a child starts at its
#: parent's peak and cannot lower, so that it would hide growth below it).
PEAK = """
def reset_peak():
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def peak_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")
"""
