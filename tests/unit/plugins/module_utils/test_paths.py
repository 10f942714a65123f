# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_paths.is_within: the one "in or under" rule (mounts, cgroup hierarchies, OOM kills in a cgroup)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._paths import is_within


@pytest.mark.parametrize("path, prefix, within", [
    ("/scratch", "/scratch", True),
    ("/scratch/build", "/scratch", True),
    ("/scratch/build/x", "/scratch/", True),
    ("/scratch/", "/scratch", True),
    ("/scratchpad", "/scratch", False),              # a substring / startswith says yes: wrong
    ("/scratchpad/x", "/scratch", False),
    ("/scratch", "/scratch/build", False),           # the parent is not within its child
    ("/anything", "/", True),
    ("/", "/", True),
    ("/a//b/./c", "/a/b", True),
    ("/a/b/../c", "/a/b", False),                    # lexically /a/c
    # cgroup paths as the kernel logs them
    ("/docker/abc/build", "/docker/abc", True),
    ("/docker/abcdef", "/docker/abc", False),
    ("/docker/ab", "/docker/abc", False),            # a substring the other way round
    ("/user.slice/user-0.slice/session-1.scope", "/user.slice", True),
    ("/user.slice-other", "/user.slice", False),
    # nothing named, or kinds that do not compare
    (None, "/", False),
    ("", "/", False),
    ("/a", None, False),
    ("/a", "", False),
    ("a/b", "/a", False),
    ("a/b", "a", True),
])
def test_is_within(path, prefix, within):
    assert is_within(path, prefix) is within
