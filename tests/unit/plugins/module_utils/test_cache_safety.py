# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_build/_cache_safety.py: a compiler cache another user could write is refused (issue 28 item 8),
the rule table-driven and the look at real directories."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._build._cache_safety import (
    check_cache_directory,
    unsafe_cache_reason,
)

ME, OTHER = 1000, 1001
SAFE_ABOVE = [("/home/build", ME, 0o40755), ("/home", 0, 0o40755), ("/", 0, 0o40755)]


@pytest.mark.parametrize("cache, above, entries, words", [
    (("/c", ME, 0o40755), SAFE_ABOVE, [("/c/a", ME)], None),
    (None, SAFE_ABOVE, [], None),                                     # not made yet: the cache makes it, ours
    (("/c", OTHER, 0o40755), SAFE_ABOVE, [], "owned by uid 1001, not by the build's user (uid 1000)"),
    (("/c", ME, 0o40777), SAFE_ABOVE, [], "writable by everyone (mode 0777)"),
    (("/c", ME, 0o41777), SAFE_ABOVE, [], "writable by everyone (mode 1777)"),  # sticky does not help in the cache
    (("/c", ME, 0o40775), SAFE_ABOVE, [], "writable by its group (mode 0775)"),
    (("/c", ME, 0o40755), [("/tmp", 0, 0o41777), ("/", 0, 0o40755)], [], None),  # /tmp's sticky bit protects ours
    (("/c", ME, 0o40755), [("/shared", 0, 0o40777), ("/", 0, 0o40755)], [], "writable by everyone without the sticky bit"),
    (("/c", ME, 0o40755), [("/srv", OTHER, 0o40755), ("/", 0, 0o40755)], [], "above the cache, is owned by uid 1001"),
    (("/c", ME, 0o40755), SAFE_ABOVE, [("/c/a", ME), ("/c/b", OTHER)], "the cache holds /c/b, owned by uid 1001"),
])
def test_the_rule(cache, above, entries, words):
    why = unsafe_cache_reason(cache, above, entries, ME)
    assert (why is None) if words is None else (words in why), why


def test_real_directories(tmp_path):
    mine = tmp_path / "cache"
    mine.mkdir(mode=0o700)
    os.chmod(str(tmp_path), 0o755)
    assert check_cache_directory(str(mine), "refuse") is None
    os.chmod(str(mine), 0o777)
    with pytest.raises(ValueError, match="writable by everyone .* or set compiler_cache_dir_policy=warn"):
        check_cache_directory(str(mine), "refuse")
    assert "compiler_cache_dir_policy=warn: building with it anyway" in check_cache_directory(str(mine), "warn")
    os.chmod(str(mine), 0o700)
    assert "not by the build's user" in check_cache_directory(str(mine), "warn", euid=os.geteuid() + 1)


@pytest.mark.parametrize("entries, words", [
    ([("/c/a", ME, 0o40755), ("/c/a/b", OTHER, 0o40755)], "the cache holds /c/a/b, owned by uid 1001"),
    ([("/c/a", ME, 0o40777)], "the cache holds /c/a, writable by everyone (mode 0777)"),
    ([("/c/a", ME, 0o40755), ("/c/a/obj", ME, 0o100666)], None),  # a file's own mode: what umask gave it
])
def test_the_rule_below_the_top(entries, words):
    why = unsafe_cache_reason(("/c", ME, 0o40755), SAFE_ABOVE, entries, ME)
    assert (why is None) if words is None else (words in why), why


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_foreign_folder_one_level_down_is_refused(tmp_path):
    """ccache keeps objects in ``<cache>/a/b/``: a second-level folder of another user passed (top level only)."""
    cache = tmp_path / "cache"
    (cache / "a" / "b").mkdir(parents=True)
    for path in (tmp_path, cache, cache / "a", cache / "a" / "b"):
        os.chmod(str(path), 0o755)
    assert check_cache_directory(str(cache), "refuse") is None
    os.chown(str(cache / "a" / "b"), os.geteuid() + 4242, -1)
    with pytest.raises(ValueError, match="the cache holds .*/a/b, owned by uid"):
        check_cache_directory(str(cache), "refuse")
