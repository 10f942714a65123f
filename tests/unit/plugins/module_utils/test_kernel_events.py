# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kernel_events: kmsg / dmesg / journal parsers and OOM + Xid extraction on captured logs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _kernel_events as ke
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout
from ansible_collections.gpufleet.preflight.tests.unit.conftest import fixture_reader

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "kernel_events")

text = fixture_reader(FIXTURES)


def test_kmsg_memcg_oom_captured_on_6_18():
    """A real OOM kill (64 MiB v1 memcg, python allocating 512 MiB) as /dev/kmsg printed it."""
    entries = ke.parse_kmsg(text("kmsg-memcg-oom-6.18.txt"), boot_epoch=1000000.0)
    assert entries[0] == (1000000.0 + 1.324448, "random: crng reseeded due to virtual machine fork")
    kills, xids = ke.find_events(entries, now=1000000.0 + 500)
    assert xids == []
    assert len(kills) == 1
    kill = kills[0]
    assert (kill["pid"], kill["process"], kill["global"], kill["constraint"]) == (9188, "python3", False, "CONSTRAINT_MEMCG")
    assert kill["cgroup"].endswith("/gpufleet-oomtest-manual")
    assert kill["time"] == pytest.approx(1000000.0 + 467.949671)
    assert kill["age_seconds"] == pytest.approx(500 - 467.949671, abs=0.001)


def test_global_oom_with_oom_kill_line():
    entries = ke.parse_dmesg(text("dmesg-iso-global-oom-5.15.txt"))
    kills, xids = ke.find_events(entries, now=entries[-1][0] + 60)
    assert len(kills) == 1
    assert kills[0]["global"] is True and kills[0]["constraint"] == "CONSTRAINT_NONE"
    assert (kills[0]["pid"], kills[0]["process"]) == (412911, "cicc")
    assert kills[0]["cgroup"] == "/user.slice/user-1000.slice/session-7.scope"
    # 2026-11-29T10:02:11.486801 UTC
    assert kills[0]["time"] == pytest.approx(1795946531.486801)
    assert [(x["code"], x["fatal"], x["pci"]) for x in xids] == [(13, False, "0000:43:00")]


def test_pre_5_1_kill_process_lines():
    entries = ke.parse_dmesg(text("dmesg-raw-old-oom-4.14.txt"), boot_epoch=0.0)
    kills, _xids = ke.find_events(entries, now=10000.0)
    assert [(k["pid"], k["process"], k["global"], k["cgroup"]) for k in kills] == [
        (4425, "python3", False, "/docker/3f1c2a9be0d4"),
        (2171, "ptxas", True, None),
    ]
    assert kills[0]["time"] == pytest.approx(8123.551745)


def test_xids_from_journal():
    entries = ke.parse_journal(text("journal-xid-short-unix.txt"))
    kills, xids = ke.find_events(entries, now=1764417800.0)
    assert [(x["code"], x["fatal"]) for x in xids] == [(79, True), (119, True), (31, False), (48, True)]
    assert xids[0]["pci"] == "0000:3b:00" and xids[0]["message"].endswith("GPU has fallen off the bus.")
    assert xids[0]["time"] == pytest.approx(1764410400.118233)
    assert [(k["pid"], k["process"]) for k in kills] == [(88, "ninja")]


@pytest.mark.parametrize("window, codes", [(100000, [79, 119, 31, 48]), (3600, [31, 48]), (100, [])])
def test_window_filters_by_age(window, codes):
    _kills, xids = ke.find_events(ke.parse_journal(text("journal-xid-short-unix.txt")), now=1764417800.0)
    assert [x["code"] for x in ke.within_window(xids, window)] == codes


@pytest.mark.parametrize("line, expected", [
    ("2026-11-29T14:39:05,324448+00:00 hello", (1795963145.324448, "hello")),
    ("2026-11-29T15:39:05,324448+01:00 hello", (1795963145.324448, "hello")),
    ("[  467.949671] hello", (1467.949671, "hello")),
])
def test_parse_dmesg_lines(line, expected):
    (when, message), = ke.parse_dmesg(line, boot_epoch=1000.0)
    assert when == pytest.approx(expected[0]) and message == expected[1]


def test_kmsg_escapes_and_continuations():
    entries = ke.parse_kmsg("6,1,2000000,-;a\\x09b\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n", boot_epoch=10.0)
    assert entries == [(12.0, "a\tb")]


def test_collect_from_a_fixture_tree_kmsg(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "proc").mkdir()
    (tmp_path / "dev" / "kmsg").write_text(text("kmsg-memcg-oom-6.18.txt"))
    (tmp_path / "proc" / "uptime").write_text(u"500.00 900.00\n")
    facts = ke.collect_kernel_events(3600, run_with_timeout, root=str(tmp_path), now=2000000.0, sources=("kmsg",))
    assert facts["source"] == "kmsg" and facts["readable"] is True
    assert [k["pid"] for k in facts["oom_kills"]] == [9188]
    assert facts["oom_kills"][0]["age_seconds"] == pytest.approx(500 - 467.949671, abs=0.001)
    short = ke.collect_kernel_events(10, run_with_timeout, root=str(tmp_path), now=2000000.0, sources=("kmsg",))
    assert short["oom_kills"] == [] and short["window_seconds"] == 10


def test_nothing_readable_says_why(tmp_path):
    def run(argv, timeout):
        return 1, "", "dmesg: read kernel buffer failed: Operation not permitted"
    facts = ke.collect_kernel_events(60, run, root=str(tmp_path), sources=("kmsg", "dmesg"))
    assert facts["readable"] is False and facts["source"] is None
    assert "dev/kmsg: No such file or directory" in facts["message"]
    assert "Operation not permitted" in facts["message"]


def test_journal_without_files_is_not_readable():
    def run(argv, timeout):
        return 0, "-- No entries --\n", "No journal files were found.\n"
    facts = ke.collect_kernel_events(60, run, sources=("journal",))
    assert facts["readable"] is False and "no journal files" in facts["message"]


def test_rate_limited_kills_of_a_burst_take_the_burst_header():
    """A real burst (guarded build, jobs=8 in 400 MiB, kernel 6.18): the kernel logged the oom-kill: header for
    the first kill only, then five bare "Killed process" lines within 0.3 s (oom_rs ratelimit), then a new
    header 2.4 s later. The bare ones belong to the first header's cgroup, marked as inferred."""
    entries = ke.parse_dmesg(text("dmesg-iso-memcg-oom-burst-ratelimited-6.18.txt"))
    kills, _xids = ke.find_events(entries, now=entries[-1][0] + 60)
    build = "/process_api/f8487025c8a2cd97893377959d022443/gpufleet-build-oomtest-91123f7f"
    assert [(k["pid"], k["cgroup_inferred"]) for k in kills] == [
        (19080, False), (19079, True), (19086, True), (19090, True), (19087, True), (19088, True), (19114, False)]
    assert all(k["oom_cgroup"] == build and k["cgroup"] == build and k["global"] is False for k in kills)
    assert all(k["constraint"] == "CONSTRAINT_MEMCG" for k in kills)


@pytest.mark.parametrize("header_age, scope, inferred", [
    (1.0, "Memory cgroup out of memory", True),
    (5.0, "Memory cgroup out of memory", True),
    (5.5, "Memory cgroup out of memory", False),   # after the ratelimit interval: another burst's
    (1.0, "Out of memory", False),                 # a global kill is never a memcg burst's
])
def test_bare_kill_is_attributed_only_within_the_ratelimit_interval(header_age, scope, inferred):
    header = ("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/b/x,"
              "task_memcg=/b/x,task=cc1plus,pid=10,uid=0")
    entries = [(100.0, header), (100.0, "Memory cgroup out of memory: Killed process 10 (cc1plus) total-vm:1kB"),
               (100.0 + header_age, "%s: Killed process 11 (cc1plus) total-vm:1kB" % scope)]
    kills, _xids = ke.find_events(entries, now=200.0)
    bare = kills[1]
    assert bare["cgroup_inferred"] is inferred
    assert bare["cgroup"] == ("/b/x" if inferred else None)
    assert bare["global"] is (scope == "Out of memory")


@pytest.mark.parametrize("memcg, cgroup_path, inside", [
    ("/process_api/node1/gpufleet-build-x", "/process_api/node1/gpufleet-build-x", True),
    ("/process_api/node1/gpufleet-build-x/sub", "/process_api/node1/gpufleet-build-x", True),
    ("/process_api/node1", "/process_api/node1/gpufleet-build-x", False),         # a parent is not inside
    ("/docker/abcdef", "/docker/abc", False),                                     # a longer name is another cgroup
    ("/docker/abcdef/build", "/docker/abc", False),
    ("/docker/abc/build", "/build", True),       # seen through a cgroup namespace: the top part is missing
    ("/docker/abc/build/x", "/build", True),
    ("/docker/abc/builder", "/build", False),
    ("/a/b", "/", True),                          # the root holds every cgroup
    ("/a//b/", "/a/b", True),
    (None, "/a", False),
    ("", "/a", False),
    ("/a", "", False),
    ("/a", None, False),
])
def test_in_or_under(memcg, cgroup_path, inside):
    assert ke._in_or_under(memcg, cgroup_path) is inside


# -- whose line it is: the kernel's own records, the event at the start of its message (issue 36 finding 5) ---------
XID_79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
APPARMOR = ('audit: type=1400 audit(1764410400.1:42): apparmor="DENIED" operation="open" profile="x" '
            'name="/tmp/NVRM: Xid (PCI:0000:3b:00): 79, Killed process 1 (init) total-vm" pid=77 comm="cat"')


def test_kmsg_record_a_process_wrote_is_not_the_kernels():
    """``echo '<12>NVRM: Xid ...' > /dev/kmsg`` is stored with the user facility (prio 12 = user.warning); the
    driver's own line has facility 0 (prio 0-7). Only the latter is an Xid."""
    text_ = "12,500,1000000,-;%s\n14,501,1000001,-;Killed process 1 (init) total-vm:1kB\n4,502,2000000,-;%s\n" % (
        XID_79, XID_79)
    entries = ke.parse_kmsg(text_, boot_epoch=0.0)
    assert entries == [(2.0, XID_79)]
    kills, xids = ke.find_events(entries, now=10.0)
    assert kills == [] and [x["code"] for x in xids] == [79]


@pytest.mark.parametrize("message", [
    APPARMOR,
    "usb 1-1: product: NVRM: Xid (PCI:0000:3b:00): 79, x",
    "  " + "x" + XID_79,
])
def test_xid_words_inside_another_kernel_line_are_no_xid(message):
    kills, xids = ke.find_events([(1.0, message)], now=2.0)
    assert xids == [] and kills == []


def test_xid_after_a_printk_caller_tag_is_read():
    _kills, xids = ke.find_events([(1.0, "[T1234] " + XID_79)], now=2.0)
    assert [x["code"] for x in xids] == [79]


def test_dmesg_and_journal_are_asked_for_the_kernel_facility_only():
    """``dmesg`` lists what processes wrote to /dev/kmsg too, and so does ``journalctl -k`` (_TRANSPORT=kernel is
    every /dev/kmsg record): both are asked for facility 0, as /dev/kmsg is read."""
    asked = []

    def run(argv, timeout):
        asked.append(list(argv))
        return 0, "", ""
    ke.collect_kernel_events(60, run, sources=("dmesg",))
    ke.collect_kernel_events(60, run, sources=("journal",))
    assert "--kernel" in asked[0]
    assert asked[1][:2] == ["journalctl", "-k"] and "SYSLOG_FACILITY=0" in asked[1]


def test_dmesg_stamp_that_is_no_date_keeps_the_line_with_no_time():
    entries = ke.parse_dmesg("2026-13-01T10:00:00,000000+00:00 %s\n2026-02-30T10:00:00,0+00:00 x\n" % XID_79)
    assert [when for when, _message in entries] == [None, None]
    _kills, xids = ke.find_events(entries, now=10.0)
    assert xids[0]["code"] == 79 and xids[0]["age_seconds"] is None


def test_numbers_past_any_the_kernel_prints_do_not_raise():
    """int() of 5000 digits raises ValueError (Python 3.11): a log line with one ended node_facts' kernel_events."""
    huge = "9" * 5000
    lines = ["NVRM: Xid (PCI:0000:3b:00): %s, x" % huge, "Out of memory: Killed process %s (x) total-vm:1kB" % huge,
             "Memory cgroup out of memory: Kill process %s (x) score %s or sacrifice child" % (huge, huge)]
    kills, xids = ke.find_events([(1.0, line) for line in lines], now=2.0)
    assert kills == [] and xids == []
    assert ke.parse_kmsg("%s,1,1,-;x\n4,%s,%s,-;y\n" % (huge, huge, huge), boot_epoch=0.0) == []


def test_blackwell_xids_and_sxids_from_journal():
    """Issue 37: Xid 154 / NVLink5 / PSHC lines read as Xids, NVSwitch SXid lines as their own events."""
    entries = ke.parse_journal(text("journal-xid-blackwell-sxid-short-unix.txt"))
    _kills, xids = ke.find_events(entries, now=1764417800.0)
    assert [x["code"] for x in xids] == [79, 154, 144, 149, 154, 162]
    assert xids[1]["message"].endswith("to 0x2 (Node Reboot Required)")
    sxids = ke.find_sxids(entries, now=1764417800.0)
    assert [(s["device"], s["pci"], s["code"], s["fatal"]) for s in sxids] == [
        ("nvidia-nvswitch3", "0000:05:00.0", 12028, False), ("nvidia-nvswitch0", "0000:c3:00.0", 20009, False),
        ("nvidia-nvswitch1", "0000:06:00.0", 24007, True)]
    assert sxids[2]["message"].startswith("Fatal, Link 44") and sxids[2]["age_seconds"] == pytest.approx(800.0)


@pytest.mark.parametrize("message, fatal", [
    ("nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): 12028, Non-fatal, Link 04", False),
    ("[T42] nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): 11001, Fatal, ingress invalid command", True),
    ("nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): 12028, Severity 1 Engine instance 0", None),
])
def test_sxid_line_forms(message, fatal):
    sxids = ke.find_sxids([(None, message)], now=0.0)
    assert len(sxids) == 1 and sxids[0]["fatal"] is fatal and sxids[0]["age_seconds"] is None


@pytest.mark.parametrize("message", [
    "audit: name=\"nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): 12028, Fatal\"",
    "nvidia-nvswitch2: SXid (PCI:0000:0b:00.0): garbled, Fatal",
])
def test_sxid_words_elsewhere_are_no_sxid(message):
    assert ke.find_sxids([(None, message)], now=0.0) == []


def test_collect_reports_sxids_within_the_window():
    journal = text("journal-xid-blackwell-sxid-short-unix.txt")
    facts = ke.collect_kernel_events(1000, lambda argv, timeout: (0, journal, ""), now=1764417800.0, sources=("journal",))
    assert [s["code"] for s in facts["sxids"]] == [24007]
    assert "1 SXid" in facts["message"]
    assert ke.empty_events(60, "none")["sxids"] == []
