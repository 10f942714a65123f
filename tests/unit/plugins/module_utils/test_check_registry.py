# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The contract of the one check registry (``_policy.CHECKS``) and the option table (``_readiness_options``), issue 21.

- every action option carries its bounds (``check``: a known form, or numbers with a minimum and a maximum);
- each registered check, run on the facts the collectors produce from the captured fixtures (and on the unit tests'
  healthy node), reads only the fact paths and options its registry entry lists, and lists only options it reads;
- every fact path a check lists is produced by a collector on those fixtures (a check of a fact no collector
  gathers fails here, not on a node);
- the checks import no node collector (the controller and the node-local health check load them alone).

Adding a check: its function, one ``check(...)`` entry in ``_policy.CHECKS`` with its reads and options, a
``check`` rule for any new option in ``_readiness_options.OPTIONS``; this file then says what is missing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import os
import shutil

import pytest

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy

from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _policy_validation
from ansible_collections.gpufleet.preflight.plugins.module_utils._readiness import _readiness_options as table
from ansible_collections.gpufleet.preflight.plugins.module_utils._run import run_with_timeout
from ansible_collections.gpufleet.preflight.tests.unit.plugins.conftest import COLLECTORS, loaded_module_utils
from ansible_collections.gpufleet.preflight.tests.unit.plugins.module_utils.conftest import HEALTHY

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
STUB_NVIDIA_SMI = os.path.normpath(os.path.join(HERE, "..", "..", "..", "fleet", "stubs", "nvidia-smi"))
# Dicts keyed by data (paths measured), not by field names: their keys are written "*".
MAPS = ("disks.paths", "node.services")


# ---------------------------------------------------------------- options


def action_options():
    return [entry for entry in table.OPTIONS if entry.get("action", True)]


@pytest.mark.parametrize("entry", action_options(), ids=lambda entry: entry["name"])
def test_every_option_has_bounds(entry):
    rule = entry.get("check")
    assert rule is not None, ("%s has no check in plugins/module_utils/_readiness/_readiness_options.py: give it "
                              "check=dict(min=..., max=...) or check=dict(form=...) (forms: %s)"
                              % (entry["name"], ", ".join(_policy_validation.FORMS)))
    if "form" in rule:
        assert rule["form"] in _policy_validation.FORMS, "%s: unknown form %r" % (entry["name"], rule["form"])
        if rule["form"] == "bool":
            assert entry["type"] == "bool", entry["name"]
        if rule["form"] == "choices":
            assert entry.get("choices"), entry["name"]
    else:
        assert entry["type"] in ("int", "float"), "%s: numeric bounds on a %s option" % (entry["name"], entry["type"])
        assert ("min" in rule or "above" in rule) and "max" in rule, "%s: needs a lower and an upper bound" % entry["name"]
        low = rule.get("min", rule.get("above"))
        assert low < rule["max"]
        default = entry["default"]
        assert default is None or _policy_validation._in_bounds(rule, default), "%s: the default %r is out of its bounds" % (
            entry["name"], default)


@pytest.mark.parametrize("entry", [entry for entry in table.OPTIONS if not entry.get("action", True)],
                         ids=lambda entry: entry["name"])
def test_every_role_only_variable_says_what_bounds_it(entry):
    rule = entry.get("check")
    assert rule is not None, ("preflight_%s has no check in plugins/module_utils/_readiness/_readiness_options.py: give it "
                              "check=dict(form=...) and, for a form validate_policy does not apply, by=<the plugin or "
                              "task file that enforces it>" % entry["name"])
    if rule.get("form") not in _policy_validation.FORMS:
        assert rule.get("by"), "preflight_%s: form %r needs by=<what enforces it>" % (entry["name"], rule.get("form"))
        repo = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
        assert os.path.isfile(os.path.join(repo, rule["by"])), "preflight_%s: by=%r is no file" % (entry["name"], rule["by"])
        with open(os.path.join(repo, rule["by"])) as handle:
            text = handle.read()
        assert entry["name"] in text or ("preflight_" + entry["name"]) in text or entry["name"].split("_", 1)[-1] in text, (
            "preflight_%s: %s does not mention it" % (entry["name"], rule["by"]))


@pytest.mark.parametrize("entry", [entry for entry in action_options() if "max" in (entry.get("check") or {})],
                         ids=lambda entry: entry["name"])
def test_bounds_are_enforced_by_name(entry):
    rule = entry["check"]
    too_big = rule["max"] + 1
    with pytest.raises(ValueError, match="^%s: " % entry["name"]):
        _policy_validation.validate_policy(dict(table.defaults(), **{entry["name"]: too_big}))
    too_small = rule.get("min", rule.get("above", 0)) - 1
    with pytest.raises(ValueError, match="^%s: " % entry["name"]):
        _policy_validation.validate_policy(dict(table.defaults(), **{entry["name"]: too_small}))


def test_the_defaults_are_a_valid_policy():
    policy = _policy_validation.validate_policy(table.defaults())
    assert policy["min_available_memory"] == ("absolute", 8 * 1024 ** 3)


# ---------------------------------------------------------------- facts from the captured fixtures


def _write_stub(path, text):
    with open(path, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o755)


@pytest.fixture(scope="module")
def fixture_facts(tmp_path_factory, gpu_scenario):
    """[(label, facts)]: every subset as its collector produces it from the fixtures (stub programs print them)."""
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _disks, _gpus, _kernel_events, _memory, _processes, _toolchain
    tmp = tmp_path_factory.mktemp("registry")
    out = []
    for case in sorted(os.listdir(os.path.join(FIXTURES, "memory"))):
        out.append(("memory/" + case, {"memory": _memory.collect_memory(root=os.path.join(FIXTURES, "memory", case))}))
    out.append(("processes/build", {"build_processes": _processes.collect_build_processes(
        root=os.path.join(FIXTURES, "processes", "build"), clock_ticks=100, page_size=4096)}))
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    shutil.copy(STUB_NVIDIA_SMI, str(bin_dir / "nvidia-smi"))
    os.chmod(str(bin_dir / "nvidia-smi"), 0o755)
    shutil.copy(os.path.join(os.path.dirname(STUB_NVIDIA_SMI), "dcgmi"), str(bin_dir / "dcgmi"))
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _dcgm_deep
    kept_path = str(tmp / "dcgm-diag.json")   # the record the active test keeps, from a failing level-2 document
    with open(os.path.join(FIXTURES, "gpus", "dcgm", "diag-r2-memory-fail.json")) as handle:
        _dcgm_deep.save_kept(kept_path, _dcgm_deep.kept_result(2, _dcgm_deep.parse_dcgm_json(handle.read()), 95.0, 1764900000.0, 24))
    # the bandwidth tests' records, kept by their own code from the bandwidth fixtures (nvbandwidth, all_reduce_perf)
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _bandwidth_tests
    bandwidth_paths = {}
    for test, name in (("nvbandwidth", "nvbandwidth-h100-x8-gpu3-gen4-link.txt"), ("nccl_all_reduce", "all-reduce-h100-x8.txt")):
        with open(os.path.join(FIXTURES, "gpus", "bandwidth", name)) as handle:
            text = handle.read()
        parsed = (_bandwidth_tests.parse_nvbandwidth if test == "nvbandwidth" else _bandwidth_tests.parse_all_reduce)(text)
        floors, source = _bandwidth_tests.floors_for("NVIDIA H100 80GB HBM3", {})
        judge = _bandwidth_tests.judge_nvbandwidth if test == "nvbandwidth" else _bandwidth_tests.judge_all_reduce
        bandwidth_paths[test] = str(tmp / ("%s.json" % test))
        _dcgm_deep.save_kept(bandwidth_paths[test], _bandwidth_tests.kept_result(
            test, [test], parsed, judge(parsed, floors), floors, source, 40.0, 1764900000.0, 24))
    for scenario in ("rtx_pro_6000_x8", "b200_x8", "a100_pre535", "v100_r470", "exit_9", "geforce_na",
                     "h100_x2_nvswitch", "rtx5090_570", "b200_fabric_in_progress"):
        env = dict(os.environ, GPUFLEET_STUB_DIR=gpu_scenario(scenario))
        facts = _gpus.collect_gpus(lambda argv, timeout, env=env: run_with_timeout(argv, timeout, env=env),
                                   timeout=10, search_paths=[str(bin_dir)], probes=("nvlink_status", "nvlink_errors", "query"),
                                   dcgm_diag_timeout=10, dcgm_result_path=kept_path, bandwidth_result_paths=bandwidth_paths)
        out.append(("gpus/" + scenario, {"gpus": facts}))
    root = tmp / "kmsg"
    (root / "dev").mkdir(parents=True)
    (root / "proc").mkdir()
    with open(os.path.join(FIXTURES, "kernel_events", "kmsg-memcg-oom-6.18.txt")) as handle:
        (root / "dev" / "kmsg").write_text(handle.read())
    (root / "proc" / "uptime").write_text(u"500.00 900.00\n")
    out.append(("kernel_events/kmsg", {"kernel_events": _kernel_events.collect_kernel_events(
        3600, run_with_timeout, root=str(root), now=2000000.0, sources=("kmsg",))}))
    with open(os.path.join(FIXTURES, "kernel_events", "journal-xid-short-unix.txt")) as handle:
        journal = handle.read()
    out.append(("kernel_events/journal", {"kernel_events": _kernel_events.collect_kernel_events(
        10 ** 8, lambda argv, timeout: (0, journal, ""), now=1764417800.0, sources=("journal",))}))
    with open(os.path.join(FIXTURES, "kernel_events", "journal-xid-blackwell-sxid-short-unix.txt")) as handle:
        blackwell = handle.read()
    out.append(("kernel_events/journal-blackwell", {"kernel_events": _kernel_events.collect_kernel_events(
        10 ** 8, lambda argv, timeout: (0, blackwell, ""), now=1764417800.0, sources=("journal",))}))
    tools = tmp / "tools"
    tools.mkdir()
    versions = os.path.join(FIXTURES, "toolchain")
    _write_stub(str(tools / "nvcc"), "#!/bin/sh\ncase \"$1\" in\n  --list-gpu-arch) cat %s/nvcc-13.0-list-gpu-arch.txt ;;\n"
                "  --list-gpu-code) cat %s/nvcc-13.0-list-gpu-code.txt ;;\n  *) cat %s/nvcc-13.0-version.txt ;;\nesac\n"
                % (versions, versions, versions))
    _write_stub(str(tools / "cmake"), "#!/bin/sh\ncat %s/cmake-4.2.1-version.txt\n" % versions)
    _write_stub(str(tools / "python3"), "#!/bin/sh\necho 'GPUFLEET_PROBE {\"version\": \"3.12.3\", \"executable\": "
                "\"/opt/venv/bin/python3\", \"torch\": {\"present\": true, \"version\": \"2.9.0+cu130\", \"error\": null, "
                "\"cuda\": \"13.0\"}, \"scikit_build_core\": {\"present\": true, \"version\": \"0.11.6\", \"error\": null}}'\n")
    out.append(("toolchain/stubs", {"toolchain": _toolchain.collect_toolchain(
        run_with_timeout, python=str(tools / "python3"), timeout=10, search_paths=[str(tools)], root=str(tmp))}))
    out.append(("disks/tmp", {"disks": _disks.collect_disks([str(tmp), str(tmp / "not-there-yet")])}))
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _node
    for case in sorted(os.listdir(os.path.join(FIXTURES, "node"))):
        if os.path.isdir(os.path.join(FIXTURES, "node", case)):
            out.append(("node/" + case, {"node": _node.collect_node(
                ["sshd", "munged", "nvidia-persistenced", "slurmd"], root=os.path.join(FIXTURES, "node", case),
                clock=lambda: (_node.clock_state(*NODE_CLOCKS[case]), []))}))
    # issue 37 item 3: the node hardware parts of the fixture trees (nvme smart-log from its captured JSON)
    from ansible_collections.gpufleet.preflight.plugins.module_utils._facts import _hardware
    smart = os.path.join(FIXTURES, "hardware", "nvme-smart-log-failing.json")
    for case in ("gpu_node", "vm"):
        out.append(("hardware/" + case, {"node": {"errors": [], "hardware": _hardware.collect_hardware(
            _hardware.PARTS, lambda argv, timeout: (0, open(smart).read(), ""), root=os.path.join(FIXTURES, "hardware", case),
            nvme_program="nvme", d_state_interval=0)}}))
    out.append(("hardware/gpu_node-nvme-timeout", {"node": {"errors": [], "hardware": _hardware.collect_hardware(
        ("nvme",), lambda argv, timeout: (None, "", ""), root=os.path.join(FIXTURES, "hardware", "gpu_node"),
        nvme_program="nvme")}}))
    for sel in ("ipmitool-sel-elist-before.txt", "ipmitool-sel-elist-after.txt"):  # two runs: the new SEL entries
        outputs = dict((verb, open(os.path.join(FIXTURES, "hardware", name)).read()) for verb, name in (
            ("sel", sel), ("sensor", "ipmitool-sensor.txt")))
        out.append(("hardware/ipmi-" + sel, {"node": {"errors": [], "hardware": _hardware.collect_hardware(
            ("ipmi_sel", "sensors"), lambda argv, timeout, outputs=outputs: (0, outputs[argv[1]], ""),
            state_dir=str(tmp), ipmitool="ipmitool")}}))
    # issue 37: the IB error counters of two runs (hgx_ndr, then hgx_degraded) with the state kept between them
    ib_state = str(tmp / "ib-counters.json")
    for case, now in (("hgx_ndr", 1000.0), ("hgx_degraded", 1600.0)):
        out.append(("node/%s+ib_counters" % case, {"node": _node.collect_node(
            root=os.path.join(FIXTURES, "node", case), clock=lambda: (_node.clock_state(*NODE_CLOCKS[case]), []),
            ib_counters=True, ib_state_path=ib_state, now=now)}))
    return out


# adjtimex (state, status, maxerror us) as read on an NTP-synchronised node and on this unsynchronised machine
NODE_CLOCKS = {"hgx_ndr": (0, 0x2001, 2500), "hgx_degraded": (5, 0x40, 16000000), "pcie_no_ib": (0, 0x2001, 1000)}


def produced_paths(value, path=""):
    found = set()
    if isinstance(value, dict):
        for key, item in value.items():
            child = "%s.*" % path if path in MAPS else ("%s.%s" % (path, key) if path else key)
            found.add(child)
            found |= produced_paths(item, child)
    elif isinstance(value, list):
        for item in value:
            found.add(path + "[]")
            found |= produced_paths(item, path + "[]")
    return found


def test_every_fact_path_a_check_reads_is_produced_by_a_collector(fixture_facts):
    produced = set()
    for _label, facts in fixture_facts:
        produced |= produced_paths(facts)
    missing = ["%s reads %s" % (entry["name"], path) for entry in _policy.CHECKS for path in entry["reads"]
               if path not in produced]
    assert not missing, ("no collector produces these on the captured fixtures (tests/unit/plugins/module_utils/"
                         "fixtures): %s" % "; ".join(missing))


# ---------------------------------------------------------------- what each check really reads


class Recording(dict):
    """A dict that logs the path of every key read (``get``, ``[]``, ``in``); lists log ``[]`` per element."""

    def __init__(self, data, path, log):
        super(Recording, self).__init__(data)
        self._path, self._log = path, log

    def _child(self, key):
        if self._path in MAPS:
            return "%s.*" % self._path
        return "%s.%s" % (self._path, key) if self._path else key

    def __getitem__(self, key):
        path = self._child(key)
        self._log.add(path)
        return record(dict.__getitem__(self, key), path, self._log)

    def get(self, key, default=None):
        return self[key] if dict.__contains__(self, key) else self._log.add(self._child(key)) or default

    def __contains__(self, key):
        self._log.add(self._child(key))
        return dict.__contains__(self, key)


class RecordingList(list):
    def __init__(self, data, path, log):
        super(RecordingList, self).__init__(data)
        self._path, self._log = path, log

    def __iter__(self):
        for item in list.__iter__(self):
            self._log.add(self._path + "[]")
            yield record(item, self._path + "[]", self._log)

    def __getitem__(self, index):
        self._log.add(self._path + "[]")
        return record(list.__getitem__(self, index), self._path + "[]", self._log)


def record(value, path, log):
    if isinstance(value, dict):
        return Recording(value, path, log)
    if isinstance(value, list):
        return RecordingList(value, path, log)
    return value


def healthy_facts():
    """The unit tests' healthy node (conftest.HEALTHY): every gpu/build check passes on it."""
    return copy.deepcopy(HEALTHY)


def fact_sets(fixture_facts):
    sets = [facts for _label, facts in fixture_facts] + [healthy_facts()]
    merged = {}
    for facts in sets:
        merged.update(facts)
    return sets + [merged, {}]


POLICIES = [
    table.defaults(),
    dict(table.defaults(), require_cuda_libraries=True, toolchain_python="/opt/venv/bin/python3",
         min_driver_version="570.86.15", cmake_max_version="4.0", allowed_gpu_compute_apps=["dcgm-exporter"]),
    dict(table.defaults(), max_memory_pressure=0.0, min_available_memory="0.5", oom_window_minutes=500000),
    dict(table.defaults(), check_nvlink=True, check_fabric=True, check_gpu_recovery=True, check_dcgm_diag=True, min_pcie_gen=5, min_pcie_width=16),
]


# Values that switch a check on or move it to an edge, per option form (numbers: their bounds and a middle). A form
# added to _policy_validation.FORMS needs its samples here: the contract below runs every check under them.
FORM_SAMPLES = {
    "bool": (True, False),
    "memory": ("1GiB", "0.99", "1024GiB"),
    "size": ("1MiB", "1024TiB"),
    "version": ("1.0", "999.0"),
    "arch": ("sm_90a", "sm_120a"),
    "compute_capability": ("9.0", "12.0"),
    "path": ("/opt/venv/bin/python3",),
    "absolute_path": ("/", "/nonexistent/build"),
    "program_names": (["dcgm-exporter"],),
    "process_names": (["dcgm-exporter", "/usr/bin/python3"],),
    "cgroup_names": ([], ["gpufleet-test-*"], ["*"]),
    "xids": ([79], [13, 31, 79]),
    "regexes": (["ninja"],),
    "absolute_paths": (["/"], ["/", "/tmp", "/nonexistent/scratch"]),
    "custom_checks": ([],),
}


def option_samples(entry):
    """The values of one action option the contract tries: each form's samples, a number's bounds and middle."""
    rule = entry.get("check") or {}
    form = rule.get("form")
    if form == "choices":
        return [list(entry["choices"][:n]) for n in range(len(entry["choices"]) + 1)] if entry["type"] == "list" \
            else list(entry["choices"])
    if form is not None:
        assert form in FORM_SAMPLES, ("%s: form %r has no sample values in FORM_SAMPLES (test_check_registry.py): add "
                                      "values that switch its check on" % (entry["name"], form))
        return list(FORM_SAMPLES[form])
    low = rule.get("min", rule.get("above"))
    assert low is not None and "max" in rule, "%s: needs a lower and an upper bound in its check" % entry["name"]
    middle = (low + rule["max"]) / 2.0
    values = [rule["max"], middle if entry["type"] == "float" else int(middle), rule.get("min", low + 1)]
    return [value for value in values if _policy_validation._in_bounds(rule, value)]


def policies_for(entry):
    """The fixed policies, then each option the check lists set to each of its samples (a check that is off by
    default runs here: its option switches it on)."""
    policies = list(POLICIES)
    for name in entry["options"]:
        option_entry = table.BY_NAME[name]
        for value in option_samples(option_entry):
            policies.append(dict(table.defaults(), **{name: value}))
    return policies


@pytest.mark.parametrize("entry", action_options(), ids=lambda entry: entry["name"])
def test_every_option_has_sample_values_in_bounds(entry):
    for value in option_samples(entry):
        _policy_validation.validate_policy(dict(table.defaults(), **{entry["name"]: value}))


def test_each_check_runs_under_some_policy(fixture_facts):
    """A check that returns None (off) under every policy and facts never ran in this contract: its reads were never
    recorded. Its registry entry must list the option that switches it on."""
    never = []
    for entry in _policy.CHECKS:
        ran = any(entry["function"](facts, _policy_validation.validate_policy(args)) is not None
                  for args in policies_for(entry) for facts in fact_sets(fixture_facts))
        if not ran:
            never.append(entry["name"])
    assert not never, ("these checks never ran under any policy the contract builds from their listed options: %s - "
                       "list in their check(...) entry the options that switch them on (and the facts they read)"
                       % ", ".join(never))


def test_each_check_reads_what_its_registry_entry_lists(fixture_facts):
    problems = []
    for entry in _policy.CHECKS:
        options_read = set()
        for policy_args in policies_for(entry):
            policy = _policy_validation.validate_policy(policy_args)
            for facts in fact_sets(fixture_facts):
                paths, options = set(), set()
                result = entry["function"](record(facts, "", paths), record(policy, "", options))
                if result is not None:
                    if (result["name"], result["profile"]) != (entry["name"], entry["profile"]):
                        problems.append("%s: the check reports itself as %s (%s)" % (entry["name"], result["name"], result["profile"]))
                undeclared = [path for path in paths
                              if not any(path == read or read.startswith(path + ".") or read.startswith(path + "[]")
                                         for read in entry["reads"])]
                if undeclared:
                    problems.append("%s reads %s, not in its reads" % (entry["name"], ", ".join(sorted(undeclared))))
                options_read |= set(name.split("[", 1)[0] for name in options)
        if options_read != set(entry["options"]):
            problems.append("%s reads the options %s but lists %s" % (entry["name"], sorted(options_read), sorted(entry["options"])))
    assert not problems, "\n".join(sorted(set(problems)))


def test_registry_names_are_unique_and_options_are_in_the_table():
    names = [entry["name"] for entry in _policy.CHECKS]
    assert len(names) == len(set(names))
    assert set(entry["profile"] for entry in _policy.CHECKS) == {"always"} | set(_policy.PROFILES)
    for entry in _policy.CHECKS:
        assert set(entry["options"]) <= set(table.BY_NAME), entry["name"]


def test_evaluate_runs_every_registered_check():
    policy = _policy_validation.validate_policy(table.defaults())
    names = [check["name"] for check in _policy.evaluate(healthy_facts(), policy)]
    expected = [entry["name"] for entry in _policy.CHECKS
                if entry["function"](healthy_facts(), policy) is not None]
    assert names == expected


def test_the_checks_import_no_node_collector():
    # the controller's plugins: tests/unit/plugins/test_plugin_rules.py
    module = "module_utils._readiness._policy"
    loaded = loaded_module_utils(module)
    assert not COLLECTORS & loaded, "%s imports the node collectors %s (put the constant in _constants)" % (
        module, ", ".join(sorted(COLLECTORS & loaded)))


def check_modules():
    """Every module of plugins/module_utils/_readiness/, imported: where a check function may be written."""
    import importlib
    folder = os.path.join(HERE, "..", "..", "..", "..", "plugins", "module_utils", "_readiness")
    names = sorted(name[:-3] for name in os.listdir(folder) if name.endswith(".py") and name != "__init__.py")
    return [importlib.import_module("ansible_collections.gpufleet.preflight.plugins.module_utils._readiness." + name)
            for name in names]


def is_check_function(function):
    """A check: ``check_*(facts, policy)``, any further parameter with a default (``now=time.time``: dcgm_result)."""
    import inspect
    if not inspect.isfunction(function) or not function.__name__.startswith("check_"):
        return False
    parameters = list(inspect.signature(function).parameters.values())
    return ([parameter.name for parameter in parameters[:2]] == ["facts", "policy"]
            and all(parameter.default is not parameter.empty for parameter in parameters[2:]))


def test_every_check_function_is_registered():
    # a check written but not listed in _policy.CHECKS would never run: a half-done change fails here. Found by
    # discovery (every check_*(facts, policy, ...) of every _readiness module), never by a list of modules.
    registered = set(entry["function"] for entry in _policy.CHECKS)
    missing, scanned = [], []
    for module in check_modules():
        for name, function in vars(module).items():
            if is_check_function(function) and function.__module__ == module.__name__:
                scanned.append(module.__name__)
                if function not in registered:
                    missing.append("%s.%s" % (module.__name__.rsplit(".", 1)[-1], name))
    assert not missing, "not in _policy.CHECKS (add a check(...) entry with its reads and options): %s" % ", ".join(missing)
    holding = set(function.__module__ for function in registered)
    assert holding <= set(scanned), "registered checks in modules the scan did not reach: %s" % sorted(holding - set(scanned))
    unseen = sorted(function.__name__ for function in registered if not is_check_function(function))
    assert not unseen, "registered checks the discovery would not find (not check_*(facts, policy, ...)): %s" % unseen


def test_the_checks_reference_explains_every_registered_check():
    repo = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
    with open(os.path.join(repo, "docs", "reference.md")) as handle:  # README.md's table until issue 39
        text = handle.read()
    section = text.split("## What each check means", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    missing = [entry["name"] for entry in _policy.CHECKS if not any("`%s`" % entry["name"] in row for row in rows)]
    assert not missing, "docs/reference.md, 'What each check means': no row for %s" % ", ".join(missing)
