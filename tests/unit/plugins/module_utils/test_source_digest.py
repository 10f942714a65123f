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


def rules_of(**files):
    """The rules of .gitignore files given as ``folder=text`` (``top`` for the top folder), the top's first."""
    return [rule for base in sorted(files, key=lambda name: name != "top")
            for rule in digest.ignore_rules(files[base], "" if base == "top" else base.replace("__", "/"))]


@pytest.mark.parametrize("path, is_dir, files, expected", [
    # mscclpp's own: its build leaves .so files in python/ and a build/ folder
    ("python/mscclpp/_mscclpp.cpython-311-x86_64-linux-gnu.so", False, {"top": "build/\n*.so\n"}, True),
    ("build", True, {"top": "build/\n*.so\n"}, True),
    ("build", False, {"top": "build/\n"}, False),                        # a trailing / matches folders only
    ("src/build", True, {"top": "build/\n"}, True),                      # no other /: a name at any depth
    ("src/build", True, {"top": "/build/\n"}, False),                    # a leading /: at the .gitignore's folder only
    ("docs/_static/versions.js", False, {"top": "docs/_static/versions.js\n"}, True),
    ("a/docs/_static/versions.js", False, {"top": "docs/_static/versions.js\n"}, False),   # a / inside: anchored
    ("keep.so", False, {"top": "*.so\n!keep.so\n"}, False),             # the last rule that matches decides
    ("x/.a.swp", False, {"top": ".*.swp\n"}, True),
    ("a/b/c/d.o", False, {"top": "a/**/*.o\n"}, True),                   # ** crosses folders
    ("a/d.o", False, {"top": "a/**/*.o\n"}, True),
    ("a/b/d.o", False, {"top": "a/*.o\n"}, False),                       # * does not
    ("python/local.txt", False, {"python": "/local.txt\n"}, True),       # a folder's own .gitignore
    ("local.txt", False, {"python": "/local.txt\n"}, False),
    ("#notes", False, {"top": "# a comment\n\\#notes\n"}, True),
    ("lib1.a", False, {"top": "lib[0-9].a\n"}, True),
    ("libx.a", False, {"top": "lib[!x].a\n"}, False),
])
def test_what_git_ignores(path, is_dir, files, expected):
    assert digest.ignored(path, is_dir, rules_of(**files)) is expected


def test_a_tracked_file_an_ignore_matches_is_still_the_commits(tmp_path):
    """An export holds what was tracked, ``git add -f`` included: the files as they are are compared first; a build's
    ignored output beside them is left out only when they are not the commit's."""
    (tmp_path / ".gitignore").write_text("*.so\n")
    (tmp_path / "prebuilt.so").write_text("tracked with -f\n")
    expected = digest.tree_id(digest.folder_entries(str(tmp_path)))
    assert digest.check_folder(str(tmp_path), expected) == ("match", None)
    clean = digest.tree_id([entry for entry in digest.folder_entries(str(tmp_path)) if entry[0] != "prebuilt.so"])
    assert digest.check_folder(str(tmp_path), clean) == ("match", None)        # the .so as a build's output
    (tmp_path / "notes.txt").write_text("not ignored\n")
    assert digest.check_folder(str(tmp_path), clean) == ("mismatch", None)
