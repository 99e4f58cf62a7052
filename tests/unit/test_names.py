"""Names and strings from the inventory or a node that become controller paths or words of a
rendered script (issue 23, items 2, 3, 8, 10): one host name grammar, fullmatch everywhere, a
controller-path helper that keeps results under the results folder, allow-listed Slurm options,
torchrun_launch_args split with shlex, a tuned env origin line that stays one line."""

import json
import pathlib
import subprocess

import pytest
import test_launch_templates as templates

from ansible_collections.wireup.cluster.plugins.module_utils.wireup.core import checks
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.judge import benchenv
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.launch import slurm
from ansible_collections.wireup.cluster.plugins.module_utils.wireup.plans import preflight, torchrun_launch

ROOT = pathlib.Path(__file__).resolve().parents[2]
GROUP = ["node1", "node2"]
NODES = {
    h: {"address": f"10.0.0.{i}", "interface": "eth0", "gpu_present": False, "gpu_count": 0, "hostname": h}
    for i, h in enumerate(GROUP, 1)
}
BASE = {
    "job": "ddp",
    "program": "/opt/wireup/examples/ddp_multinode.py",
    "base_dir": "/opt/wireup",
    "venv_path": "/opt/wireup/venv",
    "group": "gpu_nodes",
    "node_group": "gpu_nodes",
    "nproc_per_node": 1,
    "master_host": "node1",
}


def job(tmp_path, hosts=GROUP, nodes=NODES, **kw):
    return torchrun_launch.job_plan(
        list(hosts), nodes, **dict(BASE, results_dir=str(tmp_path / "results"), **kw)
    )


def answer(run_id):
    """wireup-jobctl latest --record's answer naming ``run_id`` (as a node could send it)."""
    return {
        "rc": 0,
        "stdout": "\n".join([run_id, json.dumps({"run_id": run_id, "started": 1.0, "record": False})]),
    }


# ---------------------------------------------------------------- item 2: controller paths
def test_a_run_id_a_node_answers_cannot_lead_outside_results(tmp_path):
    plan = job(tmp_path, run_id="r1", follow=True)
    evil = "x/../../../../escaped"
    jobs = torchrun_launch.jobs_plan(plan, "logs", "", found={h: answer(evil) for h in GROUP})
    assert jobs["errors"] and "is not a usable run id" in jobs["errors"][0]
    assert jobs["results"] == "" and jobs["hosts"] == []


def test_a_trailing_newline_in_a_run_id_is_refused(tmp_path):
    assert torchrun_launch.run_id_errors("r1\n")
    assert job(tmp_path, run_id="r1\n")["errors"]


def test_results_path_keeps_every_name_under_the_root(tmp_path):
    root = tmp_path / "results" / "jobs"
    assert checks.results_path(str(root), "ddp-r1", "node1.log") == f"{root}/ddp-r1/node1.log"
    for name in ("../../../../tmp/evil.log", "..", ".", "a/b", "", ".hidden", "a\n", "x y"):
        with pytest.raises(ValueError):
            checks.results_path(str(root), "ddp-r1", name)
    # a folder under the root that is a link out of it: the resolved path is checked
    root.mkdir(parents=True)
    (root / "ddp-r1").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="resolves outside"):
        checks.results_path(str(root), "ddp-r1", "node1.log")


def test_an_inventory_host_that_is_a_path_is_refused_before_anything_runs(tmp_path):
    evil = "../../../../tmp/evil"
    errors = preflight.inventory_errors({evil: {}, "node1": {}}, {"gpu_nodes": [evil, "node1"]}, "gpu_nodes")
    assert len(errors) == 1 and errors[0].startswith(f"inventory host {evil!r} is not a host name")
    nodes = dict(NODES, **{evil: dict(NODES["node2"], hostname="")})
    assert job(tmp_path, hosts=["node1", evil], nodes=nodes)["errors"]


def test_the_fetch_destinations_go_through_the_path_helper(tmp_path):
    tasks = ROOT / "roles" / "torchrun_launch" / "tasks"
    for name in ("wait.yml", "slurm.yml", "slurm_wait.yml", "report.yml"):
        dests = [line for line in (tasks / name).read_text().splitlines() if line.strip().startswith("dest:")]
        assert dests and all("wireup_results_path(" in d for d in dests), (name, dests)
    # jobs.yml fetches what torchrun_launch.jobs_fetches names: its dests come from checks.results_path.
    text = (tasks / "jobs.yml").read_text()
    assert [line for line in text.splitlines() if line.strip().startswith("dest:")] == [
        '        dest: "{{ item.dest }}"'
    ]
    assert "wireup_launch_jobs_fetches(" in text
    jobs = {"action": "logs", "hosts": ["node1", "../evil"], "results": str(tmp_path / "ddp-r1"), "slurm": {}}
    status = {"stdout": json.dumps({"state": "exited", "log": "/opt/wireup/jobs/ddp/logs/r1.log"})}
    assert torchrun_launch.jobs_fetches(jobs, "node1", status)[0]["dest"] == f"{tmp_path}/ddp-r1/node1.log"
    with pytest.raises(ValueError):
        torchrun_launch.jobs_fetches(jobs, "../evil", status)


# ---------------------------------------------------------------- item 3: names reach shell
@pytest.mark.parametrize(
    "name", ["node2$(touch X)", "gpu a02", "node2\n", "node2\nrm -rf /", "-node", "node_2", "a" * 64, "nöde"]
)
def test_host_names_follow_rfc_1123(name):
    assert not checks.is_host_name(name)
    assert checks.inventory_host_errors([name])


@pytest.mark.parametrize(
    "name", ["node2", "gpu-a02", "n1.cluster.example", "10.0.0.1", "localhost", "a" * 63]
)
def test_plain_host_names_pass(name):
    assert checks.is_host_name(name) and not checks.inventory_host_errors([name])


def test_an_inventory_ip_address_is_a_host():
    assert checks.is_inventory_host("fe80::1") and not checks.is_host_name("fe80::1")


def test_a_node_hostname_with_a_newline_is_refused_by_preflight_and_the_plan(tmp_path):
    bad = "node2\nexport EVIL=1"
    errors = preflight.validate_cluster({"g": GROUP}, "g", "", None, {"node1": "node1", "node2": bad})
    assert len(errors) == 1 and errors[0].startswith("node2: its host name")
    nodes = dict(NODES, node2=dict(NODES["node2"], hostname=bad))
    assert any("its host name" in e for e in job(tmp_path, nodes=nodes)["errors"])
    with pytest.raises(ValueError, match="not a plain host name"):
        slurm.nodelist({"hosts": GROUP, "nodes": nodes})


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"partition": "gpu --uid=0 --wrap=id"}, "must be one word"),
        ({"partition": "gpu\n#SBATCH --uid=0"}, "must be one word"),
        ({"time": "1:00\ntouch /tmp/x"}, "must be one word"),
        ({"uid": "0"}, "is not an sbatch option"),
        ({"wrap": "id"}, "is not an sbatch option"),
        ({"partition\nid": "gpu"}, "is not an sbatch option"),
        ({"partition": ["a"]}, "must be a string or number"),
        ("partition=gpu", "must be a mapping"),
    ],
)
def test_slurm_options_are_allow_listed_and_one_word(options, says):
    errors = checks.slurm_option_errors(options)
    assert len(errors) == 1 and says in errors[0]
    assert preflight.host_errors({"torchrun_launch_slurm_options": options}) == errors
    with pytest.raises(ValueError):
        slurm.sbatch_options(options)


def test_an_unknown_slurm_option_names_the_list():
    (error,) = checks.slurm_option_errors({"uid": 0})
    assert "partition" in error and "time" in error


def test_good_slurm_options_render_as_sbatch_words():
    options = {"time": "01:00:00", "partition": "gpu", "exclusive": True, "mem": 0}
    assert checks.slurm_option_errors(options) == []
    assert slurm.sbatch_options(options) == ["--exclusive", "--mem=0", "--partition=gpu", "--time=01:00:00"]


def test_job_sbatch_refuses_a_hostile_slurm_option(tmp_path):
    ctx = templates.context("three-cpu-nodes", tmp_path, torchrun_launch_slurm_options={"partition": "a\nid"})
    with pytest.raises(Exception, match="must be one word"):
        templates.render("jobs/job.sbatch.j2", ctx, tmp_path / "job.sbatch")


@pytest.mark.parametrize(
    ("values", "var"),
    [
        ({"nvidia_driver_branch": "580\n"}, "nvidia_driver_branch"),
        ({"nccl_tests_commit": "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432\n"}, "nccl_tests_commit"),
        ({"wireup_job_env": {"FOO\n": "1"}}, "wireup_job_env"),
        ({"bench_min_bytes": "8M\n"}, "bench_min_bytes"),
    ],
)
def test_a_trailing_newline_does_not_pass_a_grammar(values, var):
    errors = preflight.host_errors(values)
    assert errors and var in errors[0]


def test_a_job_name_with_a_trailing_newline_is_refused():
    assert torchrun_launch.job_name_errors("ddp\n") and not torchrun_launch.job_name_errors("ddp")


def test_launch_sh_says_the_host_from_its_quoted_variable(tmp_path):
    """The echo line reads $WIREUP_HOST (exported single-quoted), not the name pasted into a
    double-quoted string, where $(...) would run."""
    text = (ROOT / "roles" / "torchrun_launch" / "templates" / "jobs" / "launch.sh.j2").read_text()
    echo = [line for line in text.splitlines() if line.startswith('echo "wireup: job')]
    assert echo and "inventory_hostname" not in echo[0] and "$WIREUP_HOST" in echo[0]


# ---------------------------------------------------------------- item 8: torchrun_launch_args
def test_a_string_of_arguments_is_split_as_a_shell_would():
    assert checks.program_args("--steps 5") == ["--steps", "5"]
    assert checks.program_args("--name 'two words'") == ["--name", "two words"]
    assert checks.program_args(["--steps", 5]) == ["--steps", "5"]
    assert checks.program_args(None) == []


@pytest.mark.parametrize("args", ["--name 'open", {"steps": 5}, 5, [["nested"]], [{"a": 1}]])
def test_arguments_that_are_no_list_are_refused_with_the_fix(args):
    with pytest.raises(ValueError, match="torchrun_launch_args"):
        checks.program_args(args)
    assert preflight.host_errors({"torchrun_launch_args": args})


def test_launch_sh_passes_a_string_of_arguments_as_words(tmp_path):
    ctx = templates.context("three-cpu-nodes", tmp_path, torchrun_launch_args="--steps 5")
    script = templates.render(
        "jobs/launch.sh.j2", ctx, pathlib.Path(ctx["__torchrun_launch_job_dir"]) / "launch.sh"
    )
    out = templates.run_launch(ctx, script)
    assert out["argv"][-2:] == ["--steps", "5"]


def test_the_summary_records_the_split_arguments():
    out = torchrun_launch.summary({}, {}, {}, program="/p.py", args="--steps 5")
    assert out["args"] == ["--steps", "5"]


def test_argument_specs_and_readme_say_a_string_is_split():
    role = ROOT / "roles" / "torchrun_launch"
    assert "shlex" in (role / "meta" / "argument_specs.yml").read_text()
    assert "shlex" in (role / "README.md").read_text()


# ---------------------------------------------------------------- item 10: tuned env, spaces
def test_the_tuned_env_origin_line_stays_one_line(tmp_path):
    marker = tmp_path / "marker"
    origin = {"run_id": "r1", "host": f"gpu\ntouch {marker}\n", "driver": "580\rx", "nccl": "2.28.9\u2028y"}
    text = benchenv.tuned_env_file({"NCCL_MIN_NCHANNELS": "4"}, origin)
    assert len(text.splitlines()) == 4  # comment, comment, origin, one setting
    env = tmp_path / "nccl-tuned.env"
    env.write_text(text)
    out = subprocess.run(
        ["bash", "-c", f'set -e; source "{env}"; echo "$NCCL_MIN_NCHANNELS"'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "4\n" and not marker.exists()
    assert benchenv.parse_tuned_env(text)["origin"]["host"] == f"gpu?touch {marker}?"


def test_a_host_name_with_a_space_is_refused_before_any_benchmark():
    errors = preflight.inventory_errors({"gpu a02": {}, "gpu-a01": {}}, {"g": ["gpu a02", "gpu-a01"]}, "g")
    assert len(errors) == 1 and "'gpu a02' is not a host name" in errors[0]


def test_validators_take_any_value():
    for bad in (None, 5, [], {}, "x" * 100_000, "\x00"):
        assert checks.inventory_host_errors([bad])
        assert checks.slurm_option_errors({"partition": bad}) or bad == 5
        with pytest.raises(ValueError):
            checks.results_path("/tmp/results", bad)
