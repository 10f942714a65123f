# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/prepare_offline_sources.yml from real git repositories (local, at pinned commits): the stand-in's
FetchContent names, nested ones included, all found afterwards."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PROJECTS, REPO, ansible_env

sys.path.insert(0, os.path.join(REPO, "plugins", "module_utils", "_build"))
import _sgl_tree  # noqa: E402 pylint: disable=wrong-import-position,import-error

PLAYBOOK = os.path.join(REPO, "playbooks", "prepare_offline_sources.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

pytestmark = pytest.mark.skipif(not shutil.which("git"), reason="git is needed")


def git(cwd, *args):
    return subprocess.check_output(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
                                   + list(args), cwd=cwd, universal_newlines=True).strip()


def run(variables):
    argv = [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
            "-e", json.dumps(variables), PLAYBOOK]
    proc = subprocess.run(argv, env=ansible_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    return proc.returncode, proc.stdout


def test_offline_dir_from_repositories_at_pinned_commits(tmp_path):
    sources = []
    for name in ("dep-mesh", "flash-lite", "mesh-json", "mesh-bind"):
        repo = tmp_path / "upstream" / name
        shutil.copytree(os.path.join(PROJECTS, "standin_sgl_kernel_offline", name), str(repo))
        git(str(repo), "init", "-q")
        git(str(repo), "add", "-A")
        git(str(repo), "commit", "-q", "-m", "pinned")
        pinned = git(str(repo), "rev-parse", "HEAD")
        (repo / "LATER.txt").write_text("a later commit the pin must not get\n")
        git(str(repo), "add", "-A")
        git(str(repo), "commit", "-q", "-m", "later")
        sources.append({"name": name, "repo": "file://%s" % repo, "version": pinned})
    offline = tmp_path / "offline"
    rc, out = run({"offline_sources_dir": str(offline), "offline_sources": sources})
    assert rc == 0, out[-4000:]
    for source in sources:
        assert git(str(offline / source["name"]), "rev-parse", "HEAD") == source["version"]
        assert not (offline / source["name"] / "LATER.txt").exists()
    found = _sgl_tree.scan_fetchcontent(os.path.join(PROJECTS, "standin_sgl_kernel"), str(offline))
    assert found["missing"] == [] and len(found["declared"]) == 4
    rc, out = run({"offline_sources_dir": str(offline), "offline_sources": sources})
    assert rc == 0 and "CHANGED" not in out, out[-3000:]


@pytest.mark.parametrize("variables", [
    {"offline_sources_dir": "relative/dir", "offline_sources": []},
    {"offline_sources_dir": "/x", "offline_sources": [{"name": "a"}]},
    {"offline_sources_dir": "/x", "offline_sources": [{"name": "../up", "repo": "r", "version": "v"}]},
    {"offline_sources": []},
])
def test_bad_input_is_refused(variables):
    rc, out = run(variables)
    assert rc != 0 and "prepare_offline_sources: bad input" in out, out[-3000:]


def test_dir_that_is_a_file_and_hosts_matching_nothing_are_named(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    rc, out = run({"offline_sources_dir": str(target), "offline_sources": [{"name": "a", "repo": "file:///nonexistent", "version": "v"}]})
    assert rc != 0 and "offline_sources_dir %s exists and is not a directory" % target in out, out[-3000:]
    rc, out = run({"offline_sources_dir": str(tmp_path / "d"), "offline_sources": [], "offline_sources_hosts": "nosuch-group"})
    assert rc != 0 and 'offline_sources_hosts "nosuch-group" matches no host' in out, out[-3000:]


def test_a_folder_at_another_commit_than_the_pin_is_named(tmp_path):
    """Issue 29 item 7: the check counted folder names only, so a wrong commit passed. Each offline folder's commit
    (its git HEAD, else the record prepare_offline_sources writes beside it) is checked against the tree's GIT_TAG:
    a sha pin, an abbreviated one and a tag; the folder at the later commit is named, with the pin and what it holds."""
    pins, sources = {}, []
    for name in ("good-sha", "short-sha", "tagged", "wrong"):
        repo = tmp_path / "upstream" / name
        repo.mkdir(parents=True)
        (repo / "CMakeLists.txt").write_text("project(%s NONE)\n" % name)
        git(str(repo), "init", "-q")
        git(str(repo), "add", "-A")
        git(str(repo), "commit", "-q", "-m", "pinned")
        pinned = git(str(repo), "rev-parse", "HEAD")
        git(str(repo), "tag", "-a", "v1.2.0", "-m", "release")
        (repo / "LATER.txt").write_text("later\n")
        git(str(repo), "add", "-A")
        git(str(repo), "commit", "-q", "-m", "later")
        later = git(str(repo), "rev-parse", "HEAD")
        pins[name] = {"good-sha": pinned, "short-sha": pinned[:10], "tagged": "v1.2.0", "wrong": pinned}[name]
        version = {"wrong": later, "tagged": "v1.2.0"}.get(name, pinned)
        sources.append({"name": name, "repo": "file://%s" % repo, "version": version})
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "CMakeLists.txt").write_text("include(FetchContent)\n" + "".join(
        "FetchContent_Declare(%s GIT_REPOSITORY https://example.invalid/%s GIT_TAG %s)\n" % (name, name, pin)
        for name, pin in sorted(pins.items())))
    offline = tmp_path / "offline"
    rc, out = run({"offline_sources_dir": str(offline), "offline_sources": sources})
    assert rc == 0, out[-4000:]
    found = _sgl_tree.scan_fetchcontent(str(tree), str(offline))
    verdicts = dict((entry["name"], entry["pin"]) for entry in found["declared"])
    assert verdicts == {"good-sha": "match", "short-sha": "match", "tagged": "match", "wrong": "mismatch"}, found
    later = sources[-1]["version"]
    assert found["wrong_commit"] == ["wrong (pinned %s, found %s)" % (pins["wrong"], later[:12])]
    # copies without .git (rsync'ed on): the commit prepare_offline_sources recorded beside them says the same
    copied = tmp_path / "copied"
    shutil.copytree(str(offline), str(copied), ignore=shutil.ignore_patterns(".git"))
    again = _sgl_tree.scan_fetchcontent(str(tree), str(copied))
    assert dict((entry["name"], entry["pin"]) for entry in again["declared"]) == verdicts
    assert again["wrong_commit"] == found["wrong_commit"]
    # neither a .git nor a record: unverified, never a false alarm
    shutil.rmtree(str(copied / ".gpufleet-sources"))
    # a loose annotated tag (not packed): read through its tag object to the commit it tags
    loose = tmp_path / "loose"
    git(str(tmp_path), "clone", "-q", "file://%s" % (tmp_path / "upstream" / "tagged"), str(loose / "tagged"))
    git(str(loose / "tagged"), "tag", "-a", "v1.3.0", "-m", "later release")
    git(str(loose / "tagged"), "checkout", "-q", "v1.2.0")
    assert _sgl_tree.pin_check("v1.2.0", str(loose / "tagged"))[0] == "match"
    assert _sgl_tree.pin_check("v1.3.0", str(loose / "tagged"))[0] == "mismatch"
    bare = _sgl_tree.scan_fetchcontent(str(tree), str(copied))
    assert set(entry["pin"] for entry in bare["declared"]) == {"unverified"} and bare["wrong_commit"] == []
    # ... and named, so that a copy of another version is not taken for checked (issue 35 item 9)
    assert bare["unverified"] == ["%s (pinned %s: no .git, no prepare_offline_sources record and no known tree of that commit)"
                                  % (name, pins[name])
                                  for name in sorted(pins)], bare["unverified"]
    assert found["unverified"] == [] and again["unverified"] == []


def test_an_export_without_git_is_checked_by_its_files(tmp_path):
    """Issue 35 item 9: a source exported without .git (git archive, a tarball, an rsync) and not made by
    prepare_offline_sources has no commit to read; its files are. Their git tree hash (submodule paths left out, as
    an export cannot show a submodule's commit) against the pinned commit's: the export of the pin matches - with a
    submodule folder filled in -, an edited file is named as another commit's files, an unknown pin stays unverified."""
    sys.path.insert(0, os.path.join(REPO, "tests", "tools"))
    import offline_trees  # noqa: E402 pylint: disable=import-outside-toplevel,import-error
    repo = tmp_path / "upstream"
    (repo / "include" / "nested").mkdir(parents=True)
    (repo / "CMakeLists.txt").write_text("project(dep NONE)\n")
    (repo / "include" / "nested" / "dep.h").write_text("#pragma once\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    os.symlink("include/nested/dep.h", str(repo / "dep.h"))
    (repo / ".gitmodules").write_text('[submodule "third/sub"]\n\tpath = third/sub\n\turl = https://example.invalid/sub\n')
    # what mscclpp's .gitignore says (its build copies its .so files into python/), and a folder's own
    (repo / ".gitignore").write_text("build/\n*.so\n# a comment\n")
    (repo / "python" / "pkg").mkdir(parents=True)
    (repo / "python" / ".gitignore").write_text("/local.txt\n")
    (repo / "python" / "pkg" / "__init__.py").write_text("")
    git(str(repo), "init", "-q")
    git(str(repo), "add", "-A")
    git(str(repo), "update-index", "--add", "--cacheinfo", "160000,%s,third/sub" % ("ab" * 20))   # a gitlink
    git(str(repo), "commit", "-q", "-m", "pinned")
    pinned = git(str(repo), "rev-parse", "HEAD")
    tree, subs = offline_trees.commit_tree(str(repo / ".git"), pinned)
    assert subs == ["third/sub"]
    offline = tmp_path / "offline" / "dep"
    offline.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", pinned], stdout=subprocess.PIPE)
    subprocess.check_call(["tar", "-x", "-C", str(offline)], stdin=archive.stdout)
    assert archive.wait() == 0 and not (offline / ".git").exists()
    (offline / "third" / "sub").mkdir(parents=True, exist_ok=True)
    (offline / "third" / "sub" / "sub.h").write_text("// the submodule, filled in\n")
    src = tmp_path / "tree"
    src.mkdir()
    (src / "CMakeLists.txt").write_text("include(FetchContent)\nFetchContent_Declare(dep GIT_REPOSITORY x GIT_TAG %s)\n" % pinned)
    known = {pinned: {"name": "dep", "tree": tree}}

    def verdict():
        found = _sgl_tree.scan_fetchcontent(str(src), str(tmp_path / "offline"), known_trees=known)
        return found["declared"][0]["pin"], found["wrong_commit"], found["unverified"]

    assert verdict() == ("match", [], [])
    assert _sgl_tree.scan_fetchcontent(str(src), str(tmp_path / "offline"))["unverified"] == [
        "dep (pinned %s: no .git, no prepare_offline_sources record and no known tree of that commit)" % pinned]
    # a build's outputs, which git ignores, left in the folder: still the pinned commit (a rebuild was refused)
    (offline / "build").mkdir()
    (offline / "build" / "CMakeCache.txt").write_text("x\n")
    (offline / "python" / "pkg" / "_ext.cpython-311-x86_64-linux-gnu.so").write_text("built\n")
    (offline / "python" / "local.txt").write_text("local\n")
    assert verdict() == ("match", [], [])
    git(str(offline), "init", "-q")   # git itself ignores the same files there
    by_git = sorted(line[3:] for line in git(str(offline), "status", "--porcelain", "--ignored").splitlines() if line[:3] == "!! ")
    shutil.rmtree(str(offline / ".git"))
    assert by_git == ["build/", "python/local.txt", "python/pkg/_ext.cpython-311-x86_64-linux-gnu.so"], by_git
    # a file git would not ignore is another tree's
    (offline / "python" / "notes.txt").write_text("not ignored\n")
    assert verdict()[0] == "mismatch"
    (offline / "python" / "notes.txt").unlink()
    (offline / "include" / "nested" / "dep.h").write_text("#pragma once\n// another version\n")
    assert verdict() == ("mismatch", ["dep (pinned %s, found other files than that commit's)" % pinned], [])
