"""A signed apt repository with the layout and package names of NVIDIA's CUDA repository.

NVIDIA's repository is unreachable from the testbed, so the integration tests build a stand-in
and point ``cuda_repo_base_url`` at it, exactly as a site would point it at an internal mirror:

    <www>/cuda/<distro>/<arch>/            flat repository (apt suite "/")
        Packages, Packages.gz, Release, InRelease, Release.gpg
        <keyid8>.pub                       the signing key, ASCII-armored (NVIDIA: 3bf863cc.pub)
        cuda-keyring_1.1-1_all.deb         the key as a keyring package, as NVIDIA ships it
        libnccl2_2.28.9-1+cuda13.0_amd64.deb, libnccl-dev_..., and a newer NCCL the pin must refuse
        cuda-toolkit-13-0_13.0.2-1_amd64.deb -> cuda-nvcc-13-0_13.0.88-1_amd64.deb
            (/usr/local/cuda-13.0/bin/nvcc printing nvcc's real --version text; /usr/local/cuda
            through update-alternatives, as cuda-toolkit-config-common does)
        driver packages of two eras (no kernel module; services that idle), see _driver_debs:
          up to 580, branch in the name: nvidia-open-580 / nvidia-driver-580-open / cuda-drivers-580
          from 590, NVIDIA's pinning packages: nvidia-driver-pinning-590 / -595 / -590.48.01
          unversioned nvidia-open, cuda-drivers, nvidia-persistenced, nvidia-fabricmanager at
          580.95.05-1, 590.48.01-1 and 595.45.04-1 (a newer branch the 590 lock must refuse)

The .deb files are real packages built with dpkg-deb; libnccl.so.2 is a real shared object
(compiled with the host's cc when there is one) whose ncclGetVersion returns the version, and
nccl.h carries NCCL_MAJOR/MINOR/PATCH. The repository is signed with a throwaway RSA key made
in a temporary GNUPGHOME. Building again with the same parameters reuses what is there.

CLI: python -m tests.testbed.fake_cuda_repo --www DIR [--distro debian12 --distro debian13] [--arch x86_64]
prints JSON: base_url_path, key_name, fingerprint, key_sha256, packages.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from email.utils import formatdate
from pathlib import Path

DEB_ARCH = {"x86_64": "amd64", "sbsa": "arm64"}
MULTIARCH = {"x86_64": "x86_64-linux-gnu", "sbsa": "aarch64-linux-gnu"}
DEFAULTS = {
    "nccl": "2.28.9-1+cuda13.0",
    # A newer NCCL in the same repository: the nccl role's pin must keep the node on the one above.
    "nccl_newer": "2.29.2-1+cuda13.0",
    "cuda": "13.0",
    "cuda_toolkit": "13.0.2-1",
    "nvcc": "13.0.88",
    "driver": "580.95.05",
    # From branch 590 (pinning packages, unversioned names), and a newer branch the lock must refuse.
    "driver_next": "590.48.01",
    "driver_newest": "595.45.04",
}
DISTROS = ("debian12", "debian13")
FORMAT = 2  # bump when the repository's content changes, so cached builds are rebuilt

NVCC_TEXT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release {cuda}, V{nvcc}
Build cuda_{cuda}.r{cuda}/compiler.36424714_0
"""

NCCL_H = """/* Stand-in nccl.h for wireup's testbed (NVIDIA's layout of the version defines). */
#ifndef NCCL_H_
#define NCCL_H_

#define NCCL_MAJOR {major}
#define NCCL_MINOR {minor}
#define NCCL_PATCH {patch}
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE {code}
#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : \\
    (X) * 10000 + (Y) * 100 + (Z))

typedef enum {{ ncclSuccess = 0 }} ncclResult_t;
ncclResult_t ncclGetVersion(int *version);

#endif
"""

NCCL_C = """typedef enum { ncclSuccess = 0 } ncclResult_t;
ncclResult_t ncclGetVersion(int *version) { *version = %d; return ncclSuccess; }
"""


class FakeRepoError(RuntimeError):
    pass


def _run(argv, **kwargs):
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        raise FakeRepoError(
            f"{' '.join(map(str, argv))} failed ({result.returncode}): {result.stderr.strip()}"
        )
    return result.stdout


def _deb(out_dir: Path, control: dict, files: dict, scripts: dict | None = None, symlinks=None) -> Path:
    """Build <Package>_<Version>_<Architecture>.deb from {path: (content, mode)}."""
    name = f"{control['Package']}_{control['Version']}_{control['Architecture']}.deb"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        (root / "DEBIAN").mkdir(parents=True)
        for path, (content, mode) in files.items():
            dest = root / path.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                dest.write_bytes(content)
            else:
                dest.write_text(content)
            dest.chmod(mode)
        for link, target in (symlinks or {}).items():
            dest = root / link.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.symlink_to(target)
        fields = dict(control)
        fields.setdefault("Maintainer", "wireup testbed <cuda@wireup.invalid>")
        fields.setdefault("Section", "multiverse/devel")
        fields.setdefault("Priority", "optional")
        fields.setdefault("Description", f"wireup testbed stand-in for {control['Package']}")
        (root / "DEBIAN" / "control").write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
        for script, text in (scripts or {}).items():
            path = root / "DEBIAN" / script
            path.write_text(text)
            path.chmod(0o755)
        _run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(out_dir / name)])
    return out_dir / name


def _shared_object(code: int, arch: str) -> bytes:
    """libnccl.so.2: a real shared object when the host can build one for this architecture."""
    cc = shutil.which("cc") or shutil.which("gcc")
    host = os.uname().machine
    if cc and host == ("x86_64" if arch == "x86_64" else "aarch64"):
        with tempfile.TemporaryDirectory() as tmp:
            src, lib = Path(tmp) / "nccl.c", Path(tmp) / "libnccl.so"
            src.write_text(NCCL_C % code)
            _run([cc, "-shared", "-fPIC", "-O2", "-Wl,-soname,libnccl.so.2", "-o", str(lib), str(src)])
            return lib.read_bytes()
    # Foreign architecture: apt and dpkg only need a file here.
    return f"wireup testbed stand-in for libnccl.so.2 (version code {code})\n".encode()


def _nccl_debs(out: Path, arch: str, package_version: str) -> list[Path]:
    version = package_version.split("-", 1)[0]
    major, minor, patch = (int(x) for x in version.split("."))
    code = major * 10000 + minor * 100 + patch
    libdir = f"/usr/lib/{MULTIARCH[arch]}"
    deb_arch = DEB_ARCH[arch]
    lib = _deb(
        out,
        {"Package": "libnccl2", "Version": package_version, "Architecture": deb_arch,
         "Provides": f"libnccl.so.2 (= {version})", "Section": "libs"},
        {f"{libdir}/libnccl.so.{version}": (_shared_object(code, arch), 0o644)},
        symlinks={f"{libdir}/libnccl.so.2": f"libnccl.so.{version}"},
    )  # fmt: skip
    dev = _deb(
        out,
        {"Package": "libnccl-dev", "Version": package_version, "Architecture": deb_arch,
         "Depends": f"libnccl2 (= {package_version})", "Section": "libdevel"},
        {"/usr/include/nccl.h": (NCCL_H.format(major=major, minor=minor, patch=patch, code=code), 0o644)},
        symlinks={f"{libdir}/libnccl.so": "libnccl.so.2"},
    )  # fmt: skip
    return [lib, dev]


def _cuda_debs(out: Path, arch: str, cuda: str, toolkit: str, nvcc: str) -> list[Path]:
    dashed = cuda.replace(".", "-")
    home = f"/usr/local/cuda-{cuda}"
    priority = int(cuda.replace(".", ""))
    nvcc_script = "#!/bin/sh\ncat <<'EOF'\n" + NVCC_TEXT.format(cuda=cuda, nvcc=nvcc) + "EOF\n"
    version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": toolkit.split("-", 1)[0]}})
    prerm = f"#!/bin/sh\nset -e\nupdate-alternatives --remove cuda {home}\n"
    postinst = f"#!/bin/sh\nset -e\nupdate-alternatives --install /usr/local/cuda cuda {home} {priority}\n"
    nvcc_deb = _deb(
        out,
        {"Package": f"cuda-nvcc-{dashed}", "Version": f"{nvcc}-1", "Architecture": DEB_ARCH[arch]},
        {f"{home}/bin/nvcc": (nvcc_script, 0o755), f"{home}/version.json": (version_json, 0o644)},
        scripts={"postinst": postinst, "prerm": prerm},
    )  # fmt: skip
    meta = _deb(
        out,
        {"Package": f"cuda-toolkit-{dashed}", "Version": toolkit, "Architecture": DEB_ARCH[arch],
         "Depends": f"cuda-nvcc-{dashed} (>= {nvcc})", "Section": "multiverse/metapackages"},
        {f"/usr/share/doc/cuda-toolkit-{dashed}/README": (f"CUDA {cuda} toolkit (wireup stand-in)\n", 0o644)},
    )  # fmt: skip
    return [nvcc_deb, meta]


def _driver_debs(out: Path, arch: str, *versions: str) -> list[Path]:
    """Driver packages of both eras, with the names, versions, Depends and Provides NVIDIA's packages
    declare as far as public sources show them (roles/nvidia_driver/README.md), and the two services
    the driver role manages. No kernel module: testbed nodes have no GPU; the packages exist so apt,
    pins, pinning packages, holds and branch switches run for real.

    - Per version V (branch B): nvidia-persistenced, nvidia-fabricmanager (Provides
      nvidia-fabricmanager-B, as NVIDIA's repository does from 580), the unversioned metapackages
      nvidia-open and cuda-drivers (Depends: nvidia-persistenced (= V-1)).
    - Branches up to 580 also get the branch-named metapackages nvidia-open-B (Debian),
      nvidia-driver-B-open (Ubuntu) and cuda-drivers-B.
    - Branches from 590 get NVIDIA's pinning package nvidia-driver-pinning-B (version "B-1"; Ubuntu's
      are "610-2ubuntu1" and the like) and the first such version its per-version variant
      nvidia-driver-pinning-V. Its content, an apt preferences file locking the driver packages to
      the branch (or version), is the stand-in's: the public sources do not show NVIDIA's file.
    From public sources: the names, the versions' form, the pinning packages' versions, Fabric
    Manager's Provides. The stand-in's own simplification: a metapackage depends on
    nvidia-persistenced of its version only (NVIDIA's pull in the DKMS module and the libraries,
    whose control fields the public sources do not show).
    """
    deb_arch = DEB_ARCH[arch]
    idle = (
        "#!/bin/sh\n# wireup testbed stand-in: idles as the daemon would without GPUs\nexec sleep infinity\n"
    )

    def unit(desc, exe):
        return (
            f"[Unit]\nDescription={desc}\n\n[Service]\nExecStart={exe}\n\n"
            "[Install]\nWantedBy=multi-user.target\n"
        )

    def meta(name, deb_version, version):
        return _deb(
            out,
            {"Package": name, "Version": deb_version, "Architecture": deb_arch,
             "Depends": f"nvidia-persistenced (= {deb_version})", "Section": "multiverse/metapackages"},
            {f"/usr/share/doc/{name}/README": (f"NVIDIA driver {version} (wireup stand-in)\n", 0o644)},
        )  # fmt: skip

    def pinning(name, version_glob):
        pref = (
            f"# {name} (wireup testbed stand-in): locks the NVIDIA driver packages to {version_glob}\n"
            "Package: nvidia-* libnvidia-* cuda-drivers* xserver-xorg-video-nvidia* libxnvctrl*\n"
            f"Pin: version {version_glob}\nPin-Priority: 1000\n"
        )
        return _deb(
            out,
            {"Package": name, "Version": name.rsplit("-", 1)[1].split(".")[0] + "-1", "Architecture": "all",
             "Section": "multiverse/metapackages"},
            {f"/etc/apt/preferences.d/{name}": (pref, 0o644)},
        )  # fmt: skip

    debs, pinned = [], set()
    for version in versions:
        branch = version.split(".", 1)[0]
        deb_version = f"{version}-1"
        debs += [
            _deb(
                out,
                {"Package": "nvidia-persistenced", "Version": deb_version, "Architecture": deb_arch},
                {"/usr/bin/nvidia-persistenced": (idle, 0o755),
                 "/usr/lib/systemd/system/nvidia-persistenced.service":
                     (unit("NVIDIA Persistence Daemon", "/usr/bin/nvidia-persistenced"), 0o644)},
            ),
            _deb(
                out,
                {"Package": "nvidia-fabricmanager", "Version": deb_version, "Architecture": deb_arch,
                 "Provides": f"nvidia-fabricmanager-{branch} (= {deb_version})"},
                {"/usr/bin/nv-fabricmanager": (idle, 0o755),
                 "/usr/lib/systemd/system/nvidia-fabricmanager.service":
                     (unit("NVIDIA fabric manager service", "/usr/bin/nv-fabricmanager"), 0o644)},
            ),
            meta("nvidia-open", deb_version, version),
            meta("cuda-drivers", deb_version, version),
        ]  # fmt: skip
        if int(branch) < 590:
            for name in (f"nvidia-open-{branch}", f"nvidia-driver-{branch}-open", f"cuda-drivers-{branch}"):
                debs.append(meta(name, deb_version, version))
        elif branch not in pinned:
            pinned.add(branch)
            debs.append(pinning(f"nvidia-driver-pinning-{branch}", f"{branch}.*"))
            debs.append(pinning(f"nvidia-driver-pinning-{version}", f"{version}-*"))
    return debs


def _gpg(home: Path, *args, **kwargs):
    return _run(["gpg", "--batch", "--quiet", "--homedir", str(home), *args], **kwargs)


def _index(repo: Path, debs: list[Path]) -> None:
    stanzas = []
    for deb in sorted(debs):
        control = _run(["dpkg-deb", "--field", str(deb)]).rstrip("\n")
        data = deb.read_bytes()
        stanzas.append(
            f"{control}\nFilename: ./{deb.name}\nSize: {len(data)}\n"
            f"MD5sum: {hashlib.md5(data).hexdigest()}\n"  # apt's index format
            f"SHA1: {hashlib.sha1(data).hexdigest()}\n"
            f"SHA256: {hashlib.sha256(data).hexdigest()}\n"
        )
    packages = "\n".join(stanzas).encode()
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))


def _release(repo: Path, arch: str) -> str:
    lines = [
        "Origin: NVIDIA",
        "Label: NVIDIA CUDA",
        f"Architecture: {arch}",
        f"Date: {formatdate(usegmt=True)}",
    ]
    for field, algo in (("MD5Sum", hashlib.md5), ("SHA1", hashlib.sha1), ("SHA256", hashlib.sha256)):
        lines.append(f"{field}:")
        for name in ("Packages", "Packages.gz"):
            data = (repo / name).read_bytes()
            lines.append(f" {algo(data).hexdigest()} {len(data):>16} {name}")
    return "\n".join(lines) + "\n"


def build(www_dir, distros=DISTROS, arches=("x86_64",), force=False, **versions) -> dict:
    """Write <www_dir>/cuda/<distro>/<arch>/ for each pair; return what the tests need."""
    opts = {**DEFAULTS, **versions}
    root = Path(www_dir) / "cuda"
    meta_file = root / "wireup-fake-repo.json"
    wanted = {"format": FORMAT, "distros": sorted(distros), "arches": sorted(arches), "versions": opts}
    if meta_file.exists() and not force:
        meta = json.loads(meta_file.read_text())
        if {k: meta.get(k) for k in wanted} == wanted:
            return meta
    for tool in ("gpg", "dpkg-deb"):
        if not shutil.which(tool):
            raise FakeRepoError(
                f"{tool} is needed to build the fake CUDA repository: apt-get install gnupg dpkg"
            )
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as gnupg:
        home = Path(gnupg)
        home.chmod(0o700)
        _gpg(home, "--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
             "wireup testbed CUDA repository <cuda@wireup.invalid>", "rsa3072", "sign", "never")  # fmt: skip
        colons = _gpg(home, "--with-colons", "--fingerprint")
        fingerprint = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
        key_name = f"{fingerprint[-8:].lower()}.pub"
        armored = _gpg(home, "--armor", "--export", fingerprint)
        binary = subprocess.run(
            ["gpg", "--batch", "--homedir", str(home), "--export", fingerprint],
            capture_output=True,
            check=True,
        ).stdout
        for distro in distros:
            for arch in arches:
                repo = root / distro / arch
                repo.mkdir(parents=True)
                (repo / key_name).write_text(armored)
                debs = [
                    _deb(
                        repo,
                        {"Package": "cuda-keyring", "Version": "1.1-1", "Architecture": "all"},
                        {"/usr/share/keyrings/cuda-archive-keyring.gpg": (binary, 0o644)},
                    ),
                    *_nccl_debs(repo, arch, opts["nccl"]),
                    *_nccl_debs(repo, arch, opts["nccl_newer"]),
                    *_cuda_debs(repo, arch, opts["cuda"], opts["cuda_toolkit"], opts["nvcc"]),
                    *_driver_debs(repo, arch, opts["driver"], opts["driver_next"], opts["driver_newest"]),
                ]
                _index(repo, debs)
                release = _release(repo, arch)
                (repo / "Release").write_text(release)
                _gpg(home, "--local-user", fingerprint, "--armor", "--detach-sign",
                     "--output", str(repo / "Release.gpg"), str(repo / "Release"))  # fmt: skip
                _gpg(home, "--local-user", fingerprint, "--clearsign",
                     "--output", str(repo / "InRelease"), str(repo / "Release"))  # fmt: skip
    meta = {
        **wanted,
        "base_url_path": "cuda",
        "key_name": key_name,
        "fingerprint": fingerprint,
        "key_sha256": hashlib.sha256(armored.encode()).hexdigest(),
        "packages": sorted(p.name for p in (root / distros[0] / arches[0]).glob("*.deb")),
    }
    meta_file.write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--www", required=True, help="the testbed's www dir (testbed_www_dir)")
    parser.add_argument("--distro", action="append", help="debian12 and debian13 (default), ubuntu2204, ...")
    parser.add_argument("--arch", action="append", help="x86_64 (default) or sbsa")
    parser.add_argument("--force", action="store_true", help="rebuild even if an identical build exists")
    args = parser.parse_args(argv)
    try:
        meta = build(args.www, tuple(args.distro or DISTROS), tuple(args.arch or ["x86_64"]), args.force)
    except FakeRepoError as exc:
        print(f"fake_cuda_repo: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(meta, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
