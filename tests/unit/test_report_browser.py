"""report.html as a real browser shows it (issue 28 item 4): headless Chromium loads the page the
report code makes from the 2x H200's real record and plots (docs/example-h200x2/healthy), and the
DOM it ends with must hold every table and every image decoded (naturalWidth > 0).

The page is rendered by report._sections/_render_html from the committed record and PNGs rather
than write_report, which would redraw the plots with matplotlib (seconds of import on a loaded
machine) without testing anything more about the browser. A short script appended to a copy of
the page writes each image's decoded size into the DOM once the page has loaded; --dump-dom then
prints that DOM. Only file:// URLs, nothing remote. Chromium comes from `make deps` (Debian's
chromium); without it this test skips, which fails under `make test` (tests/conftest.py).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

import pytest

from wireup import report

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs/example-h200x2/healthy"
PLOTS = {
    ("busbw", "localhost"): "busbw_localhost.png",
    ("topology", "localhost"): "topology_localhost.png",
    ("torch", None): "torch.png",
}
PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    img.setAttribute("data-decoded", img.naturalWidth + "x" + img.naturalHeight);
  }
  document.body.setAttribute("data-loaded", "1");
});
</script>"""


def _chromium():
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (make deps installs Debian's chromium)")
    return found


class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.images, self.headers, self.loaded = 0, [], [], False
        self._in_th = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables += 1
        elif tag == "img":
            self.images.append((attrs.get("alt"), attrs.get("data-decoded")))
        elif tag == "body":
            self.loaded = attrs.get("data-loaded") == "1"
        self._in_th = tag == "th"

    def handle_data(self, data):
        if self._in_th:
            self.headers.append(data.strip())
            self._in_th = False


def render(run_dir, plots=PLOTS, drop_tables=0):
    """The report page for the example's record, with plots read from run_dir."""
    record = json.loads((EXAMPLE / "localhost.json").read_text())
    sections = report._sections(record["run_id"], {"localhost": record}, plots, "")
    for _ in range(drop_tables):
        sections.remove(next(s for s in sections if s[0] == "table"))
    return report._render_html(sections, str(run_dir)), sum(s[0] == "table" for s in sections)


def browse(page_html, tmp_path):
    """Load the page in headless Chromium; return the DOM it ended with, parsed."""
    page = tmp_path / "report.html"
    page.write_text(page_html.replace("</body>", PROBE + "</body>"))
    with tempfile.TemporaryDirectory() as profile:
        out = subprocess.run(
            [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
    dom = _Dom()
    dom.feed(out.stdout)
    return dom


def problems(dom, tables):
    """What the browser shows wrong: missing tables, images that did not decode."""
    found = [] if dom.loaded else ["the page never finished loading"]
    if dom.tables != tables:
        found.append(f"{dom.tables} tables in the DOM, {tables} expected")
    for alt, decoded in dom.images:
        width = int((decoded or "0x0").split("x")[0])
        if width == 0:
            found.append(f"image {alt!r} did not decode ({decoded})")
    return found


def test_the_h200_report_shows_its_tables_and_images(tmp_path):
    page, tables = render(EXAMPLE)
    dom = browse(page, tmp_path)
    assert problems(dom, tables) == []
    assert tables >= 5 and len(dom.images) == len(PLOTS)
    assert {"collective", "verdict", "busbw GB/s", "expected GB/s"} <= set(dom.headers)
    assert ("busbw and latency vs size on localhost", "1200x450") in dom.images


def test_a_broken_image_and_a_missing_table_are_seen(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in PLOTS.values():
        shutil.copy(EXAMPLE / name, run_dir / name)
    (run_dir / "torch.png").write_bytes((EXAMPLE / "torch.png").read_bytes()[:64])  # cut off
    page, tables = render(run_dir, drop_tables=1)
    found = problems(browse(page, tmp_path), tables + 1)
    assert f"{tables} tables in the DOM, {tables + 1} expected" in found
    assert any("'torch.distributed all_reduce busbw' did not decode" in p for p in found), found
    assert len(found) == 2, found
