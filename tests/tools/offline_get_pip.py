# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for ansible-test's downloaded get-pip script, for machines that reach PyPI but not ci-files.

ansible-test runs the script inside each new sanity venv with pip-install arguments; ensurepip
(bundled with CPython) gives the venv a pip, which then installs the exact versions asked for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ensurepip
import os
import subprocess
import sys


def main():
    # ensurepip points PIP_CONFIG_FILE at /dev/null for its own run; the real install needs the
    # machine's pip configuration (index mirrors, CA bundle) back.
    environ = dict(os.environ)
    ensurepip.bootstrap(upgrade=True)
    args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
    sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args, env=environ))


if __name__ == "__main__":
    main()
