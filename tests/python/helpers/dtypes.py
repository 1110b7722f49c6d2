"""Element types the tests iterate over (those of metatensor)."""

import numpy as np

INTEGER_DTYPES = [
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
]

ALL_DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    *INTEGER_DTYPES,
    np.bool_,
    np.complex64,
    np.complex128,
]


def dtype_id(dtype):
    """The name of a test parametrized by element type: ``float64``, ``uint8``..."""
    return np.dtype(dtype).name
