"""A node's history (issue 37 item 4): every drain, action, recheck and return is an event, one
file per event under ``results/history/HOST/`` (atomic, exclusive: never rewritten), saying who
(the controller's user, or the node-side check) and why. Read back, the events give each node's
time from detection to return, the nodes out of service now and since when, as report lines and as
Prometheus metrics (render/prom.py).

wireup-check's own drains (slurmd's health check, no controller at hand) are the same events,
written on the node into NODE_DIR (``write_node``, at most MAX_NODE_EVENTS uncollected); repair.yml
reads them there (``node_files``), checks each again on the controller and writes it into the
node's history (``collect``: the node's own host name, wireup-check's drains only, never twice),
and only then removes them from the node (``remove_node``)."""

from __future__ import annotations

import json
import os
import re
import time
from typing import TypedDict

from ..core import atomicfile, checks
from ..render import prom

KINDS = ("drain", "action", "recheck", "return")
_WHO = re.compile(r"(?:controller:[a-z_][a-z0-9_-]{0,31}|node:wireup-check)")
_NAME = re.compile(
    r"(?P<time>[0-9]{8}T[0-9]{6}Z)-(?P<seq>[0-9]{3})-(?P<kind>drain|action|recheck|return)\.json"
)
NODE_DIR = "/var/lib/wireup/check/history"  # wireup-check's events on a node until repair.yml collects them
NODE_WHO = "node:wireup-check"
MAX_NODE_EVENTS = 100  # uncollected events a node keeps: a flapping check cannot fill its disk
MAX_NODE_BYTES = 4096  # one event file from a node (an event is about 500 bytes)
MAX_EVENTS = 10000  # per node read back: a history folder flooded by a node cannot stall the report
MAX_TEXT = 300
LAST_TIME = 253402300799.0  # 9999-12-31T23:59:59Z: the last time a date can say
MAX_ROWS = 50  # nodes in the report's History table (out of service first); the rest counted
LAST_EVENTS = 3  # each node's last events in that table


class Event(TypedDict):
    host: str
    kind: str  # KINDS
    time: float  # Unix seconds
    who: str  # "controller:USER" or "node:wireup-check"
    why: str  # one line


class NodeFile(TypedDict):
    """An event file as the node's reader (node_files, module wireup_node_history) sends it."""

    name: str  # TIME-SEQ-KIND.json
    text: str  # its content, at most MAX_NODE_BYTES


class NodeRead(TypedDict):
    """The answer of the module wireup_node_history (repair's ``__repair_node_history``)."""

    files: list[NodeFile]  # read (none with remove)
    unread: list[str]  # an entry not read, and why
    removed: list[str]  # the names removed (remove)


class Collected(TypedDict):
    written: list[str]  # the controller's new event files
    collected: list[str]  # the node's file names now safe to remove (written, or held already)
    refused: list[str]  # lines: what was not collected, and why


class CollectAnswer(Collected):
    """The answer of the module wireup_history_collect (repair's ``__repair_collected``)."""

    show: list[str]  # collected_lines


def event(host, kind, who, why, *, when=None) -> Event:
    """One event, checked: ValueError for a host off the host-name grammar, a kind off KINDS, a
    who off its grammar, a time that is no date (NaN, infinite, before 1970, after 9999); ``why``
    is cut to one printable line."""
    if not checks.is_host_name(str(host)):
        raise ValueError(f"history: {str(host)[:80]!r} is not a host name")
    if kind not in KINDS or not _WHO.fullmatch(str(who)):
        raise ValueError(f"history: kind {kind!r} (one of {KINDS}) or who {str(who)[:40]!r} off its grammar")
    text = " ".join("".join(c if c.isprintable() else " " for c in str(why)).split())[:MAX_TEXT]
    when = float(time.time() if when is None else when)
    if not 0 <= when <= LAST_TIME:  # NaN and infinity fail too
        raise ValueError(f"history: time {when} is not a time between 1970 and 9999")
    return {
        "host": str(host),
        "kind": kind,
        "time": when,
        "who": who,
        "why": text,
    }


# What each kind's items (a plan's list) name the event's host and reason by: the drain step's
# (slurm.DrainPlan's ``drain``: {host, node, reason, argv}), repair's returns
# (repair.ReturnPlan's ``resume``: {host, node, argv, why}), and the remediation's actions and
# rechecks (remediate.Acted's ``events``, remediate.recheck_items: {host, why}).
WHY_KEY = {"drain": "reason", "return": "why", "action": "why", "recheck": "why"}


def who_of(user) -> str:
    """``controller:USER`` for the controller's user; ValueError when the name is off the grammar
    (a POSIX user name, at most 32 characters)."""
    who = f"controller:{user}"
    if not _WHO.fullmatch(who):
        raise ValueError(f"history: the controller's user {str(user)[:40]!r} is not a user name")
    return who


def item_events(kind, items, who, *, when=None) -> list[Event]:
    """One event per item of a plan's list (``items``: the drain step's drain, repair's resume),
    for its ``host``, with its reason (WHY_KEY), all at ``when``; ValueError for a bad one
    (event), before any is written."""
    if kind not in WHY_KEY:
        raise ValueError(f"history: events from a plan's items are of {sorted(WHY_KEY)}, not {kind!r}")
    now = time.time() if when is None else when
    return [
        event(item.get("host"), kind, who, item.get(WHY_KEY[kind]) or "", when=now) for item in items or []
    ]


def write(results_dir, ev: Event) -> str:
    """Writes the event as results/history/HOST/TIME-SEQ-KIND.json (0640, exclusive: the next free
    SEQ when two events share a second); never rewrites one. Returns its path."""
    folder = checks.results_path(results_dir, "history", ev["host"])
    os.makedirs(folder, mode=0o750, exist_ok=True)
    return _write_in(folder, ev)


def _time_stamp(when) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(when))


def _write_in(folder, ev: Event) -> str:
    """The event as folder/TIME-SEQ-KIND.json, exclusive (the next free SEQ in its second)."""
    stamp = _time_stamp(ev["time"])
    for seq in range(1000):
        path = os.path.join(folder, f"{stamp}-{seq:03d}-{ev['kind']}.json")
        try:
            atomicfile.write_json(path, dict(ev), exclusive=True)
            return path
        except FileExistsError:
            continue
    raise ValueError(f"history: 1000 events of {ev['host']} in second {stamp}")


# ------------------------------------------------------------------ wireup-check's events on a node
def write_node(folder, ev: Event, limit=MAX_NODE_EVENTS) -> str:
    """wireup-check's event in the node's own folder (flat: TIME-SEQ-KIND.json, 0640 in 0750,
    exclusive). ValueError when the folder holds ``limit`` event files not yet collected (the
    disk of a node whose check flaps stays bounded); OSError when it cannot be written."""
    os.makedirs(folder, mode=0o750, exist_ok=True)
    held = sum(1 for name in os.listdir(folder) if _NAME.fullmatch(name))
    if held >= limit:
        raise ValueError(
            f"history: {held} events not yet collected in {folder} (at most {limit}): "
            "repair.yml collects them"
        )
    return _write_in(folder, ev)


def node_files(folder, limit=MAX_NODE_EVENTS) -> tuple[list[NodeFile], list[str]]:
    """(the event files of wireup-check's folder on the node, oldest first, at most ``limit``;
    a line for each entry skipped: a name off the grammar, not a regular file (a link is never
    followed), over MAX_NODE_BYTES, past the limit). Nothing when the folder does not exist."""
    if not os.path.lexists(folder):
        return [], []
    if os.path.islink(folder) or not os.path.isdir(folder):
        return [], [f"{folder} is not a folder: nothing read"]
    files, skipped = [], []
    for name in sorted(os.listdir(folder)):
        why = "not an event's file name" if not _NAME.fullmatch(name) else ""
        why = why or (f"past the {limit} read in one run" if len(files) >= limit else "")
        text, why = (None, why) if why else _node_text(os.path.join(folder, name))
        if why:
            skipped.append(f"{name[:80]!r}: {why}")
        else:
            files.append({"name": name, "text": text})
    return files, skipped


def _node_text(path) -> tuple[str | None, str]:
    """(the file's text, '') or (None, why not): a regular file of at most MAX_NODE_BYTES."""
    try:
        data = atomicfile.read_regular(path, MAX_NODE_BYTES + 1)
    except (OSError, ValueError) as err:
        return None, f"not read: {err}"
    if data is None:
        return None, "not a regular file"
    if len(data) > MAX_NODE_BYTES:
        return None, f"over {MAX_NODE_BYTES} bytes"
    return data.decode("utf-8", "replace"), ""


def remove_node(folder, names) -> list[str]:
    """Removes the collected event files ``names`` (each of the name grammar; never what a link
    points to) from the node's folder; the names removed."""
    return [
        n
        for n in names
        if isinstance(n, str) and _NAME.fullmatch(n) and atomicfile.remove(os.path.join(folder, n))
    ]


def collect(results_dir, host, files, skipped=(), *, dry=False) -> Collected:
    """The node's event files (``files``: what node_files sent, not trusted) into its history
    under ``results_dir``: each checked again (node_event), written unless an equal event is held
    already (append-only: never over an existing file, never twice). ``dry`` (check mode): checked,
    nothing written, nothing collected. ValueError for a host off the grammar."""
    if not checks.is_host_name(str(host)):
        raise ValueError(f"history: {str(host)[:80]!r} is not a host name")
    out: Collected = {"written": [], "collected": [], "refused": []}
    out["refused"] = [
        f"history: {host}: on the node: {str(s)[:200]}" for s in list(skipped or [])[:MAX_NODE_EVENTS]
    ]
    items = files if isinstance(files, list) else []
    if len(items) > MAX_NODE_EVENTS or not isinstance(files, list):
        out["refused"].append(f"history: {host}: the node sent more than {MAX_NODE_EVENTS} files or no list")
    accepted = []
    for item in items[:MAX_NODE_EVENTS]:
        ev, why = node_event(item, host)
        if ev is None:
            out["refused"].append(f"history: {host}: {why}: not collected")
        else:
            accepted.append((item["name"], ev))
    held = [] if dry else read(results_dir, host)
    for name, ev in [] if dry else accepted:
        if ev not in held:
            out["written"].append(write(results_dir, ev))
            held.append(ev)
        out["collected"].append(name)
    return out


def collected_lines(host, got: Collected) -> list[str]:
    """What a collection did, for the play's output: a count line, then each refusal."""
    head = (
        f"History: {host}: {len(got['collected'])} drain event(s) of wireup-check collected "
        f"({len(got['written'])} new), {len(got['refused'])} refused"
    )
    return [head, *got["refused"]]


def node_event(item, host) -> tuple[Event | None, str]:
    """(the event a node's file holds, '') or (None, why it is refused): its name of the grammar,
    at most MAX_NODE_BYTES, an Event (event's grammar) of ``host`` itself, a drain by
    NODE_WHO, at the time and of the kind its name says."""
    found, ev, why = _node_parsed(item)
    why = why or _not_its_own(found, ev, host)
    return (None if why else ev), why


def _node_parsed(item):
    """(the name's match, the Event, '') of a node's file, or why it is none."""
    name = item.get("name") if isinstance(item, dict) else None
    text = item.get("text") if isinstance(item, dict) else None
    found = _NAME.fullmatch(name) if isinstance(name, str) else None
    if not found:
        return None, None, f"{str(name)[:80]!r} is not an event's file name"
    if not isinstance(text, str) or len(text.encode("utf-8", "replace")) > MAX_NODE_BYTES:
        return None, None, f"{name}: not text of at most {MAX_NODE_BYTES} bytes"
    try:
        return found, parsed_event(text), ""
    except (ValueError, KeyError, TypeError, RecursionError) as err:
        return None, None, f"{name}: not an event ({str(err)[:120]})"


def _not_its_own(found, ev, host) -> str:
    """Why a well-formed event is not the node's own drain ('' when it is)."""
    name = found.group(0)
    if ev["host"] != host:
        return f"{name}: names host {ev['host']!r}, not the node's own"
    if ev["who"] != NODE_WHO or ev["kind"] != "drain":
        return f"{name}: a node's event is a drain by {NODE_WHO} only, not a {ev['kind']} by {ev['who']}"
    if found["time"] != _time_stamp(ev["time"]) or found["kind"] != ev["kind"]:
        return f"{name}: its name says another time or kind than its event"
    return ""


def read(results_dir, host) -> list[Event]:
    """The host's events, oldest first; a file off the name grammar or not an event is skipped
    (read_counted counts them)."""
    return read_counted(results_dir, host)[0]


def read_counted(results_dir, host) -> tuple[list[Event], int]:
    """(the host's events, oldest first; how many entries of its folder were skipped: a name off
    the grammar, not a regular file, not an event, another host's, past MAX_EVENTS, or the host's
    path not a folder). ValueError for a host the path grammar refuses; OSError when the folder
    cannot be listed."""
    folder = checks.results_path(results_dir, "history", str(host))
    if not os.path.lexists(folder):
        return [], 0
    if not os.path.isdir(folder):
        return [], 1
    names = sorted(os.listdir(folder))
    files = [n for n in names if _NAME.fullmatch(n)][-MAX_EVENTS:]
    out = [ev for ev in (_read_event(os.path.join(folder, n), str(host)) for n in files) if ev]
    return out, len(names) - len(out)


def parsed_event(text) -> Event:
    """The Event an event file's text holds, checked by ``event`` (its grammar); ValueError,
    KeyError, TypeError or RecursionError (JSON nested too deep) when it holds none."""
    doc = json.loads(text)
    return event(doc["host"], doc["kind"], doc["who"], doc["why"], when=float(doc["time"]))


def _read_event(path, host):
    """The event in ``path`` when it is one of ``host``'s (event's grammar), else None."""
    try:
        ev = parsed_event(atomicfile.read_regular(path, 64 * 1024))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return ev if ev["host"] == host else None


def hosts(results_dir) -> tuple[list[str], int]:
    """(the hosts with a history folder, sorted; how many entries of results/history are not host
    names and are skipped). ValueError when results/history is not a folder under the results
    folder (a link out of it, a file); OSError when it cannot be listed."""
    top = checks.results_path(results_dir, "history")
    if not os.path.lexists(top):
        return [], 0
    if not os.path.isdir(top):
        raise ValueError("results/history is not a folder")
    names = os.listdir(top)
    good = sorted(n for n in names if checks.is_host_name(n))
    return good, len(names) - len(good)


def summary(events, now: float) -> dict:
    """{"out_since": time of the drain that holds it out now (None when in service), "returns":
    [seconds from each drain to its return]} over one node's events, oldest first."""
    out_since, returns = None, []
    for ev in events:
        if ev["kind"] == "drain" and out_since is None:
            out_since = ev["time"]
        elif ev["kind"] == "return" and out_since is not None:
            returns.append(ev["time"] - out_since)
            out_since = None
    return {
        "out_since": out_since,
        "returns": returns,
        "out_for": None if out_since is None else now - out_since,
    }


def lines(per_host: dict, now: float) -> list[str]:
    """The report's lines: each node's last detection-to-return time and, for nodes out now, since when."""
    out = []
    for host, events in sorted(per_host.items()):
        s = summary(events, now)
        if s["out_since"] is not None:
            out.append(f"{host}: out of service {_out_text(s)}")
        if s["returns"]:
            out.append(f"{host}: last returned {_minutes(s['returns'][-1])} after it was drained")
    return out


def _stamp(when) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def _out_text(s) -> str:
    """'since 2026-12-07T09:00:00Z (1.5 h)' of a summary whose node is out of service."""
    return f"since {_stamp(s['out_since'])} ({s['out_for'] / 3600:.1f} h)"


def _minutes(seconds) -> str:
    return f"{seconds / 60:.0f} min"


# ------------------------------------------------------------------ the bench report's section
_HEADER = ["node", "out of service now", "last detection to return", "events", "last events, newest first"]


def report_sections(ctx, run_hosts) -> list:
    """The bench report's History section (report/assemble.py), from every node's history under
    ``ctx.results_dir`` (capability/context.Reporting; None: not read, said) at ``ctx.now``: the
    fleet's count out of service now, a row per node with events (out of service first, at most
    MAX_ROWS), one line for the run's nodes without any, and what could not be read."""
    head = ("h", (2, "History"))
    if ctx is None:
        return [
            head,
            ("p", "The nodes' history was not read: the report was written without the results folder."),
        ]
    per_host, problems = _read_fleet(ctx.results_dir)
    with_events = {h: summary(e, ctx.now) for h, e in per_host.items() if e}
    out = [head, *_table_sections(per_host, with_events)]
    quiet = len(set(run_hosts) - set(with_events))
    if not with_events:
        out.append(("p", "No node has events in its history (docs/repair.md, History)."))
    elif quiet:
        out.append(("p", f"The other {quiet} node(s) of this run have no events in their history."))
    return out + [("p", text) for text in problems]


def _read_fleet(results_dir) -> tuple[dict, list[str]]:
    """({host: events} of every host with a history folder, [what could not be read, said])."""
    try:
        names, skipped = hosts(results_dir)
    except (OSError, ValueError) as err:
        return {}, [f"The history could not be read: {err}"]
    per_host, failed = {}, []
    for host in names:
        try:
            per_host[host], bad = read_counted(results_dir, host)
        except (OSError, ValueError) as err:
            failed.append(f"{host} ({err})")
            bad = 0
        skipped += bad
    problems = (
        [f"The history of {len(failed)} node(s) could not be read: {'; '.join(failed[:3])}"] if failed else []
    )
    if skipped:
        problems.append(
            f"{skipped} {'entry' if skipped == 1 else 'entries'} of the history skipped: a folder not "
            "named as a host, or a file "
            "that is not an event of its node (its name, a regular file, its JSON, its host)."
        )
    return per_host, problems


def _table_sections(per_host, sums) -> list:
    """The out-of-service sentence and the table (none without events)."""
    if not sums:
        return []
    out_now = [h for h, s in sums.items() if s["out_since"] is not None]
    verb = "is" if len(out_now) == 1 else "are"
    said = (
        f"{len(out_now)} of the {len(sums)} node(s) with a history {verb} out of service now "
        "(drained by wireup, not yet returned)."
    )
    order = sorted(out_now, key=lambda h: (sums[h]["out_since"], h)) + sorted(set(sums) - set(out_now))
    rows = [_row(h, per_host[h], sums[h]) for h in order[:MAX_ROWS]]
    out = [("p", said), ("table", (_HEADER, rows))]
    if len(order) > MAX_ROWS:
        out.append(
            (
                "p",
                f"{len(order) - MAX_ROWS} more node(s) with events are not listed (each node's "
                "textfile has its wireup_node_out_of_service and wireup_node_last_return_duration_seconds).",
            )
        )
    return out


def _row(host, events, s) -> list:
    last = [f"{_stamp(e['time'])} {e['kind']} by {e['who']}: {e['why'][:120]}" for e in events[-LAST_EVENTS:]]
    return [
        host,
        _out_text(s) if s["out_since"] is not None else "no",
        _minutes(s["returns"][-1]) if s["returns"] else "-",
        len(events),
        "; ".join(reversed(last)),
    ]


def families(per_host: dict, now: float) -> list:
    """Prometheus families: wireup_node_out_of_service (1/0), wireup_node_out_of_service_since_
    timestamp_seconds, wireup_node_last_return_duration_seconds, wireup_node_history_events."""
    sums = {h: summary(e, now) for h, e in sorted(per_host.items())}
    return [
        prom.family(
            "wireup_node_out_of_service",
            "1 while wireup holds the node drained (its history's last drain has no return)",
            [({"host": h}, int(s["out_since"] is not None)) for h, s in sums.items()],
        ),
        prom.family(
            "wireup_node_out_of_service_since_timestamp_seconds",
            "When wireup drained the node that is out of service now (Unix seconds)",
            [({"host": h}, s["out_since"]) for h, s in sums.items()],
        ),
        prom.family(
            "wireup_node_last_return_duration_seconds",
            "Seconds from detection (the drain) to the return to service, the node's last",
            [({"host": h}, s["returns"][-1] if s["returns"] else None) for h, s in sums.items()],
        ),
        prom.family(
            "wireup_node_history_events",
            "Events in the node's history, by kind",
            [({"host": h, "kind": k}, sum(e["kind"] == k for e in per_host[h])) for h in sums for k in KINDS],
        ),
    ]
