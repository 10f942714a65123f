# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""_source_digest: git's ids of blobs and trees, computed without git (checked against git itself, with real
exports, in tests/build/test_offline_sources.py; against upstream cutlass, fmt and mscclpp by tests/tools/offline_trees.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _source_digest as digest
from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _sgl_tree

SHIPPED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "roles", "sgl_kernel", "files",
                       "offline-trees.json")


def test_git_ids_of_known_objects():
    assert digest.blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"   # git hash-object
    assert digest.tree_id([]) == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"           # git's empty tree


def test_a_folder_sorts_as_if_its_name_ended_in_a_slash():
    """git orders ``a.c`` (0x2e) before the folder ``a`` (``a/``, 0x2f) and ``a0`` after it: the same entries in
    any order give one id, and a file named like a folder gives another."""
    blob = digest.blob_id(b"x")
    entries = [("a.c", "100644", blob), ("a/b", "100644", blob), ("a0", "100644", blob)]
    assert digest.tree_id(entries) == digest.tree_id(list(reversed(entries)))
    assert digest.tree_id(entries) != digest.tree_id([("a.c", "100644", blob), ("a", "100644", blob), ("a0", "100644", blob)])


@pytest.mark.parametrize("text, paths", [
    ('[submodule "x"]\n\tpath = 3rdparty/cutlass\n\turl = u\n[submodule "y"]\n  path=third/fmt/\n', ["3rdparty/cutlass", "third/fmt"]),
    ("", []),
    (None, []),
])
def test_submodule_paths(text, paths):
    assert digest.submodule_paths(text) == paths


def test_what_is_under_a_submodule_is_left_out():
    blob = digest.blob_id(b"x")
    entries = [("sub", "160000", "ab" * 20), ("sub/a.h", "100644", blob), ("subway.h", "100644", blob)]
    assert digest.without_submodules(entries, ["sub"]) == [("subway.h", "100644", blob)]


def test_the_shipped_trees_are_well_formed():
    with open(SHIPPED) as handle:
        shipped = json.load(handle)
    assert shipped["format"] == "gpufleet-offline-trees/1" and len(shipped["trees"]) >= 5
    assert all(len(commit) == 40 and len(entry["tree"]) == 40 for commit, entry in shipped["trees"].items())


@pytest.mark.parametrize("table, words", [
    ({}, None),
    ({"abc1234": "0123456789abcdef0123456789abcdef01234567"}, None),
    ({"abc1234": {"tree": "0123456789abcdef0123456789abcdef01234567"}}, None),
    ({"xyz": "0123456789abcdef0123456789abcdef01234567"}, "'xyz'"),
    ({"abc1234": "0123"}, "tree hash (40 hex digits"),
    ({"abc1234": {"tree": 5}}, "or to {tree: hash}"),
])
def test_known_trees_problem(table, words):
    """The user's sgl_kernel_known_trees, checked before the tree is looked at: the entry at fault, in words."""
    problem = _sgl_tree.known_trees_problem(table)
    assert (problem is None) if words is None else (words in problem), problem
