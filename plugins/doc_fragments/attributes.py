# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The attributes the collection's modules share, after ``ansible.builtin.action_common_attributes`` (which
    describes them): a module lists only what is its own (its check mode and any detail)."""

    # Every module: nothing to diff.
    DOCUMENTATION = r"""
attributes:
  diff_mode:
    support: none
"""

    # Runs on any POSIX node.
    POSIX = r"""
attributes:
  platform:
    platforms: posix
"""

    # Reads /proc, /sys or cgroups as Linux has them.
    LINUX = r"""
attributes:
  platform:
    platforms: linux
"""

    # An action plugin that runs on the controller, once per host, never async.
    ACTION = r"""
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
"""

    # Returns ansible_facts.
    FACTS = r"""
attributes:
  facts:
    support: full
"""
