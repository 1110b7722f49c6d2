"""A crafted input may not make blockmap allocate more than a small constant
times its own size: each reader gets inputs built to make it allocate the
most per byte (many tiny names, dimensions, blocks, components, gradients,
info entries, archive entries), in a fresh process whose peak resident
memory is reset just before the call. The ratios measured are in
docs/format.md ("Bounded reading")."""

import json

import pytest

from helpers.child import run_python
from helpers.memory import PEAK

#: the bound asserted: 12 times the input, plus what the interpreter's own
#: handling of the call may take
RATIO = 12
SLACK = 16_000_000

CHILD = """
import io, json, sys, zipfile
import blockmap
from blockmap._blockmap import _reconstruct


def labels(names, count=0):
    return {"names": names, "count": count, "dtype": "<i4"}

BLOCK = {"dtype": "<f8", "shape": [0, 0], "samples": labels([]), "components": []}

def header(case, n):
    if case == "empty names":
        return json.dumps({"kind": "labels", "labels": labels([""] * n)})
    if case == "short names":
        return json.dumps({"kind": "labels", "labels": labels(["a"] * n)})
    if case == "dimensions":
        return json.dumps({"kind": "block", "block": dict(BLOCK, shape=[0] * n,
                           properties=labels([]))})
    if case == "blocks":
        return json.dumps({"kind": "tensor", "keys": labels(["k"]), "blocks": [BLOCK] * n})
    if case == "components":
        return json.dumps({"kind": "block", "block": dict(BLOCK, components=[labels([])] * n,
                           properties=labels([]))})
    if case == "gradients":
        return json.dumps({"kind": "block", "block": dict(BLOCK, properties=labels([]),
                           gradients={str(i): BLOCK for i in range(n)})})
    if case == "info":
        return json.dumps({"kind": "tensor", "keys": labels(["k"]), "blocks": [],
                           "info": {str(i): "" for i in range(n)}})
    raise ValueError(case)

def archive(case, n):
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w") as archive:
        if case == "archive entries":
            for i in range(n):
                archive.writestr(str(i), b"")
        elif case == "archive info":
            archive.writestr("keys.npy", b"")
            archive.writestr("info.json", json.dumps({str(i): "" for i in range(n)}))
    return stream.getvalue()

case, n = sys.argv[1], int(sys.argv[2])
if case.startswith("archive"):
    data = archive(case, n)
    call = lambda: blockmap.load_buffer(data)
else:
    data = header(case, n).encode()
    call = lambda: _reconstruct(1, data)
reset_peak()
before = peak_bytes()
try:
    call()
    outcome = "loaded"
except blockmap.BlockMapError as error:
    outcome = type(error).__name__
print(json.dumps({"input": len(data), "growth": peak_bytes() - before, "outcome": outcome}))
"""

CASES = {
    "empty names": 3_000_000,
    "short names": 2_000_000,
    "dimensions": 3_000_000,
    "blocks": 200_000,
    "components": 400_000,
    "gradients": 150_000,
    "info": 1_000_000,
    "archive entries": 200_000,
    "archive info": 1_000_000,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_crafted_input_costs_a_small_constant_times_its_size(case):
    result = run_python(PEAK + CHILD, case, str(CASES[case]), timeout=300)
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured["outcome"] != "loaded", "crafted input was accepted"
    assert measured["input"] > 5_000_000
    assert measured["growth"] <= RATIO * measured["input"] + SLACK, (
        f"{case}: {measured['growth'] / measured['input']:.1f} times the input"
    )
