"""Output formats only: Markdown text and tables, PNG figures (matplotlib, imported lazily inside
pyplot: the node-side check never loads it). Nothing here knows a record."""

from __future__ import annotations

import io
import re

from ..core import atomicfile
from ..judge import bandwidth


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


# ---------------------------------------------------------------- cells shared by the report's parts
def fmt(value, digits=1):
    """A figure with this many digits, '-' for None."""
    return "-" if value is None else f"{value:.{digits}f}"


def pct(ratio):
    """A ratio as a whole percentage, '-' for None."""
    return "-" if ratio is None else f"{ratio * 100:.0f}%"


def human_bytes(size):
    """A message size as the report writes it (bandwidth.human_bytes, short)."""
    return bandwidth.human_bytes(size, short=True)


def safe_name(name):
    """A host or key as a file name in the run folder (anything but [A-Za-z0-9_.-] becomes _)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(name))


def size_axis(ax, ylabel):
    """A message-size axis (log2) with the figure's label and a grid."""
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
