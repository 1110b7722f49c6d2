"""Sphinx configuration of blockmap's documentation site.

``make docs`` builds it into ``target/docs/html`` (``sphinx-build -W
--keep-going docs target/docs/html``). The guides are the Markdown files of
this folder, read as they are (MyST); the landing page is README.md, the
changelog and the contributor's guide are the repository's own files,
included. Three extensions of ``_ext/`` make the rest at each build, into
folders of ``docs/`` that git ignores: the API reference from the public
modules (``api/``), the example gallery from ``examples/``, each script run
as a user runs it (``gallery/``), and, once the pages are written, a check
of every internal link and anchor.
"""

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import blockmap  # noqa: E402

project = "blockmap"
author = "the blockmap developers"
copyright = "the blockmap developers"  # noqa: A001 - Sphinx's name
release = version = blockmap.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "numpydoc",
    "api_pages",
    "example_pages",
    "internal_links",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_ext", "README.md"]
# the pages that the repository's files are included into link to each
# other by these names
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
suppress_warnings = []

# every cross-reference to blockmap's own objects must resolve; names of
# other libraries are plain text here: the site is built without network,
# so without their inventories
nitpicky = True
nitpick_ignore_regex = [
    (
        "py:.*",
        r"(numpy|np|torch|metatensor|metatrain|metatomic|dask|distributed|ray|joblib|loky"
        r"|tqdm|os|pathlib|typing|collections|multiprocessing|pickle|copy)(\..+)?",
    ),
    ("py:.*", r"True|False|None|int|float|str|bytes|bool|list|tuple|dict|object"),
    # slips in the docstrings of metatensor-learn and metatensor-operations,
    # which blockmap.learn and blockmap.operations show as they are
    ("py:class", r"lint|TensorBlocks|(?s:.*\s.*)"),
    ("py:func", r"load_state_dict"),
]

autodoc_default_options: dict = {}
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's sections carry the types
numpydoc_show_class_members = False
numpydoc_xref_param_type = False

html_theme = "furo"
html_title = f"blockmap {release}"
html_static_path = ["_static"]
html_favicon = "_static/favicon.svg"
html_copy_source = False
html_show_sourcelink = False


# The repository's own Markdown files (README.md, CHANGELOG.md,
# CONTRIBUTING.md), included into pages of this folder, link as seen from
# the repository root: `docs/format.md`, `CHANGELOG.md`. Their links are
# read as the including page sees them.
ROOT_PAGES = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "CONTRIBUTING.md": "contributing.md",
}
LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def _root_link(match: re.Match) -> str:
    target = match.group(2)
    path, hash_, fragment = target.partition("#")
    if path.startswith("docs/"):
        path = path.removeprefix("docs/")
    elif path in ROOT_PAGES:
        path = ROOT_PAGES[path]
    return f"{match.group(1)}{path}{hash_}{fragment}{match.group(3)}"


def _include_read(app, relative_path, parent_docname, content):
    if Path(relative_path).parent == Path(".."):
        content[0] = LINK.sub(_root_link, content[0])


def setup(app):
    app.connect("include-read", _include_read)
