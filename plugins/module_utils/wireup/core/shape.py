"""A node's answer checked against its one typed definition where the controller reads it (pure
Python, stdlib only).

What a node sends back (its topology, its GPUs' health read, the GPU fingerprint's document,
DCGM's output, the bench data kept for it, wireup-check's answer) is JSON the node made: a broken or
hostile node can send any shape, and one wrong type deep in one node's answer used to stop the
whole run from being stored (issue 35). Each shape has ONE typed definition, a TypedDict beside the
function that makes it (``bench.NodeData``, ``topology.Topology``, ``gpuhealth.HealthDoc``,
``gpu_trial.TrialNode``, ``gpu_trial.FingerprintDoc``, ``node_check.CheckResult``, ``health.Finding``),
which the producer returns and the consumer checks with :func:`node_problem` before it reads
anything: a node whose answer is not its shape is judged DAMAGED alone (host_record.damaged_record),
the others are stored and judged as always.

The check follows the annotations: a TypedDict is an object with its required keys, each key it
declares of its type (keys it does not declare pass: a newer producer may add some); ``list[X]``,
``dict[str, X]``, ``X | None``, ``Literal[...]``, ``str``, ``bool``, ``int`` (a whole number, not
true or false), ``float`` (any JSON number), bare ``dict``/``list`` (any content) and ``Any``.
Nesting is checked without recursion first (:func:`depth_problem`), so no answer can exhaust the
stack of a later reader. A message names where the answer is wrong and what it is, never a value
the node sent (key names are cut and made printable): it goes into records and the play output.
"""

from __future__ import annotations

import functools
import types
import typing

from . import checks

# Deeper than this, a node's answer is not wireup's: the deepest real ones are 6 (a bench node's
# data) and 7 levels (a GPU trial's fact).
DEPTH = 32
KEY_CHARS = 40
EXCERPT_CHARS = 120


class Malformed(ValueError):
    """A node's answer that is not its typed shape; the message says where and what is wrong."""


def _type_name(value):
    if isinstance(value, bool):
        return "true or false"
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        type(None): "null",
        int: "a whole number",
    }.get(type(value), "a number" if isinstance(value, float) else type(value).__name__)


def _key(key):
    """A key the node sent, fit to name a place: printable, cut."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(key))
    return text[:KEY_CHARS] + ("..." if len(text) > KEY_CHARS else "")


def _name(path):
    """The place a path of keys (str) and list indexes (int) names: 'topology.gpus[0].index'; the
    path is kept as it is and named only when something is wrong there (most values are right)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{_key(part)}" if out else _key(part))
    return out or "it"


def excerpt(text):
    """Node text as a record may quote it: one line of printable characters, at most
    EXCERPT_CHARS."""
    line = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    return line[:EXCERPT_CHARS] + ("..." if len(line) > EXCERPT_CHARS else "")


@functools.cache
def _hints(typed):
    return typing.get_type_hints(typed)


def keys(typed):
    """The keys a TypedDict declares (its own and its bases')."""
    return frozenset(_hints(typed))


def _typeddict_problem(value, typed, path):
    if not isinstance(value, dict):
        return f"{_name(path)} is {_type_name(value)}, not an object"
    missing = sorted(k for k in typed.__required_keys__ if k not in value)
    if missing:
        return f"{_name(path)} has no {', '.join(missing)}"
    for key, hint in _hints(typed).items():
        if key in value:
            found = _problem(value[key], hint, (*path, key))
            if found:
                return found
    return ""


def _union_problem(value, arms, path):
    # The arm of the value's own kind first: it usually fits, and the others' messages are not made.
    ordered = sorted(arms, key=lambda arm: _container(arm) is not type(value))
    found = []
    for arm in ordered:
        said = _problem(value, arm, path)
        if not said:
            return ""
        found.append(said)
    # That arm's message says most ("health.gpus is a string, not a list").
    if _container(ordered[0]) is type(value):
        return found[0]
    names = " or ".join(_SCALARS[_container(arm)][1] for arm in arms)
    return f"{_name(path)} is {_type_name(value)}, not {names}"


@functools.cache
def _container(hint):
    if typing.is_typeddict(hint):
        return dict
    return typing.get_origin(hint) or hint


def _items_problem(value, args, path):
    """list[X]: a list; each item X."""
    if not isinstance(value, list):
        return f"{_name(path)} is {_type_name(value)}, not a list"
    for i, item in enumerate(value):
        found = _problem(item, args[0], (*path, i))
        if found:
            return found
    return ""


def _mapping_problem(value, args, path):
    """dict[str, X]: an object; each value X."""
    if not isinstance(value, dict):
        return f"{_name(path)} is {_type_name(value)}, not an object"
    for key, item in value.items():
        found = _problem(item, args[1], (*path, key))
        if found:
            return found
    return ""


_SCALARS = {
    str: (lambda v: isinstance(v, str), "a string"),
    bool: (lambda v: isinstance(v, bool), "true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    float: (checks.is_number, "a number"),
    dict: (lambda v: isinstance(v, dict), "an object"),  # bare: any content
    list: (lambda v: isinstance(v, list), "a list"),  # bare: any content
    type(None): (lambda v: v is None, "null"),
}


def _literal_problem(value, args, path):
    if value in args and not isinstance(value, bool):
        return ""
    return f"{_name(path)} is not one of {', '.join(map(str, args))}"


# The checks of the types with arguments (list[X], dict[str, X], X | None, Literal[...]), by the
# type's origin.
_BY_ORIGIN = {
    typing.Union: _union_problem,
    getattr(types, "UnionType", typing.Union): _union_problem,  # X | None
    typing.Literal: _literal_problem,
    list: _items_problem,
    dict: _mapping_problem,
}


def _scalar_problem(value, scalar, path):
    return "" if scalar[0](value) else f"{_name(path)} is {_type_name(value)}, not {scalar[1]}"


def _no_problem(_value, _args, _path):
    return ""


@functools.cache
def _check_of(hint):
    """(check, its argument) of a type: looked into once per type (typing's introspection is most
    of the cost when it is done for every value of a fleet's answers, issue 39)."""
    scalar = _SCALARS.get(hint)
    if scalar:
        return _scalar_problem, scalar
    if hint is typing.Any or hint is object:
        return _no_problem, None
    if typing.is_typeddict(hint):
        return _typeddict_problem, hint
    check = _BY_ORIGIN.get(typing.get_origin(hint))
    if check:
        return check, typing.get_args(hint)
    raise TypeError(f"shape.problem: {hint!r} is not a type it checks")


def _problem(value, hint, path):
    check, arg = _check_of(hint)
    return check(value, arg, path)


def problem(value, hint, where="") -> str:
    """What makes ``value`` not of the type ``hint`` ('' when nothing): the first place that is
    wrong, named from ``where`` (the module docstring says which types it knows)."""
    return _problem(value, hint, (where,) if where else ())


def depth_problem(value, where="", limit=DEPTH) -> str:
    """A value nested deeper than ``limit`` objects and lists ('' when it is not), found without
    recursion; the message names the key under ``where`` that holds the deep part."""
    stack = [(value, 1, ())]
    while stack:
        item, depth, top = stack.pop()
        if depth > limit:
            return f"{_name(((where,) if where else ()) + top)} is nested deeper than {limit} levels"
        # Only what can be too deep goes on the stack (a container, or anything one level past
        # the limit): a node's many numbers and strings are looked at once, never held.
        if isinstance(item, dict):
            past = depth >= limit
            stack.extend(
                (v, depth + 1, top or (k,)) for k, v in item.items() if past or isinstance(v, _NESTS)
            )
        elif isinstance(item, list):
            past = depth >= limit
            stack.extend((v, depth + 1, top) for v in item if past or isinstance(v, _NESTS))
    return ""


_NESTS = (dict, list)


def node_problem(value, hint, where="") -> str:
    """A node's answer against its typed definition: too deep, or not its shape ('' when fine)."""
    return depth_problem(value, where) or problem(value, hint, where)


def check(value, hint, where=""):
    """``value`` when it is of its shape (node_problem); else Malformed saying why."""
    found = node_problem(value, hint, where)
    if found:
        raise Malformed(found)
    return value


def failure(err) -> str:
    """Why a node could not be judged, in one line for its record: a Malformed's own message, else
    the error's kind and a cut excerpt of what it said (no more of the node's text than that)."""
    if isinstance(err, Malformed):
        return excerpt(str(err))
    if isinstance(err, RecursionError):
        return "its answer is nested too deeply to read (RecursionError)"
    said = excerpt(str(err))
    return f"{type(err).__name__} while judging it" + (f": {said}" if said else "")
