"""A check of every internal link of the built site, once its pages are written.

Every ``href`` and ``src`` of every HTML page that points inside the site
(no scheme, not protocol-relative) must name a file that exists, and its
``#fragment``, if any, an ``id`` (or ``name``) of that page. Each broken
link is a warning, an error under ``-W``. Links to other sites are not
followed: the site is built without network.

:func:`broken_links` is the check itself; ``tests/python/docs`` runs it on
crafted pages to show that it finds what it must.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sphinx.util import logging

logger = logging.getLogger(__name__)

# the attributes that hold links, per tag
LINKS = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[int, str]] = []  # (line, url)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name"):
            if values.get(key):
                self.ids.add(values[key])
        url = values.get(LINKS.get(tag, ""))
        if url is not None:
            self.links.append((self.getpos()[0], url))


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    page.close()
    return page


def broken_links(site: Path) -> list[str]:
    """``"page:line: url: why"`` for each internal link of the HTML pages
    under ``site`` whose file or anchor does not exist."""
    site = site.resolve()
    parsed: dict[Path, _Page] = {}

    def page(path: Path) -> _Page:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    problems = []
    for path in sorted(site.rglob("*.html")):
        for line, url in page(path).links:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith("//"):
                continue  # another site, mailto:, data:, javascript:
            where = f"{path.relative_to(site)}:{line}: {url}"
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if site not in target.parents and target != site:
                problems.append(f"{where}: outside the site")
                continue
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{where}: no such file")
                continue
            fragment = unquote(parts.fragment)
            if fragment and target.suffix == ".html" and fragment not in page(target).ids:
                problems.append(f"{where}: no anchor #{fragment} in {target.relative_to(site)}")
    return problems


def _check(app, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    problems = broken_links(Path(app.outdir))
    for problem in problems:
        logger.warning(f"broken internal link: {problem}")
    logger.info(f"internal links checked: {len(problems)} broken")


def setup(app):
    app.connect("build-finished", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
