# SPDX-License-Identifier: 0BSD
"""bench/scaling.py: a server pinned to N CPUs and the load to the others; its table, its records, the
server's CPU summed over its whole process group (read once each side of a run), and a bad N refused in one
line."""
import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT, TIMEOUT

import scaling as bench_scaling  # bench/scaling.py, which helpers put on the path

SCALING = ROOT / "bench" / "scaling.py"
two_cores = pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda pid: ())(0)) < 2,
                               reason="one core for the server, one for the load")


def scaling(*args, timeout=TIMEOUT * 12):
    return subprocess.run([sys.executable, str(SCALING), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@two_cores
def test_one_server_at_n_1_prints_its_table_and_keeps_its_records(tmp_path):
    out = tmp_path / "scaling.json"
    done = scaling("echo_epoll.py", "--n", "1", "--shapes", "held", "--reps", "1", "--scale", "0.03",
                   "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| held | echo_epoll.py | 1 | " in done.stdout and "whose limit" in done.stdout
    kept = json.loads(out.read_text())
    run = kept["runs"][0]
    assert run["messages"] == 256 * 12 and run["n"] == 1 and len(run["server_cpus"]) == 1
    assert not set(run["server_cpus"]) & set(run["load_cpus"])
    assert run["msgs_per_s"] > 0 and run["server_cpu_s"] > 0 and run["load_cpu_s"] > 0
    assert kept["summary"][0]["vs_1"] == 1.0 and kept["cpus"] >= 2
    assert kept["machine"] == bench_scaling.provenance()["machine"]  # it names the GIL where a build can turn it off


@pytest.mark.slow
@two_cores
def test_a_process_servers_cpu_is_summed_over_its_workers(tmp_path):
    """echo_reuseport.py with 2 workers on one core: its parent only waits, its workers echo."""
    out = tmp_path / "scaling.json"
    done = scaling("echo_reuseport.py --workers 2", "--n", "1", "--shapes", "held", "--reps", "1", "--scale",
                   "0.1", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    run = json.loads(out.read_text())["runs"][0]
    assert run["server"] == "echo_reuseport.py --workers 2"
    assert run["server_cpu_s"] > run["leader_cpu_s"] + 0.05, run


def test_a_run_reads_the_servers_group_once_each_side_and_takes_the_leader_from_that_reading(monkeypatch,
                                                                                          client_module):
    """run_client() (bench/common.py, which scaling.py measures through): one reading of the server's group before
    the load and one after, the whole group's CPU and its leader's (a pool's parent) both from it, so that the two
    figures are of the same instant."""
    readings = [client_module.CPU(1.0, 1e-9, each=((4321, 1, 0.25), (4322, 4321, 0.75))),
                client_module.CPU(3.5, 1e-9, each=((4321, 1, 0.5), (4322, 4321, 3.0)))]
    taken = []

    def group_cpu(pgid, *args, **kwargs):
        taken.append(pgid)  # a third reading or more is counted, and given the last one
        return readings[min(len(taken), len(readings)) - 1]

    import common  # bench/common.py, whose client.py run_client() reads the server's CPU with
    monkeypatch.setattr(common.client, "group_cpu", group_cpu)
    run = bench_scaling.run_client(server=4321, command=[sys.executable, "-c", "print('{\"messages\": 1000}')"])
    assert taken == [4321, 4321], taken
    assert run.server_cpu_s == 2.5 and run.leader_cpu_s == 0.25 and run.figures == {"messages": 1000}, vars(run)


@pytest.mark.parametrize("n", ["0", str(len(set(getattr(os, "sched_getaffinity", lambda pid: {0})(0)))), "x"])
def test_a_bad_n_is_one_line_and_exit_2(n):
    done = scaling("echo_epoll.py", "--n", n, timeout=TIMEOUT)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
