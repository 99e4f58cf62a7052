"""wireup-check as one executable file: a zip (Python's zipapp format) of the modules of this
package it imports, with the node's python3 as its interpreter line. The node_check role builds it
on the controller and copies it to every node, so the check runs the same parsers as the
controller (one rule in one place) with the standard library only.

The bytes depend on the package's sources and the interpreter line only (entries sorted, fixed
dates and modes), so copying it again reports no change until wireup itself changes.

    python3 -m wireup.check.bundle OUT [--python /usr/bin/python3]   (PYTHONPATH=plugins/module_utils)

It runs as the top-level package ``wireup`` (the zip's own name for it), so this package imports
relatively and with the standard library alone at module level (tests/unit/test_checkrun.py
builds the file and runs it with ``python3 -S -I``).
"""

from __future__ import annotations

import argparse
import io
import modulefinder
import os
import re
import sys
import zipfile

from ..core import atomicfile

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = "from wireup.check.run import main\n\nraise SystemExit(main())\n"
FIXED_DATE = (1980, 1, 1, 0, 0, 0)
INTERPRETER = re.compile(r"/[A-Za-z0-9._/+-]{1,255}")


def needed(package=PACKAGE) -> list[str]:
    """The package's files wireup-check imports: check/run.py and, at any depth, what it imports
    (inside functions too: the standard library's modulefinder reads each module's bytecode), with
    their packages' __init__.py; paths relative to the package, sorted. The report, the gate and
    the plans stay on the controller."""
    top = os.path.basename(package)
    finder = modulefinder.ModuleFinder(path=[os.path.dirname(package)])
    finder.import_hook(f"{top}.check.run")
    return sorted(
        os.path.relpath(module.__file__, package)
        for name, module in finder.modules.items()
        if (name == top or name.startswith(top + ".")) and module.__file__
    )


def sources(package=PACKAGE):
    """{name in the zip: text} of the modules wireup-check needs (wireup/PACKAGE/NAME.py) and
    __main__.py."""
    out = {"__main__.py": MAIN}
    for relative in needed(package):
        with open(os.path.join(package, relative), encoding="utf-8") as handle:
            out["wireup/" + relative.replace(os.sep, "/")] = handle.read()
    return out


def build(python="/usr/bin/python3", package=PACKAGE) -> bytes:
    """The executable zip's bytes. ValueError when ``python`` is not an absolute path of plain
    characters (it becomes the file's first line)."""
    if not INTERPRETER.fullmatch(str(python)):
        raise ValueError(f"{python!r} is not an absolute path to a python3 (node_check_python)")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in sorted(sources(package).items()):
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, text.encode("utf-8"))
    return f"#!{python}\n".encode() + buffer.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m wireup.check.bundle", description=__doc__.split("\n\n", maxsplit=1)[0]
    )
    parser.add_argument("out", help="where to write wireup-check")
    parser.add_argument("--python", default="/usr/bin/python3", help="the nodes' python3")
    args = parser.parse_args(argv)
    data = build(args.python)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    try:
        with open(args.out, "rb") as handle:
            if handle.read() == data:
                sys.stdout.write(f"{args.out}: unchanged\n")
                return 0
    except OSError:
        pass
    atomicfile.write_bytes(args.out, data, mode=0o755)
    sys.stdout.write(f"{args.out}: written ({len(data)} bytes)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
