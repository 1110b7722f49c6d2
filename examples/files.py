"""Files: save, load, and a mapped load

A map saved with `blockmap.save` is a metatensor `.mts` file (metatensor-core
reads it) whose arrays start on 64-byte boundaries. `blockmap.load` reads it
into memory blockmap owns; `load(path, mmap=True)` maps the file instead and
gives arrays that view the mapping, read-only: the load costs the metadata,
not the data. `blockmap.load_buffer` views a buffer you already hold in the
same way.
"""

import numpy as np

import blockmap

rng = np.random.default_rng(0)
values = rng.normal(size=(50, 3, 8))
block = blockmap.TensorBlock(
    values=values,
    samples=blockmap.Labels(["system", "atom"], np.array([[0, a] for a in range(50)])),
    components=[blockmap.Labels("o3_mu", np.array([[-1], [0], [1]]))],
    properties=blockmap.Labels.range("n", 8),
)
tensor = blockmap.TensorMap(blockmap.Labels.range("o3_lambda", 1), [block])

# the block keeps the array it was given: no copy, edits are seen by both
assert np.shares_memory(tensor.block(0).values, values)

blockmap.save("descriptors.mts", tensor)  # atomic: a temporary file, then a rename

loaded = blockmap.load("descriptors.mts")  # one read into aligned memory, CRCs checked
mapped = blockmap.load("descriptors.mts", mmap=True)  # views the file
for name, copy in (("load", loaded), ("mmap", mapped)):
    array = copy.block(0).values
    assert np.array_equal(array, values) and not np.shares_memory(array, values)
    aligned = array.ctypes.data % 64 == 0
    print(f"{name:>4}: writable={array.flags.writeable}, 64-byte aligned={aligned}")

# the mapped values are read-only: numpy refuses writes instead of touching the file
try:
    mapped.block(0).values[0, 0, 0] = 1.0
except ValueError as error:
    print("writing to a mapped array:", error)

# an archive in memory (a memoryview): load_buffer views it, without a copy
data = blockmap.save_buffer(tensor)
viewed = blockmap.load_buffer(data)
array = viewed.block(0).values
assert np.shares_memory(array, np.frombuffer(data, dtype=np.uint8))
print(f"load_buffer views the {len(data)} bytes it is given: {array.shape} {array.dtype}")
print(viewed)
