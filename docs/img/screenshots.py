"""Make the README's pictures from the committed H200 examples (run as root, from the repository
root, with Debian's chromium installed: `make deps`):

    .venv/bin/python docs/img/screenshots.py

report-h200.png  docs/example-h200x2/healthy/report.html (bench.yml's own page) as Chromium draws it
fabric-h200.png  the fabric section of the 1x H200 netns run with one host shaped: the fabric bench
                 writes Markdown and a PNG only, so its fabric.md is turned into the bench report's
                 sections and rendered by the report's own HTML renderer (assemble._render_html),
                 then drawn by Chromium. Nothing is edited but Markdown markup (`, **).
Both are cut to the top of the page and reduced to a palette so each stays well under 300 kB.
"""

import pathlib
import re
import subprocess
import sys
import tempfile

from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / ".collections"))
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import assemble  # noqa: E402

OUT = ROOT / "docs" / "img"
REPORT = ROOT / "docs/example-h200x2/healthy/report.html"
FABRIC = ROOT / "docs/example-h200x1/fabric-netns-2026-12-02/results/fabric/20261202T042858Z"
CHROMIUM = [
    "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars",
]  # fmt: skip


def _plain(text):
    return re.sub(r"`|\*\*", "", text).strip()


def md_sections(text):
    """fabric.md's headings, paragraphs, list items, tables and images as report sections."""
    sections, table = [], None
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            cells = [_plain(c) for c in line.strip().strip("|").split("|")]
            if table is None:
                table = (cells, [])
            elif not set("".join(cells)) <= set("-: "):
                table[1].append(cells)
            continue
        if table is not None:
            sections.append(("table", table))
            table = None
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            sections.append(("h", (level, _plain(line[level:]))))
        elif m := re.fullmatch(r"!\[(.*)\]\((.*)\)", line.strip()):
            sections.append(("img", (m.group(2), m.group(1))))
        elif line.strip():
            sections.append(("p", _plain(line.lstrip("- "))))
    return sections


def shoot(url, png, width, height):
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [*CHROMIUM, f"--user-data-dir={profile}", f"--window-size={width},{height}",
             f"--screenshot={png}", url],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    image = Image.open(png).convert("RGB").quantize(colors=256)
    image.save(png, optimize=True)
    print(f"{png.relative_to(ROOT)}: {width}x{height}, {png.stat().st_size // 1024} kB")


def main():
    shoot(REPORT.as_uri(), OUT / "report-h200.png", 1200, 1370)
    sections = md_sections((FABRIC / "fabric.md").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        page = pathlib.Path(tmp) / "fabric.html"
        page.write_text(assemble._render_html(sections, str(FABRIC)))
        shoot(page.as_uri(), OUT / "fabric-h200.png", 1200, 1000)


if __name__ == "__main__":
    main()
