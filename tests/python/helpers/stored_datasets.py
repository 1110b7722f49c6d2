"""The dataset files stored in tests/data/datasets/ (one set per format
version, never regenerated; its README says how each was made), and the
append the tests of every version make to a copy of one."""

import shutil
from pathlib import Path
from typing import Any

from blockmap import DatasetWriter

from . import TESTS_DIR

#: tests/data/datasets
STORED = TESTS_DIR.parent / "data" / "datasets"


def append_to_copy(name: str, folder: Path, fields: list[str], extra: Any) -> Path:
    """Copy the stored file ``name`` into ``folder`` and append one entry to
    the copy in one session: ``extra`` as every field in ``fields`` (with
    the columns ``n_atoms`` 99 and ``weight`` 9.5 unless the only field is
    ``tensor``). Returns the copy's path."""
    copy = folder / name
    shutil.copy(STORED / name, copy)
    with DatasetWriter(copy, append=True) as writer:
        if fields == ["tensor"]:
            writer.write(extra)
        else:
            writer.write(
                **{field: extra for field in fields},
                columns={"n_atoms": 99, "weight": 9.5},
            )
    return copy
