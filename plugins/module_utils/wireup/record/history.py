"""A node's history (issue 37 item 4): every drain, action, recheck and return is an event, one
file per event under ``results/history/HOST/`` (atomic, exclusive: never rewritten), saying who
(the controller's user, or the node-side check) and why. Read back, the events give each node's
time from detection to return, the nodes out of service now and since when, as report lines and as
Prometheus metrics (render/prom.py)."""

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
MAX_EVENTS = 10000  # per node read back: a history folder flooded by a node cannot stall the report
MAX_TEXT = 300


class Event(TypedDict):
    host: str
    kind: str  # KINDS
    time: float  # Unix seconds
    who: str  # "controller:USER" or "node:wireup-check"
    why: str  # one line


def event(host, kind, who, why, *, when=None) -> Event:
    """One event, checked: ValueError for a host off the host-name grammar, a kind off KINDS, a
    who off its grammar; ``why`` is cut to one printable line."""
    if not checks.is_host_name(str(host)):
        raise ValueError(f"history: {str(host)[:80]!r} is not a host name")
    if kind not in KINDS or not _WHO.fullmatch(str(who)):
        raise ValueError(f"history: kind {kind!r} (one of {KINDS}) or who {str(who)[:40]!r} off its grammar")
    text = " ".join("".join(c if c.isprintable() else " " for c in str(why)).split())[:MAX_TEXT]
    return {
        "host": str(host),
        "kind": kind,
        "time": float(time.time() if when is None else when),
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
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(ev["time"]))
    folder = checks.results_path(results_dir, "history", ev["host"])
    os.makedirs(folder, mode=0o750, exist_ok=True)
    for seq in range(1000):
        path = os.path.join(folder, f"{stamp}-{seq:03d}-{ev['kind']}.json")
        try:
            atomicfile.write_json(path, dict(ev), exclusive=True)
            return path
        except FileExistsError:
            continue
    raise ValueError(f"history: 1000 events of {ev['host']} in second {stamp}")


def read(results_dir, host) -> list[Event]:
    """The host's events, oldest first; a file off the name grammar or not an event is skipped."""
    folder = checks.results_path(results_dir, "history", str(host))
    names = (
        sorted(n for n in os.listdir(folder) if _NAME.fullmatch(n))[-MAX_EVENTS:]
        if os.path.isdir(folder)
        else []
    )
    out = []
    for name in names:
        try:
            doc = json.loads(atomicfile.read_regular(os.path.join(folder, name), 64 * 1024))
            out.append(event(doc["host"], doc["kind"], doc["who"], doc["why"], when=float(doc["time"])))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return [e for e in out if e["host"] == str(host)]


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
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s["out_since"]))
            out.append(f"{host}: out of service since {since} ({s['out_for'] / 3600:.1f} h)")
        if s["returns"]:
            out.append(f"{host}: last returned {s['returns'][-1] / 60:.0f} min after it was drained")
    return out


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
