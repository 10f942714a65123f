# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node's options: a node name Slurm reads as several nodes is refused (issue 28.7)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.modules import slurm_node


def params(**given):
    base = dict(node_name="gpu1", reason_prefix="gpufleet:", reason_max_length=120, slurm_conf=None, resume=True,
                drain_cap_nodes=20, drain_cap_percent=25, drain_cap_window=3600)
    base.update(given)
    return base


@pytest.mark.parametrize("name", ["gpu[1-8]", "ALL", "gpu1,gpu2", "gpu 1"])
def test_many_nodes_refused(name):
    assert "not one Slurm node name" in slurm_node.check_options(params(node_name=name))


def test_one_node_accepted():
    assert slurm_node.check_options(params()) is None
    assert slurm_node.check_options(params(node_name="node-1.cluster_a")) is None


# option, given, converted (or None when refused), words of the error
DRAIN_CAP = [
    ("drain_cap_nodes", None, None, None),            # null: no count limit
    ("drain_cap_nodes", "3", 3, None),                 # a template's string
    ("drain_cap_nodes", 0, 0, None),                   # never drain
    ("drain_cap_nodes", -1, None, "whole number 0 to"),
    ("drain_cap_nodes", "many", None, "whole number"),
    ("drain_cap_nodes", True, None, "whole number"),
    ("drain_cap_percent", "12.5", 12.5, None),
    ("drain_cap_percent", None, None, None),
    ("drain_cap_percent", 101, None, "a number 0 to 100"),
    ("drain_cap_percent", float("nan"), None, "a number"),
    ("drain_cap_window", 0, 0, None),
    ("drain_cap_window", 10 ** 9, None, "whole number"),
]


@pytest.mark.parametrize("name, given, converted, words", DRAIN_CAP)
def test_drain_cap_options(name, given, converted, words):
    options = params(**{name: given})
    error = slurm_node.check_options(options)
    if words is None:
        assert error is None and options[name] == converted
    else:
        assert error.startswith(name + ": ") and words in error
