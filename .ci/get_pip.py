"""Stand-in for pip's get-pip.py, for ansible-test's sanity venvs.

ansible-test makes each sanity test's virtual environment without pip, then runs get-pip.py, which
it downloads from ci-files.testing.ansible.com; that host is not reachable here or in CI (only the
package registries are). ansible-test uses a copy at ~/.ansible/test/cache/get_pip_<version>.py
instead when there is one (its own error message says so): `make sanity` puts this file there. It
does what get-pip.py does with ansible-test's arguments: puts a pip into the venv (ensurepip's, the
one bundled with Python), then has it install what was asked (ansible-test's pinned pip, from PyPI).
"""

import subprocess
import sys

# get-pip.py's own options; the rest are pip install's.
OWN = {"--no-setuptools", "--no-wheel"}

subprocess.run([sys.executable, "-m", "ensurepip", "--upgrade"], check=True, stdout=subprocess.DEVNULL)
asked = [arg for arg in sys.argv[1:] if arg not in OWN]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", "--quiet", *asked]))
