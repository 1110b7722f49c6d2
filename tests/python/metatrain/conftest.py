"""The tiny metatrain dataset, made once per session: 40 EMT clusters as
xyz, as metatrain's DiskDataset zip, and both converted to blockmap
datasets."""

import pytest

from helpers import metatrain_data


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    pytest.importorskip("metatrain")
    pytest.importorskip("ase")
    import blockmap.metatrain

    root = tmp_path_factory.mktemp("tiny")
    metatrain_data.write_xyz(root / "data.xyz", 40)
    metatrain_data.write_zip(root / "data.xyz", root / "data.zip")
    metatrain_data.write_options(root / "options.yaml", root / "data.xyz")
    blockmap.metatrain.convert(root / "data.zip", root / "zip.bmdata")
    blockmap.metatrain.convert(root / "options.yaml", root / "xyz.bmdata")
    return root
