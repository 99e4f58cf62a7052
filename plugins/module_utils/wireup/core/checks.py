"""The grammar checks every layer shares (pure functions, stdlib only): host names, paths under the
results folder, shell names, sbatch options, program arguments, ports, absolute paths, version
ranges, the pins' formats. Each error names the variable and says how to fix it."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import shlex

from . import apt

# variable -> (pattern, example), matched whole (fullmatch). Pins are strings: YAML turns 580 or
# 13.0 into numbers, and 13.10 would silently become 13.1, so numbers are refused with the fix.
PIN_FORMATS = {
    "nvidia_driver_branch": (r"\d{3}", '"580"'),
    "cuda_repo_version": (r"\d{2}\.\d", '"13.0"'),
    "nccl_version": (r"\d+\.\d+\.\d+", '"2.28.9"'),
    "nccl_package_version": (apt.NCCL_PACKAGE_VERSION, '"2.28.9-1+cuda13.0"'),
    "nccl_tests_version": (r"v\d+\.\d+\.\d+", '"v2.19.6"'),
    "nccl_tests_commit": (r"[0-9a-f]{40}", '"a0b82b2260cf5152b9f8c061bbf7eaf0ba096432" (a full commit id)'),
    "pytorch_venv_torch_version": (r"\d+\.\d+\.\d+", '"2.13.0"'),
}


# How wireup writes a command for a user: the venv's program, from the repository root, works when
# pasted after `make venv` with nothing activated (docs/DEVELOPING.md "Commands", issue 38).
ANSIBLE_PLAYBOOK = ".venv/bin/ansible-playbook"


# A variable name bash can export: the one rule for every env mapping wireup writes into a script
# or an env file (wireup_job_env, bench_env, torchrun_launch_env, the tuned NCCL env file).
# Every pattern here is used with fullmatch: '$' would let a trailing newline through.
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# A whole number in ASCII digits, matched whole: str.isdigit() also says yes to '²', which int()
# refuses (a crash in place of a named error), and to other scripts' digits, which int() reads.
DIGITS = re.compile(r"[0-9]+")


def is_number(value) -> bool:
    """An int or a float, not a bool: the one rule for "a number" in a setting or a node's answer
    (JSON's and YAML's true is an int to Python, and would count as 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_finite_number(value) -> bool:
    """A number (is_number) that is neither NaN nor infinite: Python's json reads NaN and Infinity."""
    return is_number(value) and (isinstance(value, int) or math.isfinite(value))


def is_digits(text) -> bool:
    """True when ``text`` is a string of ASCII digits (DIGITS, fullmatch)."""
    return isinstance(text, str) and DIGITS.fullmatch(text) is not None


def is_shell_name(key) -> bool:
    """True when ``key`` is a string bash accepts as a variable name."""
    return isinstance(key, str) and SHELL_NAME.fullmatch(key) is not None


# ---------------------------------------------------------------- names from the inventory or a node
# The one host name grammar (RFC 1123): dot-separated labels of 1-63 letters, digits and '-', not
# starting or ending with '-', 253 characters in all. Inventory names and the names nodes report
# (platform.node()) become paths on the controller, words in rendered scripts and Slurm node lists;
# this grammar has no character a shell, a path or sbatch's #SBATCH parser treats specially.
HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def is_host_name(name) -> bool:
    """True when ``name`` is an RFC 1123 host name (an IPv4 address in dotted form is one)."""
    if not isinstance(name, str) or not 0 < len(name) <= 253:
        return False
    return all(HOST_LABEL.fullmatch(label) for label in name.split("."))


def is_inventory_host(name) -> bool:
    """An inventory host name wireup accepts: an RFC 1123 host name or an IP address."""
    if is_host_name(name):
        return True
    if not isinstance(name, str):
        return False  # ipaddress takes 5 for 0.0.0.5
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def inventory_host_errors(hosts) -> list[str]:
    """An error for every inventory host name outside the grammar (is_inventory_host)."""
    return [
        f"inventory host {str(host)[:80]!r} is not a host name: wireup uses it in paths under "
        "wireup_results_dir and in the scripts it renders; name it with letters, digits, '-' and '.' "
        "(RFC 1123, e.g. gpu-a02) and set its address with ansible_host"
        for host in hosts
        if not is_inventory_host(host)
    ]


def node_hostname_errors(hostnames: dict) -> list[str]:
    """An error for every node whose own host name (as the node reads it: wireup_node.hostname)
    is outside the grammar; {host: hostname}, an empty hostname is not checked."""
    return [
        f"{host}: its host name {str(name)[:80]!r} (as the node reads it) is not an RFC 1123 host name: "
        "wireup writes it into /etc/hosts and Slurm node lists; fix the node's hostname (hostnamectl)"
        for host, name in sorted(hostnames.items())
        if name and not is_host_name(name)
    ]


# A name wireup joins onto a controller folder (a job, a run id, a host's log, a summary file).
PATH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,254}")


def results_path(root, *names) -> str:
    """``root``/``names`` joined, each name checked against PATH_NAME (no '/', no '..', not
    hidden) and the resolved path checked to stay under the resolved ``root``: where the
    controller writes what a node or the inventory named. ValueError otherwise."""
    root = str(root or "")
    if not root:
        raise ValueError("the results folder is empty: set wireup_results_dir")
    for name in names:
        if not isinstance(name, str) or not PATH_NAME.fullmatch(name):
            raise ValueError(
                f"{str(name)[:80]!r} cannot name a file under {root}: use letters, digits, '_', '.', "
                "'-' (a node's answer or an inventory name that is not one is refused)"
            )
    top = os.path.realpath(root)
    path = os.path.realpath(os.path.join(top, *names))
    if os.path.commonpath([top, path]) != top:
        raise ValueError(f"{os.path.join(root, *names)} resolves outside {root}: refused")
    return os.path.join(root, *names)


# ---------------------------------------------------------------- Slurm options
# The sbatch long options torchrun_launch_slurm_options may set: where the job runs and for how
# long, and what it may use. Those job.sbatch sets itself (job-name, nodes, nodelist, exclude,
# ntasks-per-node, gpus-per-node, output) and those that change who runs what (uid, gid, wrap,
# chdir, export, get-user-env, ...) are not on it.
SBATCH_OPTIONS = (
    "account",
    "begin",
    "clusters",
    "comment",
    "constraint",
    "contiguous",
    "cpus-per-gpu",
    "cpus-per-task",
    "deadline",
    "distribution",
    "exclusive",
    "gpu-bind",
    "gres",
    "hint",
    "licenses",
    "mail-type",
    "mail-user",
    "mem",
    "mem-per-cpu",
    "mem-per-gpu",
    "network",
    "nice",
    "no-requeue",
    "overcommit",
    "partition",
    "priority",
    "qos",
    "requeue",
    "reservation",
    "signal",
    "switches",
    "time",
    "time-min",
    "tmp",
    "wckey",
)


# A value is one word of printable characters: sbatch splits an #SBATCH line at whitespace and
# strips quotes, and a newline would end the comment line (the rest runs as bash).
SBATCH_VALUE = re.compile(r"[^\s\x00-\x1f\x7f-\x9f\"']{1,256}")


def slurm_option_errors(options, var: str = "torchrun_launch_slurm_options") -> list[str]:
    """Errors of the extra #SBATCH options: a mapping of SBATCH_OPTIONS names to one-word values
    (true for a bare flag such as exclusive)."""
    if options is None:
        return []
    if not isinstance(options, dict):
        return [f"{var} must be a mapping of sbatch option: value, not {kind_name(options)}"]
    errors = []
    for key, value in options.items():
        if key not in SBATCH_OPTIONS:
            errors.append(
                f"{var}: {str(key)[:80]!r} is not an sbatch option wireup passes on; use one of "
                f"{', '.join(SBATCH_OPTIONS)}"
            )
        elif value is True:
            continue
        elif isinstance(value, bool) or not isinstance(value, str | int | float):
            errors.append(
                f"{var}: {key} must be a string or number (true for a bare flag), not {kind_name(value)}"
            )
        elif not SBATCH_VALUE.fullmatch(str(value)):
            errors.append(
                f"{var}: {key}={str(value)[:80]!r} must be one word of printable characters without "
                "quotes (sbatch splits #SBATCH lines at whitespace), e.g. time: '01:00:00'"
            )
    return errors


# ---------------------------------------------------------------- program arguments
def program_args(args, var: str = "torchrun_launch_args") -> list[str]:
    """The program's arguments as a list of strings: a list of strings and numbers as given, a
    string split as a shell would (shlex.split: "--steps 5" is ['--steps', '5']). ValueError for
    anything else or for a string shlex cannot split (an open quote)."""
    if args is None:
        return []
    if isinstance(args, str):
        try:
            return shlex.split(args)
        except ValueError as exc:
            raise ValueError(
                f"{var}={args[:80]!r} cannot be split into arguments ({exc}): close its quotes, "
                "or give a list, e.g. ['--steps', '5']"
            ) from exc
    if not isinstance(args, list | tuple) or any(not isinstance(a, str | int | float) for a in args):
        raise ValueError(
            f"{var} must be a list of strings or numbers (or one string, split as a shell would), "
            f"e.g. ['--steps', '5'], not {str(args)[:80]!r}"
        )
    return [str(a) for a in args]


def program_args_errors(args, var: str = "torchrun_launch_args") -> list[str]:
    try:
        program_args(args, var)
    except ValueError as exc:
        return [str(exc)]
    return []


def kind_name(value) -> str:
    """The plain type name of a value (Ansible hands over tagged subclasses of str, dict ...)."""
    for kind in (bool, int, float, str, dict, list, tuple, set):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def shell_name_errors(var: str, env) -> list[str]:
    """Errors of an env mapping that a bash script exports: ``env`` must be a mapping (None is
    empty), its keys shell variable names, its values strings or numbers. ``var`` names the
    variable in each message."""
    if env is None:
        return []
    if not isinstance(env, dict):
        return [f"{var} must be a mapping of VARIABLE: value, not {kind_name(env)}"]
    errors = []
    for key, value in env.items():
        if not is_shell_name(key):
            errors.append(f"{var}: {key!r} is not a valid shell variable name (letters, digits, '_')")
        elif value is None or isinstance(value, dict | list | tuple | set):
            errors.append(f"{var}: {key} must be a string or number, not {kind_name(value)}")
    return errors


def check_version_range(version: str, spec: str) -> bool:
    """True when ``version`` satisfies the PEP 440 range ``spec`` ('>=2.19.0,<2.20.0', '~=2.19',
    '==2.11.*'), decided by packaging.specifiers (installed with ansible-core; this runs on the
    controller only). A pre-release, post-release or local label counts as its release
    (2.11.0a0+git12 and 2.11.0+cu130 are 2.11.0). ValueError when either does not parse."""
    # packaging is imported where it is used: the wireup package must import without third-party
    # packages: modules carry it to nodes (ansible-test sanity's import test checks it; wireup-check
    # runs this package on nodes with the standard library only, issue 26).
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        wanted = SpecifierSet(str(spec))
        release = Version(Version(str(version)).base_version)
    except (InvalidSpecifier, InvalidVersion) as exc:
        raise ValueError(f"bad version range {spec!r} or version {version!r}: {exc}") from exc
    return wanted.contains(release, prereleases=True)


def validate_nproc(value) -> list[str]:
    if value == "auto":
        return []
    if isinstance(value, bool) or not isinstance(value, int | str) or not is_digits(str(value)):
        return [f"wireup_nproc_per_node={value!r} is not 'auto' or a positive whole number: fix it"]
    if int(value) < 1:
        return [f"wireup_nproc_per_node={value!r} must be at least 1 (or 'auto')"]
    return []


def master_of(members: list[str], master_host: str) -> str:
    """The rendezvous master: the named host when it is a member, else the group's first in sorted
    order (a job over a group without wireup_master_host, e.g. bench's one-node groups)."""
    if master_host and master_host in members:
        return master_host
    return sorted(members)[0] if members else ""


def validate_port(name: str, value) -> list[str]:
    """A TCP port others connect to: a whole number from 1024 to 65535 (no privileged ports:
    the jobs run as the launch user, and a port below 1024 needs root to bind)."""
    text = str(value).strip()
    if isinstance(value, bool) or not isinstance(value, int | str) or not is_digits(text):
        return [
            f"{name}={value!r} is not a port number: use a whole number from 1024 to 65535, "
            f"e.g. {name}: 29500"
        ]
    if not 1024 <= int(text) <= 65535:
        return [f"{name}={value!r} must be a TCP port from 1024 to 65535, e.g. {name}: 29500"]
    return []


_PLAIN_PATH = re.compile(r"[^\s\x00-\x1f\x7f-\x9f\"'`$\\]{1,4096}")


def validate_abs_paths(values: dict) -> list[str]:
    """Paths the roles join others onto (``{{ wireup_base_dir }}/jobs``): empty or relative values
    would put files into the connection user's working directory, so both are refused."""
    examples = {"wireup_base_dir": "/opt/wireup", "wireup_venv_path": "/opt/wireup/venv"}
    errors = []
    for name in sorted(values):
        value = values[name]
        # The path is also written into comment lines and #SBATCH lines of the rendered scripts,
        # where a newline would start a line of code and a space split an option.
        if not isinstance(value, str) or not value.startswith("/") or not _PLAIN_PATH.fullmatch(value):
            example = examples.get(name, "/opt/wireup")
            errors.append(
                f"{name}={str(value)[:80]!r} must be an absolute path (starting with /) without whitespace, "
                f"quotes or control characters, e.g. {name}: {example}"
            )
    return errors
