"""Every command the README, the docs, the role READMEs and wireup's own closing lines tell a user to
paste runs after the README's own set-up (issue 38 item 1).

The set-up is the README's: `make venv` (the Makefile's venv target installs its requirements
files into .venv; nothing is activated, so a program of the venv is written `.venv/bin/NAME`),
then `inventory/example/` copied to `inventory/mycluster` (step 2). Commands come from fenced
shell blocks (every line) and inline code spans that start with a program; `make run`'s `Next:`
lines (wireup.report.runsummary) and launch.yml's follow-up lines
(wireup.plans.torchrun_launch.follow_lines) are read from their real producers. Each command is
classified and checked:

- `make TARGET VAR=...`: the target exists in the Makefile and reads VAR;
- `.venv/bin/NAME`: a program the requirements install (python and pip: the venv's own);
  `-m MODULE` and script paths exist;
- `.venv/bin/ansible-playbook ...`: Ansible's own argument parser accepts the line; the playbooks
  exist; every `-e` name is documented in some role's argument_specs (or is `ansible_*`); every
  `--tags`/`--skip-tags` tag is one of the playbook's; and every playbook parses with each
  inventory named (a cluster's own inventory, not in the repository, is checked with ansible.cfg's
  default): one `ansible-playbook --list-tags` per inventory for all of them (the list goes through
  the same load and post-validation of every play as `--syntax-check`, then lists the tags);
- fragments (`-e NAME=VALUE`, `--tags T`, `site.yml --tags T -e ...`): names and tags as above;
- `python3`, `bash`, repository scripts (`tests/gpu/run.sh`): the file or module exists;
- programs on a node (`wireup-check`, `sacct`, `nvidia-smi` ...): wireup's own are installed by
  a role;
- a program of the venv written bare (`ansible-playbook`, `pytest`, `python`) is refused: it is not
  on the PATH after `make venv`; so is a program no class knows in a shell block.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import importlib.util
import io
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.report import runsummary
from tests import busy

REPO = pathlib.Path(__file__).resolve().parents[2]
PAGES = [
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted((REPO / "roles").glob("*/README.md")),
]
VENV_BIN = ".venv/bin/"
# README step 2: "Copy inventory/example/ to inventory/mycluster".
SETUP_COPIES = {"inventory/mycluster": "inventory/example"}
DEFAULT_INVENTORY = "inventory/local.yml"  # ansible.cfg's
ENTRY_PLAYBOOKS = ("site.yml", "bench.yml", "launch.yml", "jobs.yml")
SPECIAL_TAGS = {"all", "always", "never", "tagged", "untagged"}
SHELL_BLOCKS = ("sh", "bash", "shell", "console")
# Programs a node has (the driver's, Slurm's, the OS's) or that wireup installs there (wireup-*:
# a role must install it). Written bare on purpose: they run on a node, not from the venv.
NODE_PROGRAMS = {
    "wireup-check",
    "wireup-jobctl",
    "wireup-watchdog",
    "wireup-listen",
    "nvidia-smi",
    "dcgmi",
    "sbatch",
    "squeue",
    "sacct",
    "scancel",
    "scontrol",
    "srun",
    "dpkg-query",
    "apt-cache",
    "systemctl",
    "journalctl",
    "hostnamectl",
    "torchrun",
}
# Debian 12's own (the Makefile uses the first three; docs/make-run.md counts packages with apt-get).
SYSTEM_PROGRAMS = {"python3", "bash", "sh", "apt-get", "ls", "mktemp"}
# bash's own keywords and builtins (a loop in a shell block, `kill $pids`): no program to provide.
SHELL_WORDS = {
    "for", "in", "do", "done", "while", "until", "if", "then", "elif", "else", "fi", "case", "esac",
    ":", "true", "false", "jobs", "kill", "wait", "export", "cd", "set", "unset", "echo", "printf",
    "time", "trap", "read", "test", "[", "sleep",
}  # fmt: skip
REPO_TOPS = ("tests/", "files/", "roles/", "plugins/", "docs/", "inventory/", ".ci/", "playbooks/")


@dataclasses.dataclass(frozen=True)
class Command:
    where: str  # page:line
    text: str
    block: bool  # a line of a fenced shell block (every line is a command there)


# ---------------------------------------------------------------- extraction
FENCE = re.compile(r"^\s*```+\s*([A-Za-z]*)\s*$")
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
SUBST = re.compile(r"\$\(((?:[^()'\"]|'[^']*'|\"[^\"]*\")*)\)")


def page_commands(text: str, name: str) -> list[Command]:
    """The fenced shell blocks' commands (continuations joined, comments dropped) and the inline
    code spans outside fences (a span may cross a line break within a paragraph)."""
    out, prose, fence, pending = [], [], None, ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if opened and fence is None:
            fence = opened.group(1).lower()
            prose.append("")
            continue
        if opened or (fence is not None and line.strip().startswith("```")):
            fence = None
            prose.append("")
            continue
        if fence is None:
            prose.append(line)
            continue
        prose.append("")
        if fence in SHELL_BLOCKS and not line.strip().startswith("#"):
            pending += line.strip()
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            if pending:
                out.append(Command(f"{name}:{number}", pending, True))
            pending = ""
    body = "\n".join(prose)
    for match in SPAN.finditer(body):
        line = body.count("\n", 0, match.start()) + 1
        out.append(Command(f"{name}:{line}", " ".join(match.group(1).replace("\\|", "|").split()), False))
    return out


def _segments(text: str) -> list[list[str]]:
    """The simple commands of a line: command substitutions first (each a command of its own),
    then split at ; && || | (outside quotes), each a list of words with leading VAR=value kept."""
    subs = [m.group(1) for m in SUBST.finditer(text)]
    text = SUBST.sub("SUBST", text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:
        return [[text]]
    out, current = [], []
    for word in words:
        if word in (";", "&&", "||", "|", "&"):
            out.append(current)
            current = []
        else:
            current.append(word)
    out.append(current)
    return [seg for sub in subs for seg in _segments(sub)] + [seg for seg in out if seg]


# ---------------------------------------------------------------- what the set-up provides
@dataclasses.dataclass
class Setup:
    targets: set
    make_vars: set
    venv_programs: set
    documented: set
    node_installed: str  # every text file under roles/, where wireup-* must be named
    tags: dict  # playbook -> its tags (filled by the --list-tags runs)
    runs: dict  # inventory -> (rc, output) of its --list-tags run


def makefile_facts():
    text = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:(?!=)", text, re.M))
    make_vars = set(re.findall(r"\$\(([A-Z_]+)\)", text))
    make_vars |= set(re.findall(r"^([A-Z_]+)\s*[?:]?=", text, re.M))
    # .venv's requirements: the third argument of the venv rule's MAKE_VENV call.
    requirements = re.findall(r"\$\(call MAKE_VENV,\$\(PYTHON\),\$\(VENV\),([^,)]+\.txt)", text)
    return targets - {"PHONY"}, make_vars, requirements


def venv_programs(requirements) -> set:
    """The programs `make venv` puts in .venv/bin: the venv's python and pip, and what each
    distribution named in the requirements files installs (console scripts, binaries)."""
    names = {"python", "python3", "pip", "pip3"}
    requirements = list(requirements)
    for req in requirements:
        for line in (REPO / req).read_text().splitlines():
            included = re.fullmatch(r"\s*-r\s+(\S+\.txt)\s*", line)
            if included:  # requirements.txt's -r requirements-tools.txt
                requirements.append(included.group(1))
                continue
            dist = re.match(r"\s*([A-Za-z0-9_.-]+)", line.split("#", 1)[0])
            if not dist:
                continue
            found = importlib.metadata.distribution(dist.group(1))
            names |= {ep.name for ep in found.entry_points if ep.group == "console_scripts"}
            files = [pathlib.PurePath(f) for f in found.files or ()]
            names |= {f.name for f in files if f.parent.name == "bin"}
    return names


def _filter_module():
    path = REPO / "plugins/filter/wireup_validate.py"
    spec = importlib.util.spec_from_file_location("wireup_validate_filter_docs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_setup() -> Setup:
    targets, make_vars, requirements = makefile_facts()
    role_files = [p for p in (REPO / "roles").rglob("*") if p.is_file() and p.suffix != ".md"]
    roles_text = "\n".join(p.read_text(errors="replace") for p in role_files)
    return Setup(
        targets=targets,
        make_vars=make_vars,
        venv_programs=venv_programs(requirements),
        documented=_filter_module().documented_variables(str(REPO / "roles")),
        node_installed=roles_text,
        tags={},
        runs={},
    )


# ---------------------------------------------------------------- the checks
def _strip_env(words):
    env = {}
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?=.*", words[0]):
        key, value = words[0].split("=", 1)
        env[key] = value
        words = words[1:]
    return env, words


def _module_exists(module: str, env: dict, system: bool) -> bool:
    roots = [REPO, *(REPO / p for p in env.get("PYTHONPATH", "").split(":") if p)]
    rel = pathlib.Path(*module.split("."))
    if any((r / rel).with_suffix(".py").is_file() or (r / rel / "__init__.py").is_file() for r in roots):
        return True
    if any((r / rel).is_dir() for r in roots):
        return True  # a namespace package (ansible_collections)
    spec = importlib.util.find_spec(module.split(".", maxsplit=1)[0])
    return spec is not None and (not system or "site-packages" not in str(spec.origin))


def _python_problems(words, env, system) -> list[str]:
    if "-m" in words[1:]:
        module = words[words.index("-m") + 1] if words.index("-m") + 1 < len(words) else ""
        if not _module_exists(module, env, system):
            return [f"python module {module!r} is not there after the set-up"]
        return []
    script = next((w for w in words[1:] if not w.startswith("-")), None)
    if script and script.endswith(".py") and not (REPO / script).is_file():
        return [f"{script} does not exist"]
    return []


def _make_problems(words, setup) -> list[str]:
    problems = []
    for word in words[1:]:
        if word.startswith("-"):
            continue
        if "=" in word:
            name = word.split("=", 1)[0]
            if name not in setup.make_vars:
                problems.append(f"the Makefile reads no variable {name}")
        elif word not in setup.targets:
            problems.append(f"the Makefile has no target {word!r}")
    return problems


def _inventory(path: str) -> str:
    """The inventory a command's -i names, as the set-up has it in the repository."""
    rel = os.path.relpath(path, REPO) if os.path.isabs(path) else path
    rel = rel.rstrip("/")
    if rel in SETUP_COPIES:
        return SETUP_COPIES[rel]
    return rel if "," not in rel and (REPO / rel).exists() else DEFAULT_INVENTORY


def _playbook(name: str) -> str | None:
    if re.fullmatch(r"wireup\.cluster\.[a-z_]+", name):
        return name if (REPO / "playbooks" / f"{name.rsplit('.', 1)[1]}.yml").is_file() else None
    return name if (REPO / name).is_file() else None


def parse_playbook_args(args):
    """Ansible's own parser of ansible-playbook's command line: (namespace, error)."""
    from ansible.cli.playbook import PlaybookCLI

    cli = PlaybookCLI(["ansible-playbook", *args])
    cli.init_parser()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return cli.parser.parse_args(args), ""
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1]


def extra_var_names(values) -> tuple[set, list[str]]:
    from ansible.parsing.splitter import parse_kv

    names, problems = set(), []
    for value in values or ():
        if value.startswith("@"):
            if not (REPO / value[1:]).is_file():
                problems.append(f"-e {value}: no such file")
            continue
        if value.lstrip().startswith("{"):
            try:
                names |= set(yaml.safe_load(value))
            except yaml.YAMLError as exc:
                problems.append(f"-e {value!r} does not parse: {exc}")
            continue
        pairs = parse_kv(value)
        if "_raw_params" in pairs:  # a word without NAME=: Ansible keeps it as _raw_params
            raw = pairs["_raw_params"]
            problems.append(f"-e {value!r}: {raw!r} is no NAME=VALUE (quote the value inside)")
        names |= set(pairs) - {"_raw_params"}
    return names, problems


def _split_tags(values) -> set:
    return {t.strip() for v in values or () for t in v.split(",") if t.strip()}


def _ansible_arg_problems(ns, setup, playbooks) -> list[str]:
    names, problems = extra_var_names(ns.extra_vars)
    problems += [
        f"-e {name}: not a documented variable of any role (meta/argument_specs.yml)"
        for name in sorted(names)
        if name not in setup.documented and not name.startswith("ansible_")
    ]
    known = set(SPECIAL_TAGS)
    for playbook in playbooks or setup.tags:
        known |= setup.tags.get(playbook, set())
    where = ", ".join(playbooks) if playbooks else "any playbook"
    return problems + [
        f"tag {tag!r} is not a tag of {where}"
        for tag in sorted(_split_tags(ns.tags) | _split_tags(ns.skip_tags))
        if tag not in known
    ]


def _ansible_playbook_problems(args, setup, needs) -> list[str]:
    ns, error = parse_playbook_args(args)
    if ns is None:
        return [f"ansible-playbook does not accept it: {error}"]
    problems, playbooks = [], []
    for name in ns.args:
        found = _playbook(name)
        if found:
            playbooks.append(found)
        else:
            problems.append(f"playbook {name} does not exist")
    for inventory in [_inventory(i) for i in ns.inventory or []] or [DEFAULT_INVENTORY]:
        needs.setdefault(inventory, set()).update(playbooks)
    return problems + _ansible_arg_problems(ns, setup, playbooks)


def _venv_problems(words, env, setup, needs) -> list[str]:
    program = words[0][len(VENV_BIN) :]
    if program not in setup.venv_programs:
        return [f"{words[0]} is not installed by `make venv` (the Makefile's requirements)"]
    if len(words) == 1:
        return []
    if program == "ansible-playbook":
        return _ansible_playbook_problems(words[1:], setup, needs)
    if program.startswith("python"):
        return _python_problems(words, env, system=False)
    return []


FRAGMENT = re.compile(r"(-e|--extra-vars|--tags|--skip-tags|-t)\s|(site|bench|launch|jobs)\.yml\s+-")


def command_problems(command: Command, setup: Setup, needs: dict) -> list[str]:
    """What is wrong with one command (nothing for a span that is no command); ``needs`` collects
    {inventory: playbooks} for the --list-tags runs."""
    out = []
    for words in _segments(command.text):
        out += _segment_problems(words, command, setup, needs)
    return [f"{command.where}: `{command.text}`: {p}" for p in out]


def _segment_problems(words, command, setup, needs) -> list[str]:  # one class per branch
    env, words = _strip_env(words)
    if not words or (not command.block and _a_name_only(words)):
        return []
    program = words[0]
    if program.strip("()") in SHELL_WORDS:
        return []
    if program.startswith(VENV_BIN):
        return _venv_problems(words, env, setup, needs)
    if program == "make":
        return _make_problems(words, setup)
    if program in SYSTEM_PROGRAMS:
        script = words[1] if len(words) > 1 and program != "python3" else None
        if script and not script.startswith("-") and not (REPO / script).is_file():
            return [f"{script} does not exist"]
        return _python_problems(words, env, system=True) if program == "python3" else []
    if program in setup.venv_programs:
        return [f"{program} is not on the PATH after `make venv`: write {VENV_BIN}{program}"]
    if program.startswith(REPO_TOPS) or program.startswith("./"):
        path = REPO / program
        return [] if path.is_file() and os.access(path, os.X_OK) else [f"{program} is not an executable file"]
    if program in NODE_PROGRAMS:
        wireup_own = program.startswith("wireup-") and program not in setup.node_installed
        return [f"no role installs {program}"] if wireup_own else []
    if not command.block and FRAGMENT.match(" ".join(words)):
        return _fragment_problems(words, setup)
    if command.block:
        return [f"{program}: no program the set-up provides (nor one of a node's)"]
    return []


def _a_name_only(words) -> bool:
    """A span of one word (a program's or a file's name in a sentence, `pip`, `roles/bench`) or a
    path followed by what it holds (`plans/pytorch_venv.py: plan`) names something; it is no command
    line. The venv's paths are checked all the same."""
    return not words[0].startswith(VENV_BIN) and (len(words) == 1 or words[0].endswith(":"))


def _fragment_problems(words, setup) -> list[str]:
    """Options of an ansible-playbook line quoted in a sentence (`-e bench_fabric=true`,
    `--tags quick`, `site.yml --tags node_check`): its -e names and tags."""
    given = [w for w in words if _playbook(w)]
    ns, error = parse_playbook_args(words if given else [*words, "site.yml"])
    if ns is None:
        return [f"ansible-playbook does not accept it: {error}"]
    return _ansible_arg_problems(ns, setup, given)


# ---------------------------------------------------------------- the batched Ansible runs
def list_tags(needs: dict) -> tuple[dict, dict]:
    """One `ansible-playbook --list-tags -i INVENTORY PLAYBOOK...` per inventory, run together:
    ({playbook: tags}, {inventory: (rc, output)})."""
    procs = {
        inventory: subprocess.Popen(
            [
                str(pathlib.Path(sys.executable).parent / "ansible-playbook"),
                "--list-tags",
                "-i",
                inventory,
                *sorted(pbs),
            ],
            cwd=REPO,
            env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for inventory, pbs in sorted(needs.items())
        if pbs
    }
    tags, runs = {}, {}
    for inventory, proc in procs.items():
        output = proc.communicate(timeout=busy.HANG_S)[0]
        runs[inventory] = (proc.returncode, output)
        for playbook, found in parse_list_tags(output).items():
            tags.setdefault(playbook, set()).update(found)
    return tags, runs


def parse_list_tags(output: str) -> dict:
    """{playbook: every play's and task's tag} from ansible-playbook --list-tags' output."""
    out, current = {}, None
    for line in output.splitlines():
        head = re.match(r"playbook: (\S+)", line)
        if head:
            current = head.group(1)
            out[current] = set()
        for listed in re.findall(r"TAGS: \[([^\]]*)\]", line):
            if current:
                out[current] |= _split_tags([listed])
    return {(os.path.relpath(k, REPO) if os.path.isabs(k) else k): v for k, v in out.items()}


# ---------------------------------------------------------------- what wireup prints
def summary_commands() -> list[Command]:
    """`make run`'s closing lines (runsummary.next_steps from a phases.tsv as the Makefile writes
    it), for a healthy testbed run and a cluster run whose bench failed: the commands in backticks."""
    healthy = runsummary.read_phases("testbed\t0\t60\nsite\t0\t90\nbench\t0\t120\nlaunch\t0\t30\n")
    failed = runsummary.read_phases("site\t0\t90\nbench\t2\t120\n")
    lines = runsummary.next_steps(healthy, {}, ".testbed/default/inventory.yml", "default")
    lines += runsummary.next_steps(failed, {}, "inventory/mycluster", "")
    return [c for i, line in enumerate(lines) for c in page_commands(line, f"runsummary.next_steps[{i}]")]


def follow_commands() -> list[Command]:
    """launch.yml's lines after a detached start (torchrun_launch.follow_lines on
    torchrun_launch.job_plan's plan)."""
    from test_launch_jobs_follow import launched

    from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import torchrun_launch

    plan = launched()
    lines = torchrun_launch.follow_lines(plan, {}, [str(REPO / "inventory/mycluster")])
    out = []
    for i, line in enumerate(lines):
        said = re.match(r"(status|logs|stop|list):\s+(.*?)(\s{3}\(.*)?$", line)
        if said:
            out.append(Command(f"torchrun_launch.follow_lines[{i}]", said.group(2), True))
    return out


def every_command() -> list[Command]:
    commands = []
    for page in PAGES:
        commands += page_commands(page.read_text(), str(page.relative_to(REPO)))
    return commands + summary_commands() + follow_commands()


@pytest.fixture(scope="module")
def checked():
    """(setup, commands, problems): every command checked, the Ansible runs batched."""
    setup, needs = make_setup(), {DEFAULT_INVENTORY: set(ENTRY_PLAYBOOKS)}
    commands = every_command()
    for command in commands:
        command_problems(command, setup, needs)  # collects what the runs must load
    setup.tags, setup.runs = list_tags(needs)
    problems = [p for command in commands for p in command_problems(command, setup, {})]
    return setup, commands, problems


# ---------------------------------------------------------------- the tests
def test_every_command_runs_after_the_readmes_set_up(checked):
    _setup, _commands, problems = checked
    assert problems == [], "\n".join(problems)


def test_every_playbook_parses_with_each_inventory_named(checked):
    setup, _commands, _problems = checked
    assert {"inventory/local.yml", "inventory/example"} <= set(setup.runs)
    for inventory, (rc, output) in setup.runs.items():
        assert rc == 0, f"-i {inventory}: {output[-3000:]}"
    assert {"site.yml", "bench.yml", "launch.yml", "jobs.yml"} <= set(setup.tags)
    every_tag = set().union(*setup.tags.values())
    assert {"quick", "fabric", "stepcost", "gpu_health", "gpu_trial", "pytorch_venv"} <= every_tag


def test_the_readme_and_wireups_own_lines_are_read(checked):
    _setup, commands, _problems = checked
    texts = {c.where.split(":", 1)[0]: c.text for c in commands}
    step3 = ".venv/bin/ansible-playbook -i inventory/mycluster site.yml"
    assert any(c.text.startswith(step3) for c in commands)
    assert "runsummary.next_steps[0]" in {c.where.rsplit(":", 1)[0] for c in commands}, texts
    assert any(c.where.startswith("torchrun_launch.follow_lines") for c in commands)
    assert sum(c.where.startswith("README.md") for c in commands) >= 10


SAMPLE = """\
Step 3: `ansible-playbook -i inventory/mycluster site.yml --check`.

```sh
.venv/bin/ansible-playbook -i inventory/mycluster bench.yml --tags quik
.venv/bin/ansible-playbook jobs.yml -e torchrun_lauch_action=stop
.venv/bin/ansible-playbook -i inventory/mycluster bench.yml --tags quick -e bench_fabric=true
make runn
make run INVENTRY=inventory/mycluster
.venv/bin/ansible-playbok site.yml
pytest -q tests/unit
curl -s http://example.invalid/
```

Quick (`--tags quikc`), `-e bench_fabirc=true`, and the playbook `site.yml` or `python`.
"""


def test_the_check_fails_on_a_bare_program_a_misspelled_tag_or_variable(checked):
    """The same checks on a page with the faults the test must catch (the tags are the real
    playbooks', from the fixture's runs)."""
    setup, _commands, _problems = checked
    problems = [p for c in page_commands(SAMPLE, "sample.md") for p in command_problems(c, setup, {})]
    said = "\n".join(problems)
    expected = [
        ("sample.md:1", "ansible-playbook is not on the PATH after `make venv`: write .venv/bin/"),
        ("sample.md:4", "tag 'quik' is not a tag of bench.yml"),
        ("sample.md:5", "-e torchrun_lauch_action: not a documented variable of any role"),
        ("sample.md:7", "the Makefile has no target 'runn'"),
        ("sample.md:8", "the Makefile reads no variable INVENTRY"),
        ("sample.md:9", ".venv/bin/ansible-playbok is not installed by `make venv`"),
        ("sample.md:10", "pytest is not on the PATH after `make venv`: write .venv/bin/pytest"),
        ("sample.md:11", "curl: no program the set-up provides"),
        ("sample.md:14", "tag 'quikc' is not a tag of any playbook"),
        ("sample.md:14", "-e bench_fabirc: not a documented variable of any role"),
    ]
    for where, needle in expected:
        assert any(p.startswith(where + ":") and needle in p for p in problems), f"{where} {needle}\n{said}"
    assert len(problems) == len(expected), said


def test_a_playbook_that_does_not_parse_fails_its_run(tmp_path):
    """The batched run is a real parse: a broken playbook makes its inventory's run fail."""
    broken = tmp_path / "broken.yml"
    broken.write_text("- hosts: all\n  tasks:\n    - name: x\n      no_such_module_anywhere: {}\n")
    tags, runs = list_tags({DEFAULT_INVENTORY: {str(broken)}})
    rc, output = runs[DEFAULT_INVENTORY]
    assert rc != 0 and "no_such_module_anywhere" in output
    assert json.dumps(sorted(tags)) == "[]"
