# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write roles/sgl_kernel/files/offline-trees.json: the tree hash (submodule paths left out) of each commit an
sgl-kernel tree pins, from the upstream repositories' git directories - what an offline copy without ``.git`` is
checked against (plugins/module_utils/_build/_source_digest.py).

    python tests/tools/offline_trees.py NAME=GIT_DIR@COMMIT ...   # prints the JSON; --write writes the role's file

Where a repository has no submodules the value is git's own ``<commit>^{tree}``, which this checks."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "plugins", "module_utils", "_build"))
import _source_digest as digest  # noqa: E402 pylint: disable=wrong-import-position,import-error

OUT = os.path.join(REPO, "roles", "sgl_kernel", "files", "offline-trees.json")


def git(git_dir, *args):
    return subprocess.check_output(["git", "--git-dir", git_dir] + list(args)).decode("utf-8", "surrogateescape")


def commit_tree(git_dir, commit):
    """The commit's tree hash with its submodules' paths left out."""
    entries = []
    for line in git(git_dir, "ls-tree", "-r", "--full-tree", commit).splitlines():
        meta, path = line.split("\t", 1)
        mode, _kind, sha = meta.split()
        entries.append((path, mode, sha))
    try:
        modules = git(git_dir, "show", "%s:.gitmodules" % commit)
    except subprocess.CalledProcessError:
        modules = ""
    subs = digest.submodule_paths(modules)
    found = digest.tree_id(digest.without_submodules(entries, subs))
    if not subs:
        assert found == git(git_dir, "rev-parse", commit + "^{tree}").strip(), commit
    return found, subs


def main(argv):
    write = "--write" in argv
    trees = {}
    for spec in (a for a in argv if a != "--write"):
        name, rest = spec.split("=", 1)
        git_dir, commit = rest.rsplit("@", 1)
        found, subs = commit_tree(git_dir, commit)
        trees[commit] = dict({"name": name, "tree": found}, **({"submodules_left_out": subs} if subs else {}))
    text = json.dumps({"format": "gpufleet-offline-trees/1",
                       "about": "tree hash of each pinned commit, submodule paths left out (tests/tools/offline_trees.py)",
                       "trees": trees}, indent=2, sort_keys=True) + "\n"
    if write:
        with open(OUT, "w") as handle:
            handle.write(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
