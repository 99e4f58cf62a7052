"""Prometheus' text exposition format (node_exporter's textfile collector reads it): metric
families checked as they are made, and written as text. Output format only: what the families say
is the report's and the check's (report/metrics.py, check/)."""

from __future__ import annotations

import math
import re

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def utf8(value) -> str:
    """``value`` as text that encodes as UTF-8, which the format requires: what a node named with
    bytes that are not UTF-8 (a NIC 'eno\\xff1' reads as 'eno\\udcff1') keeps as a visible
    backslash escape, so two such names stay two label values."""
    return str(value).encode("utf-8", "backslashreplace").decode("utf-8")


def escape_label(value) -> str:
    """A label value as the exposition format writes it between double quotes."""
    return utf8(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text) -> str:
    """HELP text: backslash and newline escaped (double quotes stay)."""
    return utf8(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value) -> str:
    """A sample value: integers as such, floats by repr, NaN and infinities by their names."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return repr(number)


def _check_labels(name, labels):
    for key in labels:
        if not LABEL_NAME.fullmatch(str(key)) or str(key).startswith("__"):
            raise ValueError(f"{name}: label name {key!r} is not a Prometheus label name")


def family(name, help_text, samples, kind="gauge"):
    """One metric family: {name, help, type, samples [(labels, value)]}. Samples whose value is
    None (not reported) are left out. ValueError for a name that is not a metric name, a label
    name that is not a label name, a value that is not a number, or a label set given twice."""
    if not METRIC_NAME.fullmatch(str(name)):
        raise ValueError(f"{name!r} is not a Prometheus metric name")
    if kind not in ("gauge", "counter", "untyped"):
        raise ValueError(f"{name}: type {kind!r} is not written by wireup")
    kept, seen = [], set()
    for given, value in samples:
        if value is None:
            continue
        labels = {str(k): str(v) for k, v in (given or {}).items()}
        _check_labels(name, labels)
        if isinstance(value, str) or not isinstance(value, (int, float)):
            raise ValueError(f"{name}{labels}: value {value!r} is not a number")
        key = tuple(sorted(labels.items()))
        if key in seen:
            raise ValueError(f"{name}: the label set {labels} is given twice")
        seen.add(key)
        kept.append((labels, value))
    return {"name": str(name), "help": str(help_text), "type": kind, "samples": kept}


def _sample_line(name, labels, value):
    inside = ",".join(f'{k}="{escape_label(v)}"' for k, v in labels.items())
    return f"{name}{{{inside}}} {format_value(value)}" if inside else f"{name} {format_value(value)}"


def render(families) -> str:
    """The exposition text of the families with at least one sample, in the order given.
    ValueError when a family name is given twice (node_exporter refuses the file)."""
    lines, names = [], set()
    for fam in families:
        if not fam["samples"]:
            continue
        if fam["name"] in names:
            raise ValueError(f"metric family {fam['name']} is given twice")
        names.add(fam["name"])
        lines.append(f"# HELP {fam['name']} {escape_help(fam['help'])}")
        lines.append(f"# TYPE {fam['name']} {fam['type']}")
        lines.extend(_sample_line(fam["name"], labels, value) for labels, value in fam["samples"])
    return "\n".join(lines) + "\n" if lines else ""
