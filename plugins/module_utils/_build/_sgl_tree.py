# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a CMake source tree (sgl-kernel's) will build and fetch, read from its files.

Pure parsers first:

* ``parse_fetchcontent(text)``: the ``FetchContent_Declare`` calls of one CMake file (name, git repository and
  tag, or URL).
* ``cmake_cache_notfound(text)``: cache entries whose value is ``<VAR>-NOTFOUND`` (a failed find_library or
  find_path cached by a failed configure).
* ``fetchcontent_var(name)``: the ``FETCHCONTENT_SOURCE_DIR_<NAME>`` variable of a FetchContent name.

Then the collectors that read files: ``scan_fetchcontent(src, offline_dir, sources)`` walks the tree's CMake
files, finds every declared name, looks for its offline copy, and walks into that copy too (nested
declarations, such as mscclpp's json, nanobind and dlpack), reporting what is missing and which copy is at another
commit than the tree pins (``pin_check``: the folder's git HEAD, else prepare_offline_sources' stamp, against
``GIT_TAG``); ``read_ninja_summary`` (the build.ninja parsers are ``_ninja_steps``').
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import re
import stat
import sys
import zlib

try:    # in the collection
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build import _source_digest as source_digest
    from ansible_collections.gpufleet.preflight.plugins.module_utils._build._ninja_steps import parse_ninja_cuda_steps, summarize_cuda_steps
except ImportError:     # loaded by path (tests, bench)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _source_digest as source_digest  # pylint: disable=import-error
    from _ninja_steps import parse_ninja_cuda_steps, summarize_cuda_steps  # pylint: disable=import-error

_COMMENT = re.compile(r"#\[(=*)\[.*?\]\1\]|#[^\n]*", re.S)
_DECLARE = re.compile(r"\bFetchContent_Declare\s*\(([^)]*)\)", re.I | re.S)
_TOKEN = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s"]+)')
_MAKE_AVAILABLE = re.compile(r"\bFetchContent_MakeAvailable\s*\(([^)]*)\)", re.I | re.S)
_ADD_SUBDIR = re.compile(r"\badd_subdirectory\s*\(\s*\"?\$\{([A-Za-z0-9_.+-]+)_SOURCE_DIR\}", re.I)
_DECLARE_KEYWORDS = ("GIT_REPOSITORY", "GIT_TAG", "URL", "URL_HASH", "SOURCE_DIR", "SOURCE_SUBDIR")

_NOTFOUND = re.compile(r"^([A-Za-z0-9_.+-]+):([A-Z]+)=(.*-NOTFOUND)\s*$", re.M)


def _strip_comments(text):
    return _COMMENT.sub("", text)


def parse_fetchcontent(text):
    """``FetchContent_Declare(name KEY value ...)`` calls -> [{name, git_repository, git_tag, url}] in order."""
    declared = []
    for match in _DECLARE.finditer(_strip_comments(text)):
        tokens = [quoted if quoted or plain is None else plain for quoted, plain in _TOKEN.findall(match.group(1))]
        tokens = [token for token in tokens if token != ""]
        if not tokens:
            continue
        entry = {"name": tokens[0], "git_repository": None, "git_tag": None, "url": None}
        for index, token in enumerate(tokens[1:-1], start=1):
            if token in _DECLARE_KEYWORDS and token.lower() in entry and entry[token.lower()] is None:
                entry[token.lower()] = tokens[index + 1]
        declared.append(entry)
    return declared


def parse_subprojects(text):
    """Names whose CMake files a configure reads: ``FetchContent_MakeAvailable(a b)`` and
    ``add_subdirectory(${a_SOURCE_DIR} ...)`` -> lower-case names. A name only given to FetchContent_Populate
    is a source tree, not a sub-project: the names it declares itself are never fetched."""
    text = _strip_comments(text)
    names = set()
    for match in _MAKE_AVAILABLE.finditer(text):
        names.update(token.lower() for token in match.group(1).split())
    names.update(name.lower() for name in _ADD_SUBDIR.findall(text))
    return names


def fetchcontent_var(name):
    """FetchContent's per-name cache variable: ``repo-cutlass`` -> ``FETCHCONTENT_SOURCE_DIR_REPO-CUTLASS``."""
    return "FETCHCONTENT_SOURCE_DIR_" + name.upper()


def cmake_cache_notfound(text):
    """CMakeCache.txt text -> {VAR: value} for every ``VAR:TYPE=...-NOTFOUND`` entry."""
    return dict((name, value) for name, _type, value in _NOTFOUND.findall(text))


# ---------------------------------------------------------------------------------------------------------------
# collectors (read files)

_CMAKE_FILE = re.compile(r"^(CMakeLists\.txt|.*\.cmake)$")
_SKIP_DIRS = frozenset((".git", "build", "node_modules", "__pycache__", "_deps"))


def _cmake_files(top):
    """CMakeLists.txt and *.cmake under ``top``, skipping VCS and build folders and test/example/doc trees that
    a configure does not read (a library's tests/examples declare their own FetchContent names)."""
    skip = _SKIP_DIRS | frozenset(("test", "tests", "examples", "example", "docs", "doc", "benchmarks", "3rdparty"))
    for root, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in skip and not d.startswith("."))
        for name in sorted(files):
            # a regular file only (or a link to one): a FIFO named x.cmake would block the read for ever
            if _CMAKE_FILE.match(name) and os.path.isfile(os.path.join(root, name)):
                yield os.path.join(root, name)


def _read(path, limit=4 * 1024 * 1024):
    """Up to ``limit`` bytes of a regular file; OSError for anything else (never blocks on a FIFO)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        return handle.read(limit).decode("utf-8", "replace")


def find_offline_dir(name, offline_dir=None, sources=None):
    """Where a FetchContent name's sources are: ``sources[name]`` (any case), else ``offline_dir/<name>``
    (exact, then lower case); None when absent. A path counts only as a non-empty directory."""
    candidates = []
    for key, value in (sources or {}).items():
        if key.lower() == name.lower() or fetchcontent_var(key) == fetchcontent_var(name):
            candidates.append(value)
    if offline_dir:
        # a folder per name, or a FETCHCONTENT_BASE_DIR a previous configure filled (<name>-src)
        candidates += [os.path.join(offline_dir, name), os.path.join(offline_dir, name.lower()),
                       os.path.join(offline_dir, name.lower() + "-src")]
    for path in candidates:
        if path and os.path.isdir(path) and os.listdir(path):
            return path
    return None


STAMP_FOLDER = ".gpufleet-sources"   # playbooks/prepare_offline_sources.yml: <offline_dir>/.gpufleet-sources/<name>.json
_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")


def _git_dir(folder):
    """The git directory of a checkout: ``.git`` itself, or where a ``.git`` file (``gitdir: ...``) points."""
    dot_git = os.path.join(folder, ".git")
    if os.path.isdir(dot_git):
        return dot_git
    try:
        text = _read(dot_git, 4096).strip()
    except (OSError, IOError):
        return None
    if text.startswith("gitdir:"):
        target = text[len("gitdir:"):].strip()
        return os.path.normpath(os.path.join(folder, target))
    return None


def _ref(git_dir, name):
    """The object a ref names, from its loose file or packed-refs (for a tag: the commit it peels to), or None."""
    try:
        value = _read(os.path.join(git_dir, name), 4096).strip()
        if _HEX.match(value):
            return value.lower()
    except (OSError, IOError):
        pass
    try:
        packed = _read(os.path.join(git_dir, "packed-refs")).splitlines()
    except (OSError, IOError):
        return None
    found = None
    for index, line in enumerate(packed):
        parts = line.split()
        if len(parts) == 2 and parts[1] == name:
            found = parts[0].lower()
            peeled = packed[index + 1] if index + 1 < len(packed) else ""
            if peeled.startswith("^"):   # an annotated tag: the commit under it
                found = peeled[1:].strip().lower()
    return found


def _tag_commit(git_dir, tag):
    """The commit tag ``tag`` names, or None when it cannot be told: packed-refs peel annotated tags (a ``^`` line);
    a loose tag's object is read (zlib) to peel it, and one packed away is left unknown rather than guessed."""
    try:
        loose = _read(os.path.join(git_dir, "refs", "tags", tag), 4096).strip().lower()
    except (OSError, IOError):
        loose = None
    if not loose:
        return _ref(git_dir, "refs/tags/" + tag)
    if not _HEX.match(loose) or len(loose) != 40:
        return None
    try:
        with open(os.path.join(git_dir, "objects", loose[:2], loose[2:]), "rb") as handle:
            body = zlib.decompressobj().decompress(handle.read(65536), 4096)
    except (OSError, IOError, zlib.error):
        return None
    if body.startswith(b"commit "):
        return loose
    found = re.search(rb"\x00object ([0-9a-f]{40})\n", body) if body.startswith(b"tag ") else None
    return found.group(1).decode("ascii") if found else None


def checkout_commit(folder):
    """``(commit, how)`` of an offline source folder: its git HEAD (``git``), else the commit recorded by
    prepare_offline_sources beside it (``stamp``), else ``(None, None)``."""
    git_dir = _git_dir(folder)
    if git_dir:
        try:
            head = _read(os.path.join(git_dir, "HEAD"), 4096).strip()
        except (OSError, IOError):
            head = ""
        commit = _ref(git_dir, head[len("ref:"):].strip()) if head.startswith("ref:") else (
            head.lower() if _HEX.match(head) else None)
        if commit:
            return commit, "git"
    stamp = stamp_of(folder)
    if stamp and isinstance(stamp.get("commit"), str) and _HEX.match(stamp["commit"]):
        return stamp["commit"].lower(), "stamp"
    return None, None


_PROJECT_VERSION = re.compile(r'^\s*version\s*=\s*["\']([^"\']+)["\']', re.M)


def tree_identity(src):
    """``{"package_version", "commit"}`` of a source tree: ``pyproject.toml``'s version (the first ``version = ".."``),
    and the git HEAD of the checkout holding it (``src`` or a folder above it; no git binary needed), each None when
    unknown. Admission keys what it learns by them (issue 35 item 9): a ref named ``main`` is many trees."""
    try:
        found = _PROJECT_VERSION.search(_read(os.path.join(src, "pyproject.toml"), 1024 * 1024))
    except (OSError, IOError):
        found = None
    folder, commit = os.path.abspath(src), None
    for _depth in range(6):
        if os.path.exists(os.path.join(folder, ".git")):
            commit, _how = checkout_commit(folder)
            break
        folder = os.path.dirname(folder)
    return {"package_version": found.group(1) if found else None, "commit": commit}


def stamp_of(folder):
    """The record prepare_offline_sources wrote for ``folder`` ({name, repo, version, commit}), or None."""
    path = os.path.join(os.path.dirname(folder.rstrip("/")), STAMP_FOLDER, os.path.basename(folder.rstrip("/")) + ".json")
    try:
        data = json.loads(_read(path, 65536))
    except (OSError, IOError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def known_trees_problem(known_trees):
    """What is wrong with a ``known_trees`` table (``{commit: tree hash, or {"tree": ...}}``), in words; None when
    nothing is."""
    for commit, value in sorted((known_trees or {}).items(), key=lambda item: str(item[0])):
        tree = value.get("tree") if isinstance(value, dict) else value
        if not _HEX.match(str(commit)) or not isinstance(tree, str) or len(tree) != 40 or not _HEX.match(tree):
            return ("%r: %r must be a commit (7 to 40 hex digits) mapping to its tree hash (40 hex digits: `git rev-parse "
                    "COMMIT^{tree}`), or to {tree: hash}" % (commit, value))
    return None


def known_tree(known_trees, git_tag):
    """The tree hash ``known_trees`` (``{commit: tree hash, or {"tree": ...}}``) gives for a commit pin (full or
    abbreviated), or None."""
    if not git_tag or not _HEX.match(git_tag):
        return None
    for commit, value in (known_trees or {}).items():
        tree = value.get("tree") if isinstance(value, dict) else value
        if isinstance(commit, str) and commit.lower().startswith(git_tag.lower()) and isinstance(tree, str) and _HEX.match(tree):
            return tree.lower()
    return None


def pin_check(git_tag, folder, known_trees=None):
    """Whether the offline copy in ``folder`` is the commit the tree pins (``GIT_TAG``): ``(verdict, found)``,
    verdict ``match``, ``mismatch`` or ``unverified`` (no pin, a pin through a variable, no commit to read and no
    known tree of the pin to compare its files with, or a tag name the folder cannot resolve); ``found`` the commit
    read (None when none). Without ``.git`` or a record, the folder's files are compared with the pinned commit's
    tree (``known_trees``, _source_digest): the same files are that commit."""
    commit, how = checkout_commit(folder)
    expected = known_tree(known_trees, git_tag) if commit is None else None
    if expected:
        verdict = source_digest.check_folder(folder, expected)[0]
        return verdict, (git_tag.lower() if verdict == "match" else None)
    if not git_tag or "${" in git_tag or commit is None:
        return "unverified", commit
    if _HEX.match(git_tag):   # a commit, full or abbreviated
        return ("match" if commit.startswith(git_tag.lower()) else "mismatch"), commit
    tagged = _tag_commit(_git_dir(folder), git_tag) if how == "git" else None
    if tagged is None and how == "stamp":
        stamp = stamp_of(folder) or {}
        if stamp.get("version") == git_tag:
            return "match", commit
    if tagged is None:
        return "unverified", commit
    return ("match" if tagged == commit else "mismatch"), commit


def scan_fetchcontent(src, offline_dir=None, sources=None, max_depth=4, known_trees=None):
    """Every FetchContent name the tree at ``src`` declares, and those its offline sources declare in turn.

    Only sub-projects (FetchContent_MakeAvailable, add_subdirectory(${<name>_SOURCE_DIR})) are walked into:
    their CMake files are what a configure reads.

    -> {"declared": [{name, declared_in, git_repository, git_tag, url, depth, source_dir, subproject}],
        "missing": [names], "cmake_args": [-DFETCHCONTENT_SOURCE_DIR_<NAME>=<dir> for those found offline],
        "errors": [...]} - ``source_dir`` is where the offline copy was found (None: missing).
    """
    declared = []
    seen = set()
    errors = []
    queue = [(src, None, 0)]
    visited = set()
    subprojects = set()
    walked = set()
    while queue:
        top, parent, depth = queue.pop(0)
        real = os.path.realpath(top)
        if real in visited:
            continue
        visited.add(real)
        try:
            files = list(_cmake_files(top))
        except OSError as exc:
            errors.append("%s: %s" % (top, exc))
            continue
        for path in files:
            try:
                text = _read(path)
            except (OSError, IOError) as exc:
                errors.append("%s: %s" % (path, exc))
                continue
            subprojects.update(parse_subprojects(text))
            for entry in parse_fetchcontent(text):
                key = entry["name"].lower()
                if key in seen:
                    continue
                seen.add(key)
                found = find_offline_dir(entry["name"], offline_dir, sources)
                verdict, commit = pin_check(entry["git_tag"], found, known_trees) if found else (None, None)
                entry.update(declared_in=os.path.relpath(path, src) if parent is None else
                             "%s: %s" % (parent, os.path.relpath(path, top)),
                             depth=depth, source_dir=found, commit=commit, pin=verdict)
                declared.append(entry)
        # only the sub-projects' CMake files are read by a configure: walk into those
        for entry in declared:
            key = entry["name"].lower()
            entry["subproject"] = key in subprojects
            if entry["subproject"] and entry["source_dir"] and depth < max_depth and key not in walked:
                walked.add(key)
                queue.append((entry["source_dir"], entry["name"], depth + 1))
    return {"declared": declared, "missing": [entry["name"] for entry in declared if entry["source_dir"] is None],
            "wrong_commit": [wrong_commit(entry) for entry in declared if entry.get("pin") == "mismatch"],
            "unverified": unverified_pins(declared),
            "cmake_args": offline_cmake_args(declared, sources), "errors": errors}


def wrong_commit(entry):
    """``name (pinned <GIT_TAG>, found <commit>)`` of an offline copy at another commit than its pin (or holding
    other files than the pinned commit's, when it was checked by its files)."""
    return "%s (pinned %s, found %s)" % (entry["name"], entry["git_tag"],
                                         (entry["commit"] or "")[:12] or "other files than that commit's")


def unverified_pins(declared):
    """``name (pinned <GIT_TAG>: <why>)`` for each offline copy whose literal pin could not be checked: no ``.git``
    and no record of prepare_offline_sources.yml to read its commit from (an export), or a tag name neither resolves
    (a pin through a variable says nothing to check)."""
    return ["%s (pinned %s: %s)" % (entry["name"], entry["git_tag"], "no .git, no prepare_offline_sources record and no "
                                    "known tree of that commit"
                                    if entry.get("commit") is None else "the tag does not resolve here")
            for entry in declared if entry.get("pin") == "unverified" and entry.get("git_tag") and "${" not in entry["git_tag"]]


def offline_cmake_args(declared, sources=None):
    """``-DFETCHCONTENT_SOURCE_DIR_<NAME>=<dir>`` for every declared name found offline and not already given
    in ``sources`` (any case) - those are passed by whoever gave them."""
    given = set(fetchcontent_var(name) for name in (sources or {}))
    return ["-D%s=%s" % (fetchcontent_var(entry["name"]), entry["source_dir"]) for entry in declared
            if entry.get("source_dir") and fetchcontent_var(entry["name"]) not in given]


def read_ninja_summary(path, keep=None):
    """build.ninja at ``path`` -> summarize_cuda_steps(...) plus ``path``."""
    summary = summarize_cuda_steps(parse_ninja_cuda_steps(_read(path, limit=512 * 1024 * 1024)), keep)
    summary["path"] = path
    return summary
