# -*- coding: utf-8 -*-
# Copyright: gpufleet.preflight contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Role gpufleet.preflight.build_deps, run for real on this host (root, apt, pip from the index).

Each test runs ansible-playbook against localhost (connection local) and reads the PLAY RECAP, the
failure message, and what the playbook leaves in a result file (build_deps_env and the toolchain
facts). One build venv is shared by the tests that may change it; the check-mode and bad-input tests
use fresh paths and assert nothing appears there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "tests", "roles", "playbooks", "build_deps.yml")
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
RECAP_RE = re.compile(r"^localhost\s*:\s*(.*)$", re.MULTILINE)

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="installs system packages: needs root"),
    pytest.mark.skipif(shutil.which("apt-get") is None, reason="exercised on the Debian family (apt) here"),
]


class Run(object):
    """One ansible-playbook run: rc, output, recap counters, and the result file if written."""

    def __init__(self, proc, result_file, seconds):
        self.rc = proc.returncode
        self.output = proc.stdout + proc.stderr
        self.seconds = seconds
        recap = RECAP_RE.findall(proc.stdout)
        self.recap = dict((k, int(v)) for k, v in re.findall(r"(\w+)=(\d+)", recap[-1])) if recap else {}
        self.result = None
        if os.path.exists(result_file):
            with open(result_file) as handle:
                self.result = json.load(handle)

    def __repr__(self):
        return "rc=%s recap=%s\n%s" % (self.rc, self.recap, self.output[-6000:])


def run_role(tmp_path, extra_vars, check=False, wrapper=None, name="run"):
    """Run the role through tests/roles/playbooks/build_deps.yml with ``extra_vars``."""
    result_file = str(tmp_path / ("%s-result.json" % name))
    if os.path.exists(result_file):
        os.unlink(result_file)
    variables = dict(extra_vars, build_deps_test_result=result_file)
    # this host's CUDA toolkit has no nvrtc, cuBLAS nor driver stub: the CUDA library check has its own test below
    variables.setdefault("build_deps_cuda_libraries", [])
    vars_file = tmp_path / ("%s-vars.json" % name)
    vars_file.write_text(json.dumps(variables))
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.environ.get("ANSIBLE_COLLECTIONS_PATH", os.path.join(ROOT, ".tmp", "collections")),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
    })
    argv = [ANSIBLE_PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
            "-e", "@%s" % vars_file, PLAYBOOK]
    if check:
        argv.append("--check")
    if wrapper:
        argv = list(wrapper) + argv
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                          universal_newlines=True, timeout=900)
    return Run(proc, result_file, time.monotonic() - started)


def version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("build_deps")


@pytest.fixture(scope="module")
def venv(workdir):
    return str(workdir / "venv")


@pytest.fixture(scope="module")
def first_run(workdir, venv):
    """The role on a fresh venv path: installs what is missing, creates and fills the venv."""
    run = run_role(workdir, {"build_deps_venv": venv}, name="first")
    print("first run: %.1fs, %s" % (run.seconds, run.recap))
    return run


def test_first_run_makes_the_node_build_ready(first_run, venv):
    assert first_run.rc == 0, first_run
    assert first_run.recap["failed"] == 0
    facts = first_run.result["gpufleet_toolchain"]
    assert facts["numa"]["header_present"], facts["numa"]
    assert subprocess.call(["dpkg", "-s", "libnuma-dev"], stdout=subprocess.DEVNULL) == 0
    assert facts["scikit_build_core"]["present"], facts["scikit_build_core"]
    assert version_tuple(facts["scikit_build_core"]["version"]) >= (0, 10)
    # The system cmake here is 3.25: the build's cmake is the venv's, from PyPI.
    assert facts["cmake"]["path"] == os.path.join(venv, "bin", "cmake")
    assert version_tuple(facts["cmake"]["version"]) >= (3, 31)
    assert facts["python"]["path"] == os.path.join(venv, "bin", "python")
    env = first_run.result["build_deps_env"]
    assert env["PATH"].startswith("%s/bin:/usr/local/cuda/bin:" % venv)
    assert env["CUDA_HOME"] == "/usr/local/cuda"
    with open(os.path.join(venv, "gpufleet-build.env")) as handle:
        text = handle.read()
    assert "export CUDA_HOME=/usr/local/cuda\n" in text
    assert "export PATH=%s/bin:/usr/local/cuda/bin:\"$PATH\"\n" % venv in text


def test_env_file_is_sourceable_and_puts_venv_cmake_first(first_run, venv):
    assert first_run.rc == 0, first_run
    out = subprocess.check_output(["sh", "-c", ". %s/gpufleet-build.env && command -v cmake && command -v nvcc && echo $CUDA_HOME" % venv],
                                  universal_newlines=True).split()
    assert out[0] == os.path.join(venv, "bin", "cmake")
    assert out[1] in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc")
    assert out[2] == "/usr/local/cuda"


def test_second_run_changes_nothing(first_run, workdir, venv):
    assert first_run.rc == 0, first_run
    run = run_role(workdir, {"build_deps_venv": venv}, name="second")
    print("second run: %.1fs, %s" % (run.seconds, run.recap))
    assert run.rc == 0, run
    assert run.recap["changed"] == 0, run


def test_check_mode_on_a_fresh_venv_reports_changes_and_creates_nothing(first_run, workdir):
    fresh = workdir / "fresh" / "venv"
    run = run_role(workdir, {"build_deps_venv": str(fresh)}, check=True, name="check")
    assert run.rc == 0, run
    assert run.recap["changed"] > 0, run
    assert not (workdir / "fresh").exists()
    assert "would write %s/gpufleet-build.env" % fresh in run.output
    # this host's cmake (3.25) is older than the role's minimum: auto pip installs one, so the check says so instead
    # of advising build_deps_cmake_source: pypi (issue 21)
    assert "set build_deps_cmake_source: pypi" not in run.output, run.output
    assert "build_deps pip installs" in run.output and "check mode installs nothing" in run.output, run.output


@pytest.mark.parametrize("spec, policy_set", [
    ("cmake>=3.31,<4", False),
    ("cmake>=4,<5", True),
])
def test_cmake_policy_minimum_follows_the_cmake_in_use(first_run, workdir, venv, spec, policy_set):
    assert first_run.rc == 0, first_run
    # The 3.31 run also sets a ccache dir (one run for two behaviours: the suite stays short).
    cache = workdir / "ccache"
    extra = {"build_deps_ccache_dir": str(cache)} if not policy_set else {}
    run = run_role(workdir, dict(extra, build_deps_venv=venv, build_deps_cmake_spec=spec), name="cmake")
    assert run.rc == 0, run
    cmake = run.result["gpufleet_toolchain"]["cmake"]
    assert cmake["path"] == os.path.join(venv, "bin", "cmake")
    assert (version_tuple(cmake["version"]) >= (4, 0)) == policy_set, cmake
    assert cmake["policy_version_minimum_needed"] == policy_set, cmake
    with open(os.path.join(venv, "gpufleet-build.env")) as handle:
        text = handle.read()
    assert ("export CMAKE_POLICY_VERSION_MINIMUM=3.5\n" in text) == policy_set, text
    assert ("CMAKE_POLICY_VERSION_MINIMUM" in run.result["build_deps_env"]) == policy_set
    if extra:
        assert cache.is_dir()
        assert "export CCACHE_DIR=%s\n" % cache in text
        assert run.result["build_deps_env"]["CCACHE_DIR"] == str(cache)
    else:
        assert "CCACHE_DIR" not in text


def hide_numa_header(workdir):
    """A wrapper running ansible-playbook in a mount namespace where /usr/include lacks numa.h.

    /usr/include is replaced there by a directory of links to every other entry (through a second
    mount of the original, so the links do not point into the replacement).
    """
    shadow = workdir / "include-without-numa"
    original = workdir / "include-original"
    for path in (shadow, original):
        path.mkdir(exist_ok=True)
    for name in os.listdir("/usr/include"):
        link = shadow / name
        if name != "numa.h" and not os.path.lexists(str(link)):
            os.symlink(str(original / name), str(link))
    script = "mount --bind /usr/include %s && mount --bind %s /usr/include && exec \"$@\"" % (original, shadow)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare for a private mount namespace")
def test_hidden_numa_header_fails_with_a_plain_message(first_run, workdir, venv):
    assert first_run.rc == 0, first_run
    run = run_role(workdir, {"build_deps_venv": venv, "build_deps_install_numa": False},
                   wrapper=hide_numa_header(workdir), name="numa")
    assert run.rc != 0, run
    assert run.recap["failed"] == 1, run
    assert "is not build-ready: numa.h not found: install libnuma-dev" in run.output, run
    assert "Traceback" not in run.output
    # Only this run's namespace lost the header.
    assert os.path.exists("/usr/include/numa.h")


NVCC_12_6 = """#!/bin/sh
# nvcc 12.6 as it answers; it knows no sm_100 / sm_120 yet.
case "$1" in
--version) printf 'nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2024 NVIDIA Corporation\n'
           printf 'Built on Tue_Oct_29_23:50:19_PDT_2024\nCuda compilation tools, release 12.6, V12.6.85\n'
           printf 'Build cuda_12.6.r12.6/compiler.35059454_0\n' ;;
--list-gpu-code) printf 'sm_50\nsm_52\nsm_53\nsm_60\nsm_61\nsm_62\nsm_70\nsm_72\nsm_75\nsm_80\nsm_86\nsm_87\nsm_89\nsm_90\n' ;;
--list-gpu-arch) printf 'compute_50\ncompute_52\ncompute_53\ncompute_60\ncompute_61\ncompute_62\ncompute_70\ncompute_72\n'
                 printf 'compute_75\ncompute_80\ncompute_86\ncompute_87\ncompute_89\ncompute_90\n' ;;
*) exit 1 ;;
esac
"""


def test_old_nvcc_fails_naming_the_cuda_needed(first_run, workdir, venv):
    """A CUDA home whose nvcc is 12.6: sm_120a cannot be compiled, and the message says what is needed."""
    assert first_run.rc == 0, first_run
    cuda_home = workdir / "cuda-12.6"
    (cuda_home / "bin").mkdir(parents=True, exist_ok=True)
    nvcc = cuda_home / "bin" / "nvcc"
    nvcc.write_text(NVCC_12_6)
    nvcc.chmod(0o755)
    run = run_role(workdir, {"build_deps_venv": venv, "build_deps_cuda_home": str(cuda_home),
                             "build_deps_env_file": str(workdir / "cuda-12.6.env"),
                             "build_deps_gpu_archs": ["sm_90", "sm_120a", "sm_100f"]}, name="nvcc")
    assert run.rc != 0, run
    assert run.result is None  # the play stopped at the verification, before its post task
    assert "nvcc 12.6 cannot compile sm_120a: CUDA >= 12.8 is needed" in run.output, run
    assert "nvcc 12.6 cannot compile sm_100f: CUDA >= 12.9 is needed" in run.output, run
    assert "cannot compile sm_90" not in run.output
    assert "Traceback" not in run.output


def test_wheelhouse_only_install(workdir, monkeypatch):
    """Air-gapped: a fresh venv filled from a local wheelhouse with --no-index; the index is unreachable."""
    wheelhouse = workdir / "wheelhouse"
    subprocess.check_call([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d", str(wheelhouse),
                           "scikit-build-core>=0.10", "wheel", "ninja", "cmake>=3.31,<4"], stderr=subprocess.DEVNULL)
    venv = workdir / "airgap" / "venv"
    # No index, find-links or constraints from this host's pip config; the index given is a dead loopback port,
    # so only --no-index lets the install succeed.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    run = run_role(workdir, {"build_deps_venv": str(venv), "build_deps_pip_no_index": True,
                             "build_deps_pip_find_links": [str(wheelhouse)],
                             "build_deps_pip_index_url": "http://127.0.0.1:9/simple",
                             "build_deps_cmake_spec": "cmake>=3.31,<4"}, name="airgap")
    assert run.rc == 0, run
    facts = run.result["gpufleet_toolchain"]
    assert facts["scikit_build_core"]["present"], facts
    assert facts["cmake"]["path"] == str(venv / "bin" / "cmake")
    assert version_tuple(facts["cmake"]["version"])[:2] == (3, 31)


def test_index_credentials_never_reach_the_output(workdir, monkeypatch):
    """A pip index URL with credentials (issue 12 item 7): pip gets it through its environment, so a failed install
    prints neither the password nor the URL's user part, only pip's own masked form."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no find-links from this host's pip config: the index must fail
    monkeypatch.setenv("PIP_RETRIES", "0")
    run = run_role(workdir, {"build_deps_venv": str(workdir / "secret" / "venv"),
                             "build_deps_pip_index_url": "http://builder:s3cr3t-t0ken@127.0.0.1:9/simple",
                             "build_deps_pip_extra_index_urls": ["http://builder:s3cr3t-t0ken@127.0.0.2:9/simple"]},
                   name="secret")
    assert run.rc != 0, run
    assert "pip" in run.output and "127.0.0.1" in run.output, run
    assert "s3cr3t-t0ken" not in run.output, run


def bad_input_cases():
    return [
        ("unsupported-os", {"build_deps_os_family": "Suse"}, "supports the OS families Debian and RedHat (apt and dnf); this node's family is Suse"),
        ("torch-malformed", {"build_deps_torch_version": "2.9"}, 'build_deps_torch_version "2.9" is not a pinned torch version'),
        ("torch-cpu", {"build_deps_torch_version": "2.9.1+cpu"}, 'build_deps_torch_version "2.9.1+cpu" is not a pinned torch version'),
        ("torch-cuda-mismatch", {"build_deps_torch_version": "2.9.1+cu128"}, "is a CUDA 12 build but nvcc"),
        ("no-index-no-links", {"build_deps_pip_no_index": True}, "build_deps_pip_no_index is true but build_deps_pip_find_links is empty"),
        # the bad-input sweep's findings (tests/sweep): each refused naming the variable
        ("cmake-min-abc", {"build_deps_cmake_min_version": "abc"}, "build_deps_cmake_min_version must be a version like 3.31"),
        ("python-missing", {"build_deps_python": "/nonexistent/python"}, "build_deps_python /nonexistent/python does not exist"),
        ("gpu-arch-typo", {"build_deps_gpu_archs": ["sm_12x"]}, "build_deps_gpu_archs must be names like sm_120a"),
        ("index-not-url", {"build_deps_pip_index_url": "not a url"}, "build_deps_pip_index_url must be a URL"),
        ("cuda-home-relative", {"build_deps_cuda_home": "relative/cuda"}, "build_deps_cuda_home must be an absolute path"),
    ]


@pytest.mark.parametrize("name, extra, message", bad_input_cases(), ids=[case[0] for case in bad_input_cases()])
def test_bad_input_fails_before_installing(workdir, name, extra, message):
    venv = workdir / ("bad-%s" % name) / "venv"
    # Ask for a package that is surely not installed: it must not be installed either.
    run = run_role(workdir, dict(extra, build_deps_venv=str(venv), build_deps_extra_packages=["sl"]), name="bad-" + name)
    assert run.rc != 0, run
    assert message in run.output, run
    assert run.recap["changed"] == 0, run
    assert not venv.parent.exists()
    assert subprocess.call(["dpkg", "-s", "sl"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0
    assert "Traceback" not in run.output


def test_venv_path_that_is_a_file_fails_before_installing(workdir):
    target = workdir / "not-a-dir"
    target.write_text("a file\n")
    run = run_role(workdir, {"build_deps_venv": str(target), "build_deps_extra_packages": ["sl"]}, name="file")
    assert run.rc != 0, run
    assert "build_deps_venv %s exists and is not a directory" % target in run.output, run
    assert run.recap["changed"] == 0
    assert target.read_text() == "a file\n"
    assert subprocess.call(["dpkg", "-s", "sl"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0


def local_torch_wheel():
    wheels = [name for name in os.listdir("/opt/wheels") if name.startswith("torch-")] if os.path.isdir("/opt/wheels") else []
    return sorted(wheels)[-1] if wheels else None


# Last in the file: it puts torch (large) into the shared venv. Opt-in, it adds about a minute.
@pytest.mark.skipif(os.environ.get("BUILD_DEPS_TEST_TORCH") != "1", reason="set BUILD_DEPS_TEST_TORCH=1 (installs torch, ~1 min)")
@pytest.mark.skipif(local_torch_wheel() is None or "+cpu" not in (local_torch_wheel() or ""), reason="needs a CPU torch wheel in /opt/wheels")
def test_torch_without_matching_cuda_fails_after_install(first_run, workdir, venv):
    assert first_run.rc == 0, first_run
    version = local_torch_wheel().split("-")[1].split("+")[0]
    nvcc_major = first_run.result["gpufleet_toolchain"]["nvcc"]["cuda_version"].split(".")[0]
    run = run_role(workdir, {"build_deps_venv": venv, "build_deps_torch_version": version, "build_deps_pip_find_links": ["/opt/wheels"]},
                   name="torch")
    assert run.rc != 0, run
    torch = run.result["gpufleet_toolchain"]["torch"] if run.result else None
    assert "is not build-ready: torch %s+cpu is built without CUDA: install a +cu%sx build of torch" % (version, nvcc_major) in run.output, (run, torch)
    assert "Traceback" not in run.output


@pytest.mark.parametrize("content", [{"notes.txt": "keep me\n"}, {"bin/python": "#!/bin/sh\n", "lib/x": "data\n"}],
                         ids=["a-file", "venv-like-without-pyvenv-cfg"])
def test_existing_dir_that_is_not_a_venv_is_refused(workdir, content):
    """Issue 12 item 9: a directory with files and no pyvenv.cfg is someone's data, not a venv."""
    target = workdir / ("not-a-venv-%d" % len(content))
    for rel, text in content.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_text(text)
    run = run_role(workdir, {"build_deps_venv": str(target), "build_deps_extra_packages": ["sl"]}, name="notvenv")
    assert run.rc != 0, run
    assert "build_deps_venv %s is a directory that is neither empty nor a venv" % target in run.output, run
    assert run.recap["changed"] == 0, run
    for rel, text in content.items():
        assert (target / rel).read_text() == text
    assert not (target / "pyvenv.cfg").exists()
    assert subprocess.call(["dpkg", "-s", "sl"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0


def test_cuda_libraries_the_build_links_are_checked(first_run, workdir, venv):
    """Issue 13: a toolkit without nvrtc, cuBLAS or a driver stub used to pass build_deps; configure and compile then
    failed one by one. Now each missing one is named, and torch's nvidia packages count as a source. Issue 17: where
    neither the driver nor the toolkit's stub is there, build_deps makes a link-only libcuda.so from the toolkit's
    cuda.h inside the venv (never on the system's library path) and the facts give CMake its path; the messages name
    no package of NVIDIA's repositories that Debian lacks."""
    assert first_run.rc == 0, first_run
    facts = first_run.result["gpufleet_toolchain"]["cuda_libraries"]
    assert set(facts) >= {"nvrtc", "cublas", "cublasLt", "driver", "missing", "toolkit_roots", "torch_matches_nvcc"}
    run = run_role(workdir, {"build_deps_venv": venv, "build_deps_cuda_libraries": ["nvrtc", "cublas", "cublasLt", "driver"]},
                   name="cudalibs")
    stub = os.path.join(venv, "lib", "gpufleet-cuda-stub", "libcuda.so")
    if "driver" in facts["missing"]:
        assert os.path.exists(stub), run
        symbols = subprocess.check_output(["nm", "-D", "--defined-only", stub], universal_newlines=True)
        assert " cuInit" in symbols and " cuMemAlloc_v2" in symbols and " cuLaunchKernel" in symbols
        assert "SONAME" in subprocess.check_output(["objdump", "-p", stub], universal_newlines=True)
        assert not any(os.path.exists(os.path.join(d, "libcuda.so")) and os.path.samefile(os.path.join(d, "libcuda.so"), stub)
                       for d in ("/usr/lib", "/usr/lib/x86_64-linux-gnu", "/lib"))
        assert "libcuda.so not found" not in run.output, run
    missing = [name for name in facts["missing"] if name != "driver"]
    if not missing:
        assert run.rc == 0, run
        if run.result:
            driver = run.result["gpufleet_toolchain"]["cuda_libraries"]["driver"]
            assert driver["present"], driver
        return
    assert run.rc != 0, run
    for name in missing:
        assert "%s (" % name in run.output and "found neither in the CUDA toolkit" in run.output, run
    for package in ("cuda-nvrtc-dev", "libcublas-dev", "cuda-driver-dev"):
        assert package not in run.output, run
    assert "Traceback" not in run.output


def test_rerun_with_every_package_installed_never_updates_apt(first_run, workdir, venv):
    """Issue 17: an offline rerun an hour later failed on apt update (build_deps_apt_cache_valid_time). With every
    package already installed, the apt task does not run at all - whatever the cache's age."""
    assert first_run.rc == 0, first_run
    run = run_role(workdir, {"build_deps_venv": venv, "build_deps_apt_cache_valid_time": 0}, name="apt-offline")
    assert run.rc == 0, run
    task = run.output.split("Install the build packages with apt]", 1)[1].split("TASK [", 1)[0]
    assert "skipping: [localhost]" in task, task
