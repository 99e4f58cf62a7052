"""Every module's documentation is complete (issue 36 item 3): a real author line (not
``!UNKNOWN``), ``attributes:`` for check_mode, diff_mode and platform as Ansible's own modules write
them, and a ``sample:`` for every value RETURN documents (a value with ``contains:`` is described by
its parts, each with its sample). Judged on what ``ansible-doc`` shows a user, the documentation
fragments (plugins/doc_fragments/) merged in; the attributes the modules share are written once,
in the fragment, not repeated in each module."""

from __future__ import annotations

import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
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


@pytest.fixture(scope="module")
def shown() -> dict[str, dict]:
    """What ``ansible-doc --json`` shows for every module, fragments merged: one run for all."""
    names = [f"wireup.cluster.{path.stem}" for path in MODULES]
    run = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "module", "--json", *names],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=busy.HANG_S,
    )  # fmt: skip
    assert run.returncode == 0 and "[ERROR]" not in run.stderr, run.stderr
    return {name.rsplit(".", 1)[-1]: value for name, value in json.loads(run.stdout).items()}


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_the_module_documents_its_author_attributes_and_samples(path, shown):
    assert problems(shown[path.stem]["doc"], shown[path.stem].get("return") or {}) == []


def fragments() -> dict[str, dict]:
    """Each documentation fragment of plugins/doc_fragments/, by the name a module extends it with."""
    found = {}
    for path in (ROOT / "plugins" / "doc_fragments").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                name = node.targets[0].id
                suffix = "" if name == "DOCUMENTATION" else f".{name.lower()}"
                found[f"wireup.cluster.{path.stem}{suffix}"] = yaml.safe_load(node.value.value)
    return found


def repeated(doc: dict, known: dict[str, dict]) -> list[str]:
    """The module's own attribute entries that say what a fragment it extends already says."""
    own = doc.get("attributes") or {}
    found = []
    for name in doc.get("extends_documentation_fragment") or []:
        for key, entry in ((known.get(name) or {}).get("attributes") or {}).items():
            if own.get(key) == entry:
                found.append(f"attributes.{key} repeats {name}")
    return found


@pytest.mark.parametrize("path", MODULES, ids=[p.stem for p in MODULES])
def test_the_module_extends_the_shared_attributes_and_repeats_none(path):
    doc = docs(path)["DOCUMENTATION"]
    known = fragments()
    assert "wireup.cluster.attributes" in (doc.get("extends_documentation_fragment") or [])
    assert set(doc["extends_documentation_fragment"]) <= set(known)
    assert repeated(doc, known) == []


def test_a_repeated_attribute_is_named():
    known = fragments()
    doc = {
        "extends_documentation_fragment": [
            "wireup.cluster.attributes",
            "wireup.cluster.attributes.read_only",
        ],
        "attributes": {
            "check_mode": {"support": "full", "description": "Only reads; the same in check mode."},
            "diff_mode": {"support": "none", "description": "Writes no diff of the files it writes."},
        },
    }
    assert repeated(doc, known) == ["attributes.check_mode repeats wireup.cluster.attributes.read_only"]


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
