# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The attributes the collection's plugins share, described here in full (not in
    ``ansible.builtin.action_common_attributes``): a plugin lists this fragment (and ``action`` / ``facts`` where they
    apply) and says only what is its own - its check mode."""

    # A plugin on any POSIX node; nothing of the collection diffs.
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Whether it runs under C(--check) - saying what it would change and changing nothing.
  diff_mode:
    description: Whether it returns what it changed (or would change) under C(--diff).
    support: none
  platform:
    description: The node operating systems it works on.
    support: N/A
    platforms: posix
"""

    # The same for a module that reads /proc, /sys or cgroups as Linux has them (whole: a plugin lists one of the two).
    LINUX = r"""
attributes:
  check_mode:
    description: Whether it runs under C(--check) - saying what it would change and changing nothing.
  diff_mode:
    description: Whether it returns what it changed (or would change) under C(--diff).
    support: none
  platform:
    description: The node operating systems it works on.
    support: N/A
    platforms: linux
"""

    # An action plugin that runs on the controller, once per host, never async.
    ACTION = r"""
attributes:
  action:
    description: It has an action plugin - its work runs on the controller.
    support: full
  async:
    description: Whether it runs with the C(async) keyword.
    support: none
  bypass_host_loop:
    description: Whether it runs once for every host instead of once per host.
    support: none
"""

    # Returns ansible_facts.
    FACTS = r"""
attributes:
  facts:
    description: It returns C(ansible_facts), which join the host's facts.
    support: full
"""
