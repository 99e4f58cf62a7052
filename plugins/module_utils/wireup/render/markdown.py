"""Output formats only: Markdown text and tables, PNG figures (matplotlib, imported lazily inside
pyplot: the node-side check never loads it). Nothing here knows a record."""

from __future__ import annotations

import io

from ..core import atomicfile


# ---------------------------------------------------------------- plots
def save_png(fig, path):
    """Save a matplotlib figure as PNG, atomically (atomicfile)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    atomicfile.write_bytes(path, buffer.getvalue())


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save_figure(plt, fig, path):
    """Lay the figure out, write it as PNG (save_png: atomically) and close it."""
    fig.tight_layout()
    save_png(fig, path)
    plt.close(fig)


# ---------------------------------------------------------------- text
# ">" stays: without a "<" it opens no tag, and the reports' own ">=" stays readable as text.
_MD_ESCAPES = {"&": "&amp;", "<": "&lt;", "[": "\\[", "]": "\\]", "`": "\\`", "\\": "\\\\"}


def md_text(value):
    """Text for a Markdown report, whatever a node put in it: one line (a line break cannot start
    a block), no raw HTML (< and & are entities: a <script> is shown, never run), no links or
    images ([ and ] escaped) and no code spans (backticks escaped)."""
    text = " ".join(str("" if value is None else value).splitlines())
    return "".join(_MD_ESCAPES.get(ch, ch) for ch in text)


def md_table(header, rows):
    def cell(value):
        return md_text(value).replace("|", "\\|")

    out = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out
