"""The example gallery: each script of ``examples/`` run as a user runs it,
shown on a page of its own with what it printed.

Every ``examples/*.py`` is run by ``python SCRIPT`` (the interpreter of
the build, or ``example_python`` in conf.py) in a fresh temporary
directory, one after the other: a real ``__main__``, so that spawned
workers, Pools and clusters start as they do for a user, and nothing of a
script (a ``register()``, a cluster) reaches the build's process. A script
that exits with an error fails the build, with its output; a Python
warning raised by blockmap or by the script is a warning of the build (an
error under ``-W``). The page shows what the script prints on standard
output; the tools some examples run (metatrain, dask) log to standard
error, which is left out.

A script's docstring is its page: the first line the title, the rest
Markdown. The page shows the code after the docstring, the output, and a
link to download the script. The pages go into ``docs/gallery/`` (which
git ignores), rewritten only when their text changes.
``tests/python/docs/test_examples.py`` runs the same scripts through
:func:`run`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FOLDER = "gallery"
TIMEOUT = 600  # seconds; each script takes seconds

logger = logging.getLogger(__name__)


@dataclass
class Example:
    path: Path
    title: str
    prose: str
    code_line: int  # the first line after the docstring (1-based)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def scripts() -> list[Path]:
    return sorted(EXAMPLES.glob("*.py"))


def parse(path: Path) -> Example:
    """The title and prose of ``path``'s docstring, and where its code starts."""
    tree = ast.parse(path.read_text(), filename=str(path))
    doc = ast.get_docstring(tree, clean=True)
    if not doc or not tree.body:
        raise ExtensionError(f"{path.name}: an example starts with a docstring (its page)")
    title, _, prose = doc.partition("\n")
    lines = path.read_text().splitlines()
    start = tree.body[0].end_lineno  # 0-based: the line after the docstring
    while start < len(lines) and not lines[start].strip():
        start += 1
    return Example(path, title.strip(), prose.strip(), start + 1)


def run(path: Path, python: str = sys.executable, cwd: Path | None = None) -> Run:
    """Run the script ``path`` as ``python path`` in ``cwd`` (a new temporary
    directory when None)."""
    with tempfile.TemporaryDirectory(prefix="blockmap-example-") as scratch:
        start = time.perf_counter()
        done = subprocess.run(
            [python, str(path)],
            cwd=cwd or scratch,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return Run(done.returncode, done.stdout, done.stderr, time.perf_counter() - start)


WARNING = re.compile(r"(?P<path>/[^:\s]+\.py):(?P<line>\d+): (?P<kind>\w*Warning):.*")


def own_warnings(stderr: str, script: Path) -> list[str]:
    """The Python warnings in ``stderr`` raised in blockmap's code or in the
    example ``script`` itself (the tools an example runs, metatrain or
    dask, log to stderr, with the warnings of their dependencies: those are
    theirs)."""
    import blockmap

    package = Path(blockmap.__file__).resolve().parent
    found = []
    for match in WARNING.finditer(stderr):
        path = Path(match.group("path")).resolve()
        if path == script.resolve() or package in path.parents:
            found.append(match.group(0))
    return found


def _fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = 0
    run_length = 0
    for char in text:
        run_length = run_length + 1 if char == "`" else 0
        longest = max(longest, run_length)
    return "`" * max(3, longest + 1)


def page(example: Example, result: Run) -> str:
    source = os.path.relpath(example.path, ROOT / "docs" / FOLDER)
    name = example.path.name
    output = result.stdout.rstrip("\n") or "(nothing)"
    fence = _fence(output)
    return (
        f"# {example.title}\n\n"
        f"{example.prose}\n\n"
        f"```{{literalinclude}} {source}\n"
        f":language: python\n"
        f":lines: {example.code_line}-\n"
        f"```\n\n"
        f"What `python {name}` prints:\n\n"
        f"{fence}text\n{output}\n{fence}\n\n"
        f"{{download}}`Download {name} <{source}>` (in the repository: `examples/{name}`)\n"
    )


def index(examples: list[Example]) -> str:
    lines = [
        "# Examples\n",
        "Short scripts to copy, each one self-contained, on tiny data, running in "
        "seconds. Every script asserts what it shows (memory shared by address, "
        "results equal), and each is run by the build of this site and by the "
        "tests, so none can drift from the library. They live in the "
        "repository's `examples/` folder; run one with `python examples/NAME.py`.\n",
        "```{toctree}\n:hidden:\n",
    ]
    lines.extend(example.path.stem for example in examples)
    lines.append("```\n")
    for example in examples:
        summary = example.prose.split("\n\n")[0].replace("\n", " ")
        lines.append(f"- [{example.title}]({example.path.stem}.md): {summary}")
    lines.append("")
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def _generate(app) -> None:
    folder = Path(app.srcdir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    examples = [parse(path) for path in scripts()]
    if not examples:
        raise ExtensionError(f"no example in {EXAMPLES}")
    wanted = {"index.md"} | {f"{example.path.stem}.md" for example in examples}
    for path in folder.iterdir():
        if path.name not in wanted:
            path.unlink()
    failed = []
    for example in examples:
        logger.info(f"running examples/{example.path.name} ... ", nonl=True)
        result = run(example.path, app.config.example_python)
        logger.info(f"{result.seconds:.1f} s")
        if result.returncode != 0:
            failed.append(
                f"examples/{example.path.name} exited with {result.returncode}:\n"
                f"{result.stdout[-2000:]}{result.stderr[-4000:]}"
            )
            continue
        for warning in own_warnings(result.stderr, example.path):
            logger.warning(
                f"examples/{example.path.name} warned: {warning}", location=str(example.path)
            )
        _write(folder / f"{example.path.stem}.md", page(example, result))
    if failed:
        raise ExtensionError("\n\n".join(failed))
    _write(folder / "index.md", index(examples))


def setup(app):
    app.add_config_value("example_python", sys.executable, "env")
    app.connect("builder-inited", _generate)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
