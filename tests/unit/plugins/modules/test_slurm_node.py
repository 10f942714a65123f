# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node's options: a node name Slurm reads as several nodes is refused (issue 28.7)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.modules import slurm_node


def params(**given):
    base = dict(node_name="gpu1", reason_prefix="gpufleet:", reason_max_length=120, slurm_conf=None, resume=True)
    base.update(given)
    return base


@pytest.mark.parametrize("name", ["gpu[1-8]", "ALL", "gpu1,gpu2", "gpu 1"])
def test_many_nodes_refused(name):
    assert "not one Slurm node name" in slurm_node.check_options(params(node_name=name))


def test_one_node_accepted():
    assert slurm_node.check_options(params()) is None
    assert slurm_node.check_options(params(node_name="node-1.cluster_a")) is None
