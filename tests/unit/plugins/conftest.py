# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the plugin tests share: what a fresh interpreter loads when it imports one plugin, and which module_utils
are the node's collectors (the controller and the checks must load none of them). test_plugin_rules.py and
module_utils/test_check_registry.py import these by their collection name; no test loads another test file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys

COLLECTORS = {"_node_facts", "_memory", "_cgroupfs", "_confinement", "_kernel_events", "_toolchain", "_gpus",
              "_disks", "_cpus", "_processes", "_cuda_libraries", "_mountinfo"}


def loaded_module_utils(module):
    """The collection's module_utils a fresh interpreter has loaded after importing ``module`` (under plugins)."""
    code = ("import sys\n"
            "import ansible_collections.gpufleet.preflight.plugins.%s\n"
            "print(' '.join(sorted(m.rsplit('.', 1)[-1] for m in sys.modules if '.module_utils._' in m)))\n" % module)
    return set(subprocess.check_output([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                                       universal_newlines=True).split())
