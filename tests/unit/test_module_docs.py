"""Every module's documentation is complete (issue 36 item 3): a real author line (not
``!UNKNOWN``), ``attributes:`` for check_mode, diff_mode and platform as Ansible's own modules write
them, and a ``sample:`` for every value RETURN documents (a value with ``contains:`` is described by
its parts, each with its sample)."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULES = sorted((ROOT / "plugins" / "modules").glob("wireup_*.py"))
# ansible-test's validate-modules rule for an author line: "Name (@github-handle)".
AUTHOR = re.compile(r"[\w][\w .-]* \(@[\w-]+\)")
ATTRIBUTES = ("check_mode", "diff_mode", "platform")
SUPPORT = {"full", "partial", "none", "N/A"}


def docs(path: pathlib.Path) -> dict[str, dict]:
    """The module's DOCUMENTATION and RETURN, each parsed as YAML."""
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in ("DOCUMENTATION", "RETURN"):
            found[node.targets[0].id] = yaml.safe_load(ast.literal_eval(node.value)) or {}
    return found


def missing_samples(values: dict, prefix: str = "") -> list[str]:
    """Each RETURN value (nested through ``contains``) that has no ``sample``."""
    missing = []
    for name, value in values.items():
        if isinstance(value.get("contains"), dict):
            missing += missing_samples(value["contains"], f"{prefix}{name}.")
        elif "sample" not in value:
            missing.append(prefix + name)
    return missing


def problems(doc: dict, returned: dict) -> list[str]:
    found = []
    authors = doc.get("author") or []
    authors = [authors] if isinstance(authors, str) else authors
    if not authors or not all(AUTHOR.fullmatch(a) for a in authors):
        found.append(f"author {authors!r} is not 'Name (@handle)'")
    attributes = doc.get("attributes") or {}
    for name in ATTRIBUTES:
        attribute = attributes.get(name) or {}
        if attribute.get("support") not in SUPPORT or not attribute.get("description"):
            found.append(f"attributes.{name} needs support (full, partial, none, N/A) and a description")
    if "platform" in attributes and not attributes["platform"].get("platforms"):
        found.append("attributes.platform needs platforms")
    found += [f"RETURN {name} has no sample" for name in missing_samples(returned)]
    return found


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_the_module_documents_its_author_attributes_and_samples(path):
    parsed = docs(path)
    assert problems(parsed["DOCUMENTATION"], parsed.get("RETURN", {})) == []


def test_the_check_names_each_gap():
    doc = {
        "author": "wireup (!UNKNOWN)",
        "attributes": {"check_mode": {"support": "full", "description": "x"}},
    }
    returned = {"a": {"type": "str"}, "b": {"type": "dict", "contains": {"c": {"type": "int"}}}}
    assert problems(doc, returned) == [
        "author ['wireup (!UNKNOWN)'] is not 'Name (@handle)'",
        "attributes.diff_mode needs support (full, partial, none, N/A) and a description",
        "attributes.platform needs support (full, partial, none, N/A) and a description",
        "RETURN a has no sample",
        "RETURN b.c has no sample",
    ]
