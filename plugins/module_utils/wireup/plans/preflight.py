"""Inventory and variable validation for preflight: pure functions returning error messages.

Every message names the variable (or inventory item) and says how to fix it, so preflight can
stop the play before any node changes.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex

from ..core import apt

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
        return [f"{var} must be a mapping of sbatch option: value, not {_kind(options)}"]
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
                f"{var}: {key} must be a string or number (true for a bare flag), not {_kind(value)}"
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


def _kind(value) -> str:
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
        return [f"{var} must be a mapping of VARIABLE: value, not {_kind(env)}"]
    errors = []
    for key, value in env.items():
        if not is_shell_name(key):
            errors.append(f"{var}: {key!r} is not a valid shell variable name (letters, digits, '_')")
        elif value is None or isinstance(value, dict | list | tuple | set):
            errors.append(f"{var}: {key} must be a string or number, not {_kind(value)}")
    return errors


def secret_env_errors(value, var: str = "wireup_secret_env") -> list[str]:
    """Errors of the list of variable names whose values are secret (redact.is_secret_name's
    extra names): a list of shell variable names (the whole name, nothing around it)."""
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        return [f"{var} must be a list of variable names (e.g. [GITHUB_PAT]), not {_kind(value)}"]
    return [
        f"{var}: {name!r} is not a shell variable name (letters, digits, '_', not starting with a digit)"
        for name in value
        if not is_shell_name(name)
    ]


def validate_pins(values: dict) -> list[str]:
    """Check the pinned versions' formats and their agreement with each other."""
    errors = []
    for name, (pattern, example) in PIN_FORMATS.items():
        if name not in values:
            continue
        value = values[name]
        if not isinstance(value, str):
            errors.append(
                f"{name}={value!r} is a number, not a string: quote it in YAML, e.g. {name}: {example}"
            )
        elif not re.fullmatch(pattern, value):
            errors.append(f"{name}={value!r} is malformed: expected a value like {example}")
    if errors:
        return errors
    pkg, cuda = values.get("nccl_package_version"), values.get("cuda_repo_version")
    errors.extend(apt.nccl_pin_errors(pkg, values.get("nccl_version"), cuda))
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


def validate_cluster(
    groups: dict,
    node_group: str,
    master_host: str,
    addresses: dict | None = None,
    hostnames: dict | None = None,
) -> list[str]:
    """Check the inventory's shape.

    ``groups``: Ansible's ``groups`` magic variable; ``addresses``: {host: address} once facts
    are known (None before); ``hostnames``: {host: the node's own host name} once read.
    """
    errors = []
    members = groups.get(node_group) or []
    if node_group not in groups:
        errors.append(
            f"inventory group '{node_group}' (wireup_node_group) does not exist: add the cluster's "
            f"nodes under it, or run with -e wireup_node_group=<your group>"
        )
    elif not members:
        errors.append(
            f"inventory group '{node_group}' (wireup_node_group) has no hosts: add the cluster's nodes "
            f"under it, or run with -e wireup_node_group=<the group that holds them>"
        )
    if master_host and members and master_host not in members:
        errors.append(
            f"wireup_master_host={master_host!r} is not a host of group '{node_group}': name one of "
            f"{', '.join(sorted(members))}, or leave it empty for the first"
        )
    # A one-node cluster talks to itself: it needs no address others can reach.
    if addresses is not None and len(addresses) > 1:
        errors.extend(_address_errors(addresses))
    errors.extend(node_hostname_errors(dict(hostnames or {})))
    return errors


def _address_errors(addresses: dict) -> list[str]:
    errors = []
    seen: dict[str, str] = {}
    for host in sorted(addresses):
        address = addresses[host]
        if not address:
            errors.append(
                f"host {host} has no address for the cluster network: set wireup_address for it in "
                f"host_vars, or give it a default route"
            )
            continue
        try:
            ipaddress.ip_address(address)
        except ValueError:
            errors.append(f"host {host}: wireup_address={address!r} is not an IP address")
            continue
        if ipaddress.ip_address(address).is_loopback:
            errors.append(
                f"host {host}: its cluster address {address} is a loopback address other nodes cannot "
                f"reach: set wireup_address"
            )
        if address in seen:
            errors.append(
                f"hosts {seen[address]} and {host} share the address {address}: every node needs its "
                f"own (check ansible_host / wireup_address)"
            )
        else:
            seen[address] = host
    return errors


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


def validate_serial(name: str, value) -> list[str]:
    """A play's `serial`: a whole number of hosts >= 1, or a percentage from 1% to 100%."""
    if _is_batch_size(value):
        return []
    return [
        f"{name}={value!r} is not a batch size: use a whole number of nodes (e.g. 2) or a "
        f"percentage (e.g. '25%')"
    ]


def _is_batch_size(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return False
    text = str(value).strip()
    if is_digits(text):
        return int(text) >= 1
    return text.endswith("%") and is_digits(text[:-1]) and 1 <= int(text[:-1]) <= 100


def validate_settings(values: dict) -> list[str]:
    """The cluster-wide wireup_* settings every entry playbook reads that argument_specs cannot
    fully check (ranges, absolute paths): one list of errors, each naming the variable and the fix."""
    errors = []
    if "wireup_master_port" in values:
        errors.extend(validate_port("wireup_master_port", values["wireup_master_port"]))
    # Read by site.yml's driver play as its `serial` keyword, before that play's roles run.
    if "nvidia_driver_serial" in values:
        errors.extend(validate_serial("nvidia_driver_serial", values["nvidia_driver_serial"]))
    errors.extend(
        validate_abs_paths({k: values[k] for k in ("wireup_base_dir", "wireup_venv_path") if k in values})
    )
    return errors


# ---------------------------------------------------------------- bench settings
_SIZE = re.compile(r"[0-9]+[KMG]?")
BENCH_SIZES = (
    "bench_min_bytes",
    "bench_max_bytes",
    "bench_torch_min_bytes",
    "bench_torch_max_bytes",
    "bench_torch_cpu_max_bytes",
)


def _number(values, name, errors):
    """values[name] as a float, or None (with an error) when it is not a number."""
    value = values.get(name)
    if isinstance(value, bool):
        value = None
    try:
        return float(value)
    except (TypeError, ValueError):
        errors.append(f"{name}={value!r} is not a number: fix it in group_vars/host_vars or -e")
        return None


def bench_threshold_errors(values: dict) -> list[str]:
    """The verdict thresholds' rule (the one place it is written): 0 < bench_warn_ratio <=
    bench_pass_ratio <= 1.5. Only the names present in ``values`` are checked."""
    errors: list[str] = []
    ratios = {}
    for name in ("bench_pass_ratio", "bench_warn_ratio"):
        if name in values:
            ratio = _number(values, name, errors)
            if ratio is not None and not 0 < ratio <= 1.5:
                errors.append(f"{name} must be a number in (0, 1.5], got {values[name]!r}")
            elif ratio is not None:
                ratios[name] = ratio
    if len(ratios) == 2 and ratios["bench_warn_ratio"] > ratios["bench_pass_ratio"]:
        errors.append(
            f"bench_warn_ratio ({values['bench_warn_ratio']}) must not exceed bench_pass_ratio "
            f"({values['bench_pass_ratio']}): lower bench_warn_ratio or raise bench_pass_ratio"
        )
    return errors


def _bench_number_errors(values: dict) -> list[str]:
    """The fractions, the torch goal and the whole numbers of the bench_* settings."""
    errors = []
    ranges = {
        "bench_baseline_tolerance": (0.0, 1.0, "a fraction from 0 to below 1, e.g. 0.10"),
        "bench_nccl_tune_min_gain": (0.0, 1.0, "a fraction from 0 to below 1, e.g. 0.02"),
    }
    for name, (low, high, what) in ranges.items():
        value = _number(values, name, errors) if name in values else None
        if value is not None and not low <= value < high:
            errors.append(f"{name}={values[name]!r} must be {what}")
    goal = _number(values, "bench_torch_goal_ratio", errors) if "bench_torch_goal_ratio" in values else None
    if goal is not None and goal <= 0:
        errors.append(
            f"bench_torch_goal_ratio={values['bench_torch_goal_ratio']!r} must be above 0, e.g. 0.97"
        )
    for name in ("bench_step_factor", "bench_torch_step_factor", "bench_iterations", "bench_timeout"):
        text = str(values.get(name, "")).strip()
        if name in values and (isinstance(values[name], bool) or not is_digits(text) or int(text) < 1):
            errors.append(f"{name}={values[name]!r} must be a whole number of at least 1")
    warmup = values.get("bench_warmup_iterations")
    if "bench_warmup_iterations" in values and (
        isinstance(warmup, bool) or not is_digits(str(warmup).strip())
    ):
        errors.append(f"bench_warmup_iterations={warmup!r} must be a whole number")
    return errors


def _bench_size_errors(values: dict) -> list[str]:
    """The message sizes (nccl-tests' syntax) and the step-cost parameter counts."""
    errors = [
        f"{name}={values[name]!r} is not a size in nccl-tests' syntax: use bytes or K/M/G, "
        "like 8, 64K, 1M or 8G"
        for name in BENCH_SIZES
        if name in values and not _SIZE.fullmatch(str(values[name]))
    ]
    for name in ("bench_stepcost_params", "bench_stepcost_cpu_params"):
        sizes = values.get(name)
        if name in values and (
            not isinstance(sizes, list) or not sizes or not all(_PARAMS.fullmatch(str(p)) for p in sizes)
        ):
            errors.append(f"{name}={sizes!r} must be a list of parameter counts like 2M, 125M or 1G")
    return errors


def bench_errors(values: dict) -> list[str]:
    """Every bench_* setting that can be judged without a node: thresholds, tolerance, factors,
    sizes in nccl-tests' syntax, bench_env names. Only names present in ``values`` are checked;
    values that are still templates ('{{ ... }}', the roles' own defaults) are passed over."""
    values = {k: v for k, v in values.items() if not (isinstance(v, str) and "{{" in v)}
    errors = bench_threshold_errors(values) + _bench_number_errors(values) + _bench_size_errors(values)
    if "bench_stepcost_hooks" in values and not values["bench_stepcost_hooks"]:
        errors.append("bench_stepcost_hooks must name at least one hook (none, fp16, bf16, powersgd)")
    for name in ("bench_env", "bench_fabric_env"):
        if name in values:
            errors.extend(shell_name_errors(name, values[name]))
    return errors


_PARAMS = re.compile(r"[0-9]+(\.[0-9]+)?[KMG]?")


# ---------------------------------------------------------------- renamed and removed variables
# Old name -> (new name or "", what to do). A value under an old name would be silently ignored
# (Ansible does not know which variables a role reads), so the inventory check names the new one.
RENAMED = {
    # Issue 25 named it so; the GPU trial's settings are the gpu_trial role's (one prefix per role).
    "bench_dcgm_diag": ("gpu_trial_dcgm_diag", "DCGM's diagnostic belongs to the gpu_trial role"),
    "cuda_repo_toolkit_on_gpu_less_node": (
        "cuda_repo_toolkit_on_gpu_less_nodes",
        "the variable's name ends in 'nodes'",
    ),
    "gpu_topology": (
        "gpu_topology_facts",
        "gpu_topology is the gpu_topology role's fact, set by the role (now named gpu_topology_facts); "
        "it is not an input",
    ),
    "bench_thresholds": (
        "bench_pass_ratio",
        "the thresholds are bench_pass_ratio, bench_warn_ratio, bench_verdict_min_bytes",
    ),
}


def renamed_errors(names) -> list[str]:
    """An error for every variable set under an old or removed name, naming the new one."""
    errors = []
    for name in sorted(set(names) & set(RENAMED)):
        new, why = RENAMED[name]
        fix = f"rename it to {new}" if new else "remove it"
        errors.append(f"{name} is no longer read by wireup ({why}): {fix}")
    return errors


# ---------------------------------------------------------------- names wireup does not know
# Ansible reads any variable and never says that a name is read by nothing: `-e
# torchrun_lauch_action=stop` ran jobs.yml's default action with rc 0 (issue 38). A name that
# carries a prefix of wireup (a role's name + '_', or 'wireup_') must be documented (a role's
# argument_specs); so must one that starts like such a prefix and is a slip or two from a
# documented name. Anything else belongs to another tool and passes.
# Facts wireup's roles and modules set (outputs, so in no argument_specs); a fact cache can bring
# them back into hostvars before preflight runs (tests/unit/test_validate.py keeps the list whole).
FACTS = frozenset(
    {
        "wireup_node",
        "wireup_master",
        "gpu_topology_facts",
        "gpu_topology_nics",
        "gpu_trial_node",
        "gpu_trial_run",
        "nccl_tests_build",
        "pytorch_venv_info",
    }
)
# Slips a name may have from a documented one (insert, delete, change or swap one character).
NAME_SLIPS = 2


def variable_prefixes(roles) -> tuple[str, ...]:
    """Every role's name + '_' and 'wireup_', longest first (a name's owner is its most specific)."""
    return tuple(sorted({f"{role}_" for role in roles} | {"wireup_"}, key=lambda p: (-len(p), p)))


def _slips(a: str, b: str, limit: int) -> int:
    """Optimal string alignment distance of a and b (a swap of neighbours is one slip), or
    limit + 1 once it must exceed limit."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    before, row = None, list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, other in enumerate(b, 1):
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + (char != other))
            if before is not None and i > 1 and j > 1 and char == b[j - 2] and a[i - 2] == other:
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > limit:
            return limit + 1
        before, row = row, current
    return row[-1]


def _starts_like(name: str, words) -> bool:
    """True when name begins within one slip of a prefix's first word and its '_' (torchrn_,
    torchrunlaunch_ and wirup_ do; foo_ does not)."""
    return any(_slips(name[: len(word) + cut], word, 1) <= 1 for word in words for cut in (-1, 0, 1))


def _nearest(name: str, candidates) -> str:
    """The candidate most like name, or "" when none is much like it (difflib's ratio under 0.8:
    names sharing a long prefix score 0.7 with nothing else in common)."""
    import difflib

    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.8)
    return close[0] if close else ""


def _unknown_message(name: str, nearest: str, owner: str) -> str:
    if nearest:
        hint = f"did you mean {nearest}?"
    elif owner == "wireup_":
        hint = "none of wireup's cluster-wide variables is close (group_vars/all.yml lists them)."
    else:
        role = owner.removesuffix("_")
        hint = f"none of the {role} role's variables is close (roles/{role}/README.md lists them)."
    return (
        f"{name} is not a wireup variable: {hint} Fix the name where it is set (-e, the inventory, "
        "group_vars or host_vars); a variable of another tool that looks like wireup's goes in "
        "preflight_foreign_variables"
    )


def unknown_variables(names, documented, roles) -> dict[str, str]:
    """{name: error} for every name that carries a prefix of ``roles`` (variable_prefixes) or
    starts like one within NAME_SLIPS of a documented name, but is not ``documented`` (the roles'
    argument_specs), a fact wireup sets (FACTS) or a renamed one (RENAMED says that itself).
    Registers (``__*``) and Ansible's own (``ansible_*``) pass."""
    documented = frozenset(documented)
    prefixes = variable_prefixes(roles)
    words = {prefix.split("_", 1)[0] + "_" for prefix in prefixes}
    out = {}
    for name in sorted({str(n) for n in names}):
        if name in documented or name in FACTS or name in RENAMED or name.startswith(("__", "ansible_")):
            continue
        owner = next((p for p in prefixes if name.startswith(p)), "")
        if owner:
            out[name] = _unknown_message(name, _nearest(name, documented), owner)
        elif _starts_like(name, words):
            slips = {d: _slips(name, d, NAME_SLIPS) for d in documented}
            fewest = min(slips.values(), default=NAME_SLIPS + 1)
            if fewest <= NAME_SLIPS:
                close = sorted(d for d, n in slips.items() if n == fewest)
                out[name] = _unknown_message(name, _nearest(name, close) or close[0], "")
    return out


def inventory_source_errors(sources, exists=os.path.exists) -> list[str]:
    """An error for every inventory source (Ansible's ansible_inventory_sources) that names a path
    that is not there: Ansible goes on with the implicit localhost alone and the run stops at
    "group 'gpu_nodes' does not exist". A host list (``-i node1,node2,``) is not a path."""
    return [
        f"the inventory {source} does not exist: give -i a file or folder that does (copy "
        "inventory/example/ to inventory/mycluster and put your nodes in it, README step 2)"
        for source in sources
        if "," not in str(source) and not exists(str(source))
    ]


# ---------------------------------------------------------------- the one inventory check
# Env mappings exported by bash scripts; each key must be a shell name. The bench role's
# (bench_env, bench_fabric_env) are checked with its other variables, in bench_errors.
ENV_MAPPINGS = ("wireup_job_env", "torchrun_launch_env")


def _gpu_trial_errors(values: dict) -> list[str]:
    """The gpu_trial role's settings (issue 25; its rule is gpu_trial.settings_errors, imported here
    late: gputrial's imports lead back to this module)."""
    from . import gpu_trial

    return gpu_trial.settings_errors({k: v for k, v in values.items() if k.startswith("gpu_trial_")})


def host_errors(values: dict) -> list[str]:
    """Every check of one host's variables that needs no node (values: its variables as the
    inventory, group_vars, host_vars and -e set them, over the roles' defaults)."""
    errors = validate_pins(values)
    if "wireup_nproc_per_node" in values:
        errors += validate_nproc(values["wireup_nproc_per_node"])
    errors += validate_settings(values)
    for name in ENV_MAPPINGS:
        if name in values:
            errors += shell_name_errors(name, values[name])
    if "wireup_secret_env" in values:
        errors += secret_env_errors(values["wireup_secret_env"])
    if "torchrun_launch_slurm_options" in values:
        errors += slurm_option_errors(values["torchrun_launch_slurm_options"])
    if "torchrun_launch_args" in values:
        errors += program_args_errors(values["torchrun_launch_args"])
    errors += bench_errors({k: v for k, v in values.items() if k.startswith("bench_")})
    errors += _gpu_trial_errors(values)  # issue 25
    # Issue 26's continuous checks (node_check_*, slurm_health_check_*): their own module.
    from ..core.watchsettings import errors as continuous_errors

    errors += continuous_errors(values)
    errors += renamed_errors(values)
    return errors


def inventory_errors(
    hosts: dict,
    groups: dict,
    node_group: str,
    master_host: str = "",
    ansible_core: tuple[str, str] | None = None,
) -> list[str]:
    """Every inventory-only check, run once before any node is touched (as kubespray's
    validate_inventory): the cluster's shape, then each host's variables (pins, processes per
    node, ports, paths, env names, bench settings, renamed variables), then the control node's
    ansible-core. An error every host shares is given once; else it names its hosts.

    hosts: {host: {variable: value}}; ansible_core: (version, wireup_ansible_core_range)."""
    errors = validate_cluster(dict(groups), node_group, master_host)
    # Before anything runs: a name that cannot be a path or a word of a script would otherwise
    # fail only when results are written, after every benchmark ran.
    errors += inventory_host_errors(sorted(set(hosts) | set(dict(groups).get(node_group) or [])))
    seen: dict[str, list[str]] = {}
    for host in sorted(hosts):
        for error in host_errors(dict(hosts[host])):
            seen.setdefault(error, []).append(host)
    for error, where in seen.items():
        errors.append(error if len(where) == len(hosts) else f"{', '.join(where)}: {error}")
    if ansible_core:
        version, spec = ansible_core
        if not check_version_range(str(version), str(spec)):
            errors.append(
                f"ansible-core {version} is outside wireup_ansible_core_range ({spec}): run wireup from "
                f"its venv (make venv; .venv/bin/ansible-playbook)"
            )
    return errors
