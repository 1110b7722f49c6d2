"""Every optional dependency blockmap imports, missing: Python's
``ModuleNotFoundError`` with the module's name and a command that
installs it (the package, and blockmap's extra named after its wheel, as
README.md says: blockmap is not on the package index, so never
``pip install blockmap[...]``). In a fresh interpreter where each is
blocked (``sys.modules[name] = None``, as when it is not installed)."""

import subprocess
import sys
import textwrap

from blockmap import _optional

MISSING = """
    import sys

    for name in ("torch", "tqdm", "metatensor", "metatomic", "metatensor_operations",
                 "metatensor_learn", "metatrain"):
        sys.modules[name] = None  # as when it is not installed

    import tempfile
    import numpy as np
    import blockmap

    labels = blockmap.Labels(["a"], np.zeros((1, 1), dtype=np.int32))
    block = blockmap.TensorBlock(np.zeros((1, 1)), labels, [], labels)
    tensor = blockmap.TensorMap(labels, [block])
    folder = tempfile.mkdtemp()
    blockmap.save(f"{folder}/a.mts", tensor)

    def import_operations():
        import blockmap.operations

    def import_learn():
        import blockmap.learn

    def metatrain():
        import blockmap.metatrain

        blockmap.metatrain.install()

    def metatomic():
        from blockmap import _systems

        _systems.system_from_tensormap(tensor)

    calls = {
        "torch values": lambda: tensor.to(arrays="torch"),
        "tqdm": lambda: blockmap.Dataset.from_files(
            [f"{folder}/a.mts"], f"{folder}/a.bmdata", progress=True
        ),
        "metatensor-core": lambda: blockmap.metatensor.to_metatensor(tensor),
        "metatensor-torch": lambda: blockmap.metatensor_torch.to_metatensor_torch(tensor),
        "metatomic-torch": metatomic,
        "metatensor-operations": import_operations,
        "blockmap.learn": import_learn,
        "metatrain": metatrain,
    }
    import blockmap.metatensor, blockmap.metatensor_torch

    for what, call in calls.items():
        try:
            call()
        except ModuleNotFoundError as error:
            print(what, "|", error.name, "|", error)
        else:
            print(what, "| no error")
    try:
        blockmap.add
    except AttributeError as error:
        print("blockmap.add |", error)
"""

# what each names: the module (the error's name), the command, the extra
EXPECTED = {
    "torch values": ("torch", "`pip install torch`", "torch"),
    "tqdm": ("tqdm", "`pip install tqdm`", "progress"),
    "metatensor-core": ("metatensor", "`pip install metatensor-core`", "metatensor"),
    "metatensor-torch": ("metatensor.torch", "`pip install metatensor-torch`", "metatensor-torch"),
    "metatomic-torch": ("metatomic", "`pip install metatomic-torch`", None),
    "metatensor-operations": (
        "metatensor_operations",
        "`pip install metatensor-operations`",
        "operations",
    ),
    "blockmap.learn": ("torch", "`pip install torch`", "learn"),
    "metatrain": ("metatrain", '`pip install "metatrain>=2026.4,<2026.5"`', "metatrain"),
}


def test_a_missing_dependency_says_how_to_install_it():
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MISSING)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = dict(line.split(" | ", 1) for line in done.stdout.splitlines())
    assert set(lines) == {*EXPECTED, "blockmap.add"}
    for what, (module, command, extra) in EXPECTED.items():
        name, message = lines[what].split(" | ", 1)
        assert name == module, (what, lines[what])
        assert command in message, (what, message)
        if extra is not None:
            assert f'"dist/blockmap-<version>-<tags>.whl[{extra}]"' in message, (what, message)
        assert "pip install blockmap[" not in message, (what, message)
    assert "`pip install metatensor-operations`" in lines["blockmap.add"]
    assert "pip install blockmap[" not in lines["blockmap.add"]


def test_install_hints_quote_what_the_shell_would_read():
    assert _optional.install_hint("tqdm") == "`pip install tqdm`"
    assert _optional.install_hint("a>=1,<2").startswith('`pip install "a>=1,<2"`')
    hint = _optional.install_hint("tqdm", "progress")
    assert '`pip install "dist/blockmap-<version>-<tags>.whl[progress]"`' in hint
    assert "pip install blockmap[" not in hint
