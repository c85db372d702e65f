# SPDX-License-Identifier: 0BSD
"""Flat memory is part of correct (STYLE.md, habit 17): a short soak of every server.

The long one is a command: python3 bench/soak.py echo_prethread.py --warmup 3000 --connections 100000
"""
import pytest

from helpers import SERVERS, TLS_SERVERS  # first: it puts bench/ on the path
import soak  # bench/soak.py  # noqa: E402

pytestmark = pytest.mark.slow  # every test here starts a server and loads it

# Measured on 2 cores, Pythons 3.9-3.13, with these counts: the servers that stay flat grew
# at most 0.35 MiB; a leak of 0.8 KB/connection grows 2.3 MiB. About 2 s a server, 9 s for
# echo_fork.py (a fork per connection): 30-40 s in all.
WARMUP = 1500  # thread stacks, arenas, caches: what a server keeps once it has met the mix
CONNECTIONS = 3000  # then measured
MAX_GROWTH_KIB = 1024  # the bound for 9,000 connections, here over 3,000


@pytest.mark.parametrize("script", SERVERS)
def test_memory_and_descriptors_stay_flat(script):
    if script in TLS_SERVERS:
        pytest.skip("soak.py's mixed load speaks raw TCP (resets, pipelined, connect-and-close): not TLS yet")
    result = soak.soak(script, warmup=WARMUP, connections=CONNECTIONS, step=CONNECTIONS,
                       max_growth_kib=MAX_GROWTH_KIB, time_limit=120)
    assert result["passed"], "{}\n{}".format(result["verdict"], "\n".join(
        "{label} {done}: {metric} {mem_kib} KiB, fds {fds}, procs {procs}".format(metric=result["metric"], **s)
        for s in result["samples"]))
