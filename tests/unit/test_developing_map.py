"""docs/DEVELOPING.md's map of plugins/module_utils/wireup (issue 36 item 2): the table of "The house
of module_utils" names every package and module on disk and nothing that is gone, each package's
"may import" is what `.importlinter`'s layers allow it, and every `package/module.py` the page names
is there."""

from __future__ import annotations

import configparser
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "DEVELOPING.md"
PACKAGE_DIR = REPO / "plugins" / "module_utils" / "wireup"
SECTION = "## The house of module_utils"
ROW = re.compile(r"\| `([a-z_]+)/` \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$")
NAME = re.compile(r"`([a-z_]+)`")
# A path written "`pkg/name.py` (new)" is one a worked example adds, not one on disk.
MODULE_PATH = re.compile(r"`(?:plugins/module_utils/wireup/)?([a-z_]+)/([a-z_0-9]+)\.py`(?! \(new\))")


def house_map(text: str) -> dict[str, tuple[list[str], list[str]]]:
    """{package: (what it may import, its modules)} from the section's table."""
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0] if SECTION in text else ""
    rows = {}
    for line in section.splitlines():
        match = ROW.match(line)
        if match:
            package, _what, may_import, modules = match.groups()
            rows[package] = (NAME.findall(may_import), NAME.findall(modules))
    return rows


def tree(package_dir: pathlib.Path) -> dict[str, list[str]]:
    """{package: its modules} on disk; a package is a folder with an __init__.py."""
    return {
        init.parent.name: sorted(p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py")
        for init in sorted(package_dir.glob("*/__init__.py"))
    }


def allowed_imports(config: pathlib.Path) -> dict[str, list[str]]:
    """{package: the packages of the layers below it} from the layers contract."""
    parser = configparser.ConfigParser()
    parser.read(config, encoding="utf-8")
    raw = parser["importlinter:contract:layers"]["layers"]
    layers = [[name.strip(" ()") for name in line.split("|")] for line in raw.splitlines() if line.strip()]
    return {
        package: [name for below in layers[n + 1 :] for name in below]
        for n, layer in enumerate(layers)
        for package in layer
    }


def differences(text: str, package_dir: pathlib.Path, config: pathlib.Path) -> list[str]:
    """What the map says that the tree or the contracts do not, and the other way round."""
    mapped, on_disk, allowed = house_map(text), tree(package_dir), allowed_imports(config)
    found = [f"package {p}/ is not in the map" for p in sorted(set(on_disk) - set(mapped))]
    found += [f"package {p}/ in the map is gone" for p in sorted(set(mapped) - set(on_disk))]
    for package in sorted(set(mapped) & set(on_disk)):
        may_import, modules = mapped[package]
        disk, named = set(on_disk[package]), set(modules)
        found += [f"{package}/{m}.py is not in the map" for m in sorted(disk - named)]
        found += [f"{package}/{m}.py in the map is gone" for m in sorted(named - disk)]
        if may_import != allowed.get(package):
            found.append(
                f"{package}/ may import {allowed.get(package)} (.importlinter), the map says {may_import}"
            )
    for package, module in sorted(set(MODULE_PATH.findall(text))):
        if package in on_disk and module not in on_disk[package]:
            found.append(f"the page names {package}/{module}.py, which is gone")
    return found


def test_the_map_of_packages_matches_the_tree_and_the_contracts():
    assert differences(PAGE.read_text(encoding="utf-8"), PACKAGE_DIR, REPO / ".importlinter") == []


def test_the_check_sees_each_kind_of_difference(tmp_path):
    for name in ("core/__init__.py", "core/apt.py", "core/new.py", "probe/__init__.py", "probe/node.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    config = tmp_path / "contracts.ini"
    config.write_text("[importlinter:contract:layers]\nlayers =\n    probe\n    core\n", encoding="utf-8")
    page = (
        f"{SECTION}\n| package | what | may import | modules |\n|---|---|---|---|\n"
        "| `core/` | shared | `probe` | `apt`, `old` |\n"
        "| `judge/` | figures | `core` | `bandwidth` |\n"
        "Also `probe/topology.py`, and an example's `probe/example.py` (new).\n## Next\n"
    )
    assert differences(page, tmp_path, config) == [
        "package probe/ is not in the map",
        "package judge/ in the map is gone",
        "core/new.py is not in the map",
        "core/old.py in the map is gone",
        "core/ may import [] (.importlinter), the map says ['probe']",
        "the page names probe/topology.py, which is gone",
    ]
    assert differences("no map", tmp_path, config)[:2] == [
        "package core/ is not in the map",
        "package probe/ is not in the map",
    ]
