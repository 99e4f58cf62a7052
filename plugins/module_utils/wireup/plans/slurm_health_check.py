"""The slurm_health_check role's plan (issue 26): slurmd's HealthCheckProgram running wireup-check,
the block wireup keeps in slurm.conf and the checks before it is written (pure Python, stdlib only).

slurm.conf(5): HealthCheckProgram is run by slurmd as root every HealthCheckInterval seconds on
the nodes HealthCheckNodeState names (and when slurmd starts), and killed after 60 s. Its keys are
case-insensitive; a line may hold several Key=Value words. wireup writes its three lines between
two marker comments (Ansible's blockinfile), so an administrator's configuration management sees
one block it can keep, move or remove, and refuses to write it where slurm.conf already sets one
of the three keys elsewhere (an NHC set-up, for one): two HealthCheckProgram lines would leave
one of them unused without a word.
"""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import TypedDict

from ..core import checks, watchsettings

KEYS = ("HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState")
MARKER = "# {mark} wireup slurm_health_check (managed by Ansible: roles/slurm_health_check)"
_WORD = re.compile(r"(?:^|\s)([A-Za-z]+)=")


def block(program, interval, node_state) -> str:
    """The block's three lines."""
    return "\n".join(
        [
            f"HealthCheckProgram={program}",
            f"HealthCheckInterval={int(interval)}",
            f"HealthCheckNodeState={node_state}",
        ]
    )


def _outside_block(text):
    """[(line number, line)] of slurm.conf outside wireup's block, comments and blanks left out."""
    begin, end = MARKER.replace("{mark}", "BEGIN"), MARKER.replace("{mark}", "END")
    out, inside = [], False
    for number, raw in enumerate(str(text or "").splitlines(), start=1):
        line = raw.strip()
        if line == begin:
            inside = True
        elif line == end:
            inside = False
        elif not inside and line and not line.startswith("#"):
            out.append((number, line.split("#", 1)[0]))
    return out


def conflicts(text) -> list[str]:
    """'line N: KEY=...' for each of KEYS set outside wireup's block."""
    wanted = {k.lower() for k in KEYS}
    return [
        f"line {number}: {line.strip()[:120]}"
        for number, line in _outside_block(text)
        if any(m.group(1).lower() in wanted for m in _WORD.finditer(line))
    ]


@dataclasses.dataclass(frozen=True)
class Settings:
    """The slurm_health_check_* settings the plan reads, by name without the prefix (a misspelt or
    missing one is a TypeError)."""

    conf: str
    state: str
    program: str
    interval: int
    node_state: str


class SlurmHealthPlan(TypedDict):
    """plan's answer: errors (each naming the file, the line and the fix), block (the three lines,
    '' when absent), state (present, absent: blockinfile's), marker (blockinfile's), and the
    wrapper's fate, each a list the tasks loop over: install (its path when present, else []),
    remove (its path when absent, else [])."""

    errors: list[str]
    block: str
    state: str
    marker: str
    install: list[str]
    remove: list[str]


def conf_text(slurp):
    """slurm.conf's text from ansible.builtin.slurp's result; None when it read nothing (no file)."""
    found = dict(slurp or {})
    return base64.b64decode(found["content"]).decode("utf-8", "replace") if "content" in found else None


def block_errors(settings) -> list[str]:
    """The values the block writes into slurm.conf, checked again where it is made (preflight
    checked them first): the program a plain absolute path, HealthCheckNodeState Slurm's grammar,
    each matched whole, so no value adds a line to slurm.conf."""
    program = checks.validate_abs_paths({"slurm_health_check_program": settings.program})
    return program + watchsettings.node_state_errors(settings.node_state)


def plan(conf, node, settings) -> SlurmHealthPlan:
    """What the role does on one node. conf: the node's slurm.conf (None: there is none);
    settings: Settings. Errors name the file, the line and the fix; with any, the block is empty."""
    if settings.state not in ("present", "absent"):
        raise ValueError(f"slurm_health_check_state={settings.state!r} is not present or absent")
    present = settings.state == "present"
    errors = block_errors(settings) if present else []
    if conf is None:
        errors.append(
            f"{node} has no {settings.conf}: Slurm is not installed there, or its configuration lives "
            "elsewhere (set slurm_health_check_conf; configless Slurm: apply the block on the slurmctld host)"
        )
    elif present:
        found = conflicts(conf)
        if found:
            errors.append(
                f"{settings.conf} on {node} sets {'/'.join(KEYS)} outside wireup's block "
                f"({'; '.join(found)}): remove those lines, or keep your health check and call "
                "wireup-check from it (roles/slurm_health_check/README.md: LBNL NHC)"
            )
    return {
        "errors": errors,
        "block": block(settings.program, settings.interval, settings.node_state)
        if present and not errors
        else "",
        "state": settings.state,
        "marker": MARKER,
        "install": [settings.program] if present else [],
        "remove": [] if present else [settings.program],
    }
