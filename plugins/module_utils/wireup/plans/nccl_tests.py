"""The nccl_tests role's plan: where nccl-tests' source comes from, what it is built against, and
whether to build at all (the build's stamp), from wireup_nccl_info's one read of the node.

Pure functions, no Ansible imports, stdlib only (wireup_nccl_info imports BUILD_STAMP on the
nodes). The ``wireup_packages`` filter plugin wraps them; tests/unit/test_nccl_tests_plan.py pins
every choice. Bad input raises ``apt.PackageError`` naming the variable and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from ..core.apt import PackageError
from ..probe.bench_output import gencode, supports_json

BUILD_STAMP = "wireup-build.stamp"
SOURCE_KINDS = ("git", "dir", "archive")
NCCL_SOURCES = ("system", "venv")

# What wireup_nccl_info reports when it cannot find the NCCL to build against -> the fix.
_NCCL_FIND_PROBLEMS = {
    "venv_python": "nccl_tests_venv_python {path!r} is not an executable Python: run site.yml (pytorch_venv) "
    "first, or point nccl_tests_venv_python at the venv whose NCCL to use",
    "venv_probe": "{path} could not look for the NCCL wheel ({detail}): check nccl_tests_venv_python",
    "wheel": "no NCCL wheel importable by {path} (nvidia.nccl): pip install nvidia-nccl-cu13 into that venv, "
    "or set nccl_tests_nccl_source=system",
    "home_header": "{path}/nccl.h is missing: nccl_tests_nccl_home must hold include/nccl.h",
    "home_lib": "no libnccl.so* in {path}: nccl_tests_nccl_home must hold lib/libnccl.so.2",
    "system": "no system NCCL (nccl.h and libnccl.so) found: run site.yml (the nccl role installs "
    "libnccl-dev), or set nccl_tests_nccl_source=venv or nccl_tests_nccl_home",
}


@dataclass(frozen=True)
class Settings:
    """The role's variables the plan reads (roles/nccl_tests/tasks/main.yml passes each by name).
    ``source_kind``: what nccl_tests_source is on the controller: git (empty), dir, archive or
    missing."""

    host: str
    version: str
    commit: str
    git_url: str
    source: str
    source_kind: str
    strip_components: int
    nccl_source: str
    mpi: bool
    mpi_home: str
    make_jobs: int
    base_dir: str


class BuildFact(TypedDict):
    """The nccl_tests_build fact (the bench role reads it)."""

    bin_dir: str
    version: str
    json: bool
    arch: str
    mpi: bool
    nccl_source: str
    nccl_version: str
    ld_library_path: str  # the venv wheel's lib folder, which runs need in LD_LIBRARY_PATH


class NcclTestsPlan(TypedDict):
    """``__nccl_tests``: what roles/nccl_tests/tasks read."""

    build: bool  # the stamp of what the build depends on differs, or the binary is missing
    source_kind: str
    source: str
    git_url: str
    commit: str
    unarchive_opts: list[str]
    src: str
    stamp_path: str
    stamp: str
    # file items: the previous build gone, the source folder, a venv wheel's NCCL_HOME links
    paths: list[dict]
    make_argv: list[str]
    fact: BuildFact


def _check_inputs(info: dict, s: Settings) -> dict:
    """The NCCL wireup_nccl_info found; PackageError naming the fix for anything that would stop
    the build."""
    if not info.get("nvcc"):
        raise PackageError(
            f"{info.get('cuda_home', '')}/bin/nvcc not found on {s.host}: run site.yml (cuda_repo installs "
            f"the toolkit) or set nccl_tests_cuda_home to the CUDA toolkit directory"
        )
    nccl = info.get("nccl") or {}
    problem = nccl.get("problem")
    if problem:
        raise PackageError(_NCCL_FIND_PROBLEMS[problem["kind"]].format(**problem))
    if s.source_kind == "missing":
        raise PackageError(
            f"nccl_tests_source={s.source} does not exist on the controller: give a directory or an archive "
            f"(git archive --format=tar.gz --prefix=nccl-tests/ {s.version}) of nccl-tests {s.version}, or "
            f"leave it empty to clone nccl_tests_git_url"
        )
    if s.source_kind not in SOURCE_KINDS:
        raise PackageError(f"source_kind={s.source_kind!r}: expected git, dir, archive or missing")
    if s.nccl_source not in NCCL_SOURCES:
        raise PackageError(f"nccl_tests_nccl_source={s.nccl_source!r} is not system or venv")
    return nccl


def _wheel_home(root: str, nccl: dict) -> tuple[str, list[dict]]:
    """The NCCL wheel ships libnccl.so.2 but no libnccl.so to link against (-lnccl): build against a
    private NCCL_HOME of links to the wheel's files instead of writing into the venv."""
    home, lib = f"{root}/nccl-home", f"{nccl['lib_dir']}/libnccl.so.2"
    return home, [
        {"path": f"{home}/lib", "state": "directory"},
        {"path": f"{home}/include", "src": nccl["include_dir"], "state": "link"},
        {"path": f"{home}/lib/libnccl.so.2", "src": lib, "state": "link"},
        {"path": f"{home}/lib/libnccl.so", "src": lib, "state": "link"},
    ]


def _make_argv(s: Settings, info: dict, arch: dict, build: str, nccl_home: str) -> list[str]:
    jobs = int(s.make_jobs) if int(s.make_jobs) > 0 else int(info.get("nproc") or 1)
    argv = [
        "make",
        f"-j{jobs}",
        f"MPI={1 if s.mpi else 0}",
        f"NVCC_GENCODE={arch['flags']}",
        f"CUDA_HOME={info.get('cuda_home', '')}",
        f"BUILDDIR={build}",
    ]
    argv += [f"NCCL_HOME={nccl_home}"] if nccl_home else []
    return argv + ([f"MPI_HOME={s.mpi_home}"] if s.mpi else [])


def _fact(s: Settings, arch: dict, nccl: dict, build: str) -> BuildFact:
    return {
        "bin_dir": build,
        "version": s.version,
        "json": supports_json(s.version),
        "arch": arch["arch"],
        "mpi": bool(s.mpi),
        "nccl_source": s.nccl_source,
        "nccl_version": nccl.get("version", ""),
        "ld_library_path": nccl.get("lib_dir", "") if s.nccl_source == "venv" else "",
    }


def plan(info, node, **settings) -> NcclTestsPlan:
    """Everything the nccl_tests role decides, from wireup_nccl_info's one read of the node
    (``info``: cuda_home, nvcc, nccl, build {stamp, binary}, nproc), preflight's ``node`` and the
    role's variables (``settings``: Settings' fields). ``build``: whether to rebuild (the stamp of
    what the build depends on differs from the last build's, or the binary is missing)."""
    s, info, node = Settings(**settings), info or {}, node or {}
    nccl = _check_inputs(info, s)
    arch = gencode((node.get("gpu") or {}).get("compute_capabilities"))
    root = str(s.base_dir).rstrip("/")
    src, build = f"{root}/src-{s.version}", f"{root}/build"
    # The build starts from clean: the previous one goes first.
    paths = [{"path": build, "state": "absent"}, {"path": src, "state": "directory"}]
    nccl_home = nccl.get("home", "")
    if s.nccl_source == "venv":
        nccl_home, links = _wheel_home(root, nccl)
        paths += links
    # What the build depends on: a different stamp means a rebuild.
    stamp = (
        f"tag={s.version}\narch={arch['arch']}\n"
        f"nccl={s.nccl_source} {nccl.get('version', '')} {nccl.get('lib_dir', '')}\nmpi={bool(s.mpi)}\n"
    )
    last = info.get("build") or {}
    return {
        "build": last.get("stamp") != stamp or not last.get("binary"),
        "source_kind": s.source_kind,
        "source": str(s.source).rstrip("/"),
        "git_url": s.git_url,
        "commit": s.commit,
        "unarchive_opts": []
        if str(s.source).endswith(".zip")
        else [f"--strip-components={int(s.strip_components)}"],
        "src": src,
        "stamp_path": f"{build}/{BUILD_STAMP}",
        "stamp": stamp,
        "paths": paths,
        "make_argv": _make_argv(s, info, arch, build, nccl_home),
        "fact": _fact(s, arch, nccl, build),
    }


def source_problems(
    the_plan: NcclTestsPlan, git_result, makefile_exists: bool, check_mode: bool
) -> list[str]:
    """After the source was fetched: a moved tag (git) or a tree without src/Makefile ([] when fine).
    In --check nothing was fetched, so nothing is checked."""
    if check_mode:
        return []
    problems = []
    after = (git_result or {}).get("after")
    if the_plan["source_kind"] == "git" and after != the_plan["commit"]:
        problems.append(
            f"{the_plan['git_url']} tag {the_plan['fact']['version']} is commit {after}, not the pinned "
            f"nccl_tests_commit {the_plan['commit']}: the tag was moved or the mirror differs. Check the "
            f"repository; if the new commit is wanted, set nccl_tests_commit to it (group_vars/all.yml), "
            f"and remove {the_plan['src']} on the node."
        )
    if not makefile_exists:
        problems.append(
            f"{the_plan['src']}/src/Makefile is missing: nccl_tests_source is not an nccl-tests tree, or "
            f"nccl_tests_source_strip_components does not match the archive."
        )
    return problems
