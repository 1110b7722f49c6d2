"""blockmap in a sub-interpreter: a clear ImportError, never a hang.

Its native module keeps objects of the interpreter that imported it (its
exception classes, numpy's functions) and retakes the GIL from threads that
released it, neither of which is sound in a sub-interpreter; an import there
is refused, whether the main interpreter imported blockmap before or not, and
the main interpreter can still import it afterwards. Run in a child process
with a timeout, so that a hang fails the test.
"""

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(
    """
    import sys

    try:
        import _interpreters as interpreters  # CPython 3.13
    except ImportError:
        import _xxsubinterpreters as interpreters  # CPython 3.11, 3.12

    if sys.argv[1] == "main-first":
        import blockmap

    code = '''
    try:
        import blockmap
    except ImportError as error:
        # blockmap's own message (3.11), or CPython's refusal of a module
        # that declares no sub-interpreter support (3.12 and later)
        assert "sub-interpreter" in str(error) or "subinterpreters" in str(error), str(error)
        print("refused:", error)
    else:
        raise AssertionError("blockmap was imported in a sub-interpreter")
    '''
    interpreter = interpreters.create()
    try:
        if hasattr(interpreters, "run_string"):
            failure = interpreters.run_string(interpreter, code)
        else:
            failure = interpreters.exec(interpreter, code)
        assert failure is None, failure
    finally:
        interpreters.destroy(interpreter)

    # the main interpreter imports and uses it all the same
    import numpy as np

    import blockmap

    labels = blockmap.Labels(["a"], np.array([[0], [1]]))
    try:
        blockmap.Labels(["a"], np.array([[0], [0]]))
    except blockmap.BlockMapError:
        print("main interpreter ok", len(labels))
    """
)


@pytest.mark.parametrize("order", ["main-first", "sub-first"])
def test_import_in_a_sub_interpreter_is_refused(order):
    pytest.importorskip("_xxsubinterpreters" if sys.version_info < (3, 13) else "_interpreters")
    result = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", CHILD, order],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # blockmap's own refusal (3.11); from 3.12 CPython refuses first, as
    # pyo3 declares that the module does not support sub-interpreters
    ours = "refused: blockmap cannot be imported in a sub-interpreter"
    cpython = "refused: module blockmap._blockmap does not support loading in subinterpreters"
    assert (ours if sys.version_info < (3, 12) else cpython) in result.stdout
    assert "main interpreter ok 2" in result.stdout
