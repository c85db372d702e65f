"""Flat memory is part of correct (STYLE.md, habit 17): a short soak of every server.

The long one is a command: python3 tests/soak.py echo_prethread.py --warmup 3000 --connections 100000
"""
import pytest

import soak
from helpers import SERVERS

WARMUP = 1500  # thread stacks, arenas, caches: what a server keeps once it has met the mix
CONNECTIONS = 3000  # then measured: a leak of 0.8 KB/connection grows 2.3 MiB here
MAX_GROWTH_KIB = 1024  # the flat servers grew at most 0.4 MiB over these counts, in ten runs each


@pytest.mark.parametrize("script", SERVERS)
def test_memory_and_descriptors_stay_flat(script):
    result = soak.soak(script, warmup=WARMUP, connections=CONNECTIONS, step=CONNECTIONS,
                       max_growth_kib=MAX_GROWTH_KIB, time_limit=120)
    assert result["passed"], "{}\n{}".format(result["verdict"], "\n".join(
        "{label} {done}: {metric} {mem_kib} KiB, fds {fds}, procs {procs}".format(metric=result["metric"], **s)
        for s in result["samples"]))
