"""No test's verdict depends on spare CPU (issue 35 item 8; tests/busy.py says how tests meet time).

Read from the tests' own source (the AST, not a grep): a wall-clock figure (time.monotonic(),
time.time(), time.perf_counter(), or a name computed from one) may never be the smaller side of
a comparison (``took < 150``, ``time.monotonic() - t0 < 1``, ``while time.monotonic() <
deadline``): behaviour waits go through ``busy.wait_until``, product bounds are read from the
product's own records, cost claims are CPU time (``busy.cpu_seconds``). A subprocess's or a
playbook's ``timeout=`` is a hang guard: no literal below ``busy.HANG_S``. Hypothesis's
``settings(deadline=...)`` is a wall-clock bound on every example: only ``deadline=None``. A line
may keep a wall-clock comparison with ``# busy: REASON`` (why the load of the machine cannot turn it).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from tests import busy

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Every file whose code decides a test's verdict; tests/perf's scripts measure on purpose and
# judge nothing (their figures go to docs/performance.md), tests/gpu runs by hand.
SOURCES = sorted(
    [
        *(ROOT / "tests/unit").glob("*.py"),
        *(ROOT / "tests/integration").glob("*.py"),
        *(ROOT / "tests/testbed").glob("*.py"),
        *(ROOT / "tests/perf").glob("test_*.py"),
        ROOT / "tests/conftest.py",
    ]
)
CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
# Calls whose timeout= is a hang guard: a subprocess, a wait for one, an ssh command, a playbook.
GUARDED = {"run", "Popen", "communicate", "wait", "check_output", "check_call", "ssh", "run_playbook"}
SMALL_SIDE = {ast.Lt: "left", ast.LtE: "left", ast.Gt: "right", ast.GtE: "right"}


def _is_clock(node) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "time"
        and node.func.attr in CLOCKS
    )


def _mentions(node, tainted) -> bool:
    """Whether an expression reads the wall clock, directly or through a name computed from it."""
    return any(_is_clock(n) or (isinstance(n, ast.Name) and n.id in tainted) for n in ast.walk(node))


def _tainted(scope) -> set[str]:
    """Names in ``scope`` (a function with its nested ones, or a module) assigned from the wall clock."""
    tainted: set[str] = set()
    assigns = [n for n in ast.walk(scope) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))]
    grew = True
    while grew:
        grew = False
        for node in assigns:
            if node.value is None or not _mentions(node.value, tainted):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)):
                grew |= name not in tainted
                tainted.add(name)
    return tainted


def _excused(lines, node) -> bool:
    """A ``# busy: REASON`` on one of the node's lines (a reason after the colon)."""
    for text in lines[node.lineno - 1 : (node.end_lineno or node.lineno)]:
        _, mark, reason = text.partition("# busy:")
        if mark and reason.strip():
            return True
    return False


def _scopes(tree):
    """(nodes, names tainted there): each top-level function and method with the functions nested
    in it, then the module's own statements (no names: a module's clock reads are constants)."""
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for func in members:
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield ast.walk(func), _tainted(func)
    module = [stmt for stmt in tree.body if not isinstance(stmt, (ast.ClassDef, ast.FunctionDef))]
    yield (n for stmt in module for n in ast.walk(stmt)), set()


def _clock_bounds(tree, lines) -> list[str]:
    """Comparisons whose smaller side is a wall-clock figure."""
    found = []
    for nodes, tainted in _scopes(tree):
        for node in nodes:
            if not isinstance(node, ast.Compare) or _excused(lines, node):
                continue
            sides = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                side = SMALL_SIDE.get(type(op))
                small = sides[i] if side == "left" else sides[i + 1] if side else None
                if small is not None and _mentions(small, tainted):
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
                    break
    return found


OPERATIONS = {
    ast.Add: float.__add__,
    ast.Sub: float.__sub__,
    ast.Mult: float.__mul__,
    ast.Div: float.__truediv__,
}


def _literal(node):
    """The number a literal (or literal arithmetic: ``3 * 0.2 + 60``) stands for; None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATIONS:
        left, right = _literal(node.left), _literal(node.right)
        return None if left is None or right is None else OPERATIONS[type(node.op)](left, right)
    return None


def _guards(node):
    """[(argument, value, floor)] of a call or helper whose time argument is a hang guard
    (``timeout`` of GUARDED, at least HANG_S) or a behaviour wait's deadline (``seconds`` of
    wait_until, at least PATIENCE_S)."""
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        pairs = [(k.arg, k.value) for k in node.keywords]
        if name == "wait_until":
            pairs += [("seconds", v) for v in node.args[1:2]]
            return [(a, v, busy.PATIENCE_S) for a, v in pairs if a == "seconds"]
        return [(a, v, busy.HANG_S) for a, v in pairs if a == "timeout"] if name in GUARDED else []
    if isinstance(node, ast.FunctionDef) and node.name in GUARDED:
        args = node.args
        pairs = list(zip(args.args[len(args.args) - len(args.defaults) :], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
        return [(a.arg, d, busy.HANG_S) for a, d in pairs if a.arg == "timeout"]
    return []


def _tight_timeouts(tree, lines) -> list[str]:
    """Hang guards below HANG_S and behaviour waits below PATIENCE_S, given as literals."""
    found = []
    for node in ast.walk(tree):
        for arg, value, floor in _guards(node):
            seconds = _literal(value)
            if seconds is not None and seconds < floor and not _excused(lines, value):
                found.append(f"{value.lineno}: {arg}={ast.unparse(value)}")
    return found


def _example_deadlines(tree, lines) -> list[str]:
    """Hypothesis ``settings(deadline=X)`` with X not None: each example's wall clock against X ms."""
    found = []
    for node in ast.walk(tree):
        name = getattr(node, "func", None)
        name = getattr(name, "attr", None) or getattr(name, "id", None)
        if not isinstance(node, ast.Call) or name != "settings" or _excused(lines, node):
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "deadline" and not (isinstance(value, ast.Constant) and value.value is None):
                found.append(f"{node.lineno}: deadline={ast.unparse(value)}")
    return found


def _findings(path):
    text = path.read_text()
    tree, lines = ast.parse(text), text.splitlines()
    found = [*_clock_bounds(tree, lines), *_tight_timeouts(tree, lines), *_example_deadlines(tree, lines)]
    return [f"{path.relative_to(ROOT)}:{where}" for where in found]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_verdict_is_a_wall_clock_bound_or_a_tight_hang_guard(path):
    assert _findings(path) == []


@pytest.mark.parametrize(
    ("body", "found"),
    [
        # What the rule finds: the forms that failed on the busy machine.
        (["t0 = time.monotonic()", "run()", "took = time.monotonic() - t0", "assert took < 150"], 1),
        (["t0 = time.monotonic()", "assert time.monotonic() - t0 < 1"], 1),
        (["d = time.monotonic() + 5", "while time.monotonic() < d:", "    pass"], 1),
        (["d = time.time() + 5", "if time.time() > d:", "    raise E"], 1),
        (["s = time.perf_counter()", "assert 5.0 > time.perf_counter() - s"], 1),
        (["subprocess.run(argv, timeout=120)"], 1),
        (["tb.ssh('n', 'c', timeout=30)"], 1),
        (["assert busy.wait_until(lambda: done(), 15)"], 1),
        (["assert wait_until(done, seconds=5)"], 1),
        (["s = settings(max_examples=60, deadline=200)"], 1),
        (["s = hypothesis.settings(deadline=timedelta(seconds=1))"], 1),
        # What it leaves: a wall clock on the larger side, a product's figure, an excused line,
        # a generous guard, a timeout passed on by name, a clock used for no comparison.
        (["t0 = time.monotonic()", "took = time.monotonic() - t0", "assert doc['s'] <= took"], 0),
        (["assert record['seconds'] < 5"], 0),
        (["t0 = time.monotonic()", "assert time.monotonic() - t0 < 30  # busy: a reason"], 0),
        (["subprocess.run(argv, timeout=busy.HANG_S)", "proc.wait(timeout=timeout)"], 0),
        (["subprocess.run(argv, timeout=600)"], 0),
        (["proc.wait(timeout=20)  # busy: a grace before SIGKILL"], 0),
        (["assert busy.wait_until(lambda: done())"], 0),
        (["rid = new_run_id(time.time() + 5)"], 0),
        (["s = settings(max_examples=300, deadline=None)"], 0),
    ],
)
def test_the_rule_finds_wall_clock_bounds_and_tight_guards(body, found):
    code = "def t():\n" + "".join(f"    {line}\n" for line in body)
    tree, lines = ast.parse(code), code.splitlines()
    rules = (_clock_bounds, _tight_timeouts, _example_deadlines)
    assert sum(len(rule(tree, lines)) for rule in rules) == found, code


def test_a_helper_whose_timeout_default_is_a_tight_guard_is_found():
    code = "def run(node, *a, timeout=60):\n    pass\n\n\ndef ssh(n, c, timeout=busy.HANG_S):\n    pass\n"
    assert [f.split(":")[0] for f in _tight_timeouts(ast.parse(code), code.splitlines())] == ["1"]
