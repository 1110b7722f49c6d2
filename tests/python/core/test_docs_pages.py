"""The pages of docs/ that a command regenerates keep what was written by
hand: docs/benchmarks.md's figures behind design choices."""

from bench import report
from helpers import TESTS_DIR

BENCHMARKS = TESTS_DIR.parents[1] / "docs" / "benchmarks.md"


def test_regenerating_benchmarks_keeps_every_kept_section(tmp_path, monkeypatch):
    original = BENCHMARKS.read_text()
    page = tmp_path / "benchmarks.md"
    page.write_text(original)
    kept = {}
    for family in (*report.SECTIONS, *report.HAND_WRITTEN):
        begin, end = report.markers(family)
        assert original.count(begin) == 1 and original.count(end) == 1, family
        kept[family] = original[original.index(begin) : original.index(end) + len(end)]
    assert "| choice | code | measured |" in kept["design"]

    def regenerate(result, path, command, chart=None):
        path.write_text("# Benchmarks\n\nregenerated\n")

    # the bench command's own part of the page, rewritten without a run
    monkeypatch.setattr(report, "_write_markdown", regenerate)
    report.write_markdown(None, page, "python -m bench bench")
    text = page.read_text()
    assert text.startswith("# Benchmarks\n\nregenerated\n")
    for family, section in kept.items():
        assert text.count(section) == 1, family
    assert report.HAND_WRITTEN["design"] in text
