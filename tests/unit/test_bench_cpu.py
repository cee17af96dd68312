"""The CPU sampler of ``bench/cpu.py``: names, parsing, and what each program used."""

from __future__ import annotations

import os

from bench.cpu import (
    Sample,
    by_module,
    by_program,
    cluster_role,
    module_of,
    parse_stat,
    program_name,
)


def test_programs_are_named_by_executable_or_by_what_python_runs() -> None:
    assert program_name(["/cache/bin/kube-apiserver", "--etcd-servers=x"], "kube-apiserver") == (
        "kube-apiserver")
    assert program_name(["/v/bin/python3", "-m", "pytest", "-q"], "python3") == "python -m pytest"
    assert program_name(["/v/bin/python", "-u", "/x/kserve_sklearn.py", "--port"], "python") == (
        "python kserve_sklearn.py")
    assert program_name([], "kworker/0:1") == "kworker/0:1"


def test_a_stat_line_gives_user_plus_system_time_and_the_start_time() -> None:
    # /proc/<pid>/stat: utime and stime are fields 14 and 15, starttime 22 (1-based); a
    # command name may hold spaces and parentheses.
    fields = ["S", "1", "1", "1", "0", "-1", "4194560", "0", "0", "0", "0",
              "250", "150", "0", "0", "20", "0", "1", "0", "98765"]
    stat = "4242 (odd (name) x) " + " ".join(fields) + " 0 0"
    sample = parse_stat("4242", stat, b"/bin/etcd\0--name=t\0")
    assert sample.program == "etcd" and sample.started == "98765"
    assert abs(sample.cpu - 400 / os.sysconf("SC_CLK_TCK")) < 1e-9


def test_each_program_counts_what_its_processes_used_during_the_run() -> None:
    first = [Sample("1", "10", "etcd", 5.0), Sample("2", "11", "kube-apiserver", 7.0)]
    last = [
        Sample("1", "10", "etcd", 6.5),            # ran before: only what it used since
        Sample("2", "11", "kube-apiserver", 9.0),
        Sample("3", "50", "kube-apiserver", 4.0),  # started during the run: all of it
        Sample("2", "99", "kubectl", 0.5),         # pid 2 reused by another process
    ]
    assert by_program(first, last) == [("kube-apiserver", 6.0), ("etcd", 1.5), ("kubectl", 0.5)]


def test_a_testbed_clusters_processes_are_named_with_its_role() -> None:
    assert cluster_role(["/b/kube-apiserver", "--etcd-prefix=/hub", "--secure-port=1"]) == "hub"
    assert cluster_role(["/b/kube-apiserver", "--etcd-prefix=/cluster2"]) == "spoke"
    assert cluster_role(["/b/work", "agent", "--kubeconfig=/tmp/testbed-x/cluster1/w.kc"]) == (
        "spoke")
    assert cluster_role(["/b/etcd", "--data-dir=/tmp/testbed-x/etcd"]) == ""
    fields = ["S"] + ["0"] * 18 + ["7"]
    stat = "9 (kube-apiserver) " + " ".join(fields)
    assert parse_stat("9", stat, b"/b/kube-apiserver\0--etcd-prefix=/cluster1\0").program == (
        "kube-apiserver [spoke]")


def test_a_process_is_charged_to_the_test_module_that_started_it() -> None:
    environ = (b"HOME=/root\0PYTEST_CURRENT_TEST=tests/integration/test_e2e.py::"
               b"test_demo_flow (call)\0PATH=/bin\0")
    assert module_of(environ) == "test_e2e.py"
    assert module_of(b"HOME=/root\0") == "-"
    first = [Sample("1", "10", "etcd", 5.0, "test_e2e.py")]
    last = [Sample("1", "10", "etcd", 7.0, "test_e2e.py"),
            Sample("2", "20", "kube-apiserver [spoke]", 3.0, "test_e2e.py"),
            Sample("3", "30", "kube-apiserver [spoke]", 4.0, "test_rollout.py")]
    assert by_module(first, last) == [
        (("test_rollout.py", "kube-apiserver [spoke]"), 4.0),
        (("test_e2e.py", "kube-apiserver [spoke]"), 3.0),
        (("test_e2e.py", "etcd"), 2.0)]
