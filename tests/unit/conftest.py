# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every unit test folder shares: reading captured fixture files. Tests import it by its collection name
(``ansible_collections.gpufleet.preflight.tests.unit.conftest``); no test loads another test file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def fixture_reader(folder):
    """``text(name)``: the whole text of a captured file in ``folder`` (e.g. the module_utils tests' fixtures/<x>)."""
    def text(name):
        with open(os.path.join(folder, name)) as handle:
            return handle.read()
    return text
