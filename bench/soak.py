# SPDX-License-Identifier: 0BSD
"""Soak: tens of thousands of mixed connections against one server, its memory sampled.

    python3 bench/soak.py echo_prethread.py --warmup 3000 --connections 100000 --step 25000 [--threads 8] [--json]

The mix, the samples and the verdict are tests/soak.py's (tests/test_soak.py runs it short); this is
its command. Exit status 0 on PASS, 1 on FAIL.
"""
import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import soak  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", help="an echo_*.py of the repository, or the path of a changed copy to try")
    parser.add_argument("--warmup", type=int, default=3000, help="connections before the measure (default: 3000)")
    parser.add_argument("--connections", type=int, default=9000, help="connections measured (default: 9000)")
    parser.add_argument("--step", type=int, default=3000, help="connections between samples (default: 3000)")
    parser.add_argument("--threads", type=int, help="client threads (default: 8; 2 for echo_simple.py)")
    parser.add_argument("--max-growth", type=int, metavar="KIB",
                        help="memory growth allowed after the warm-up (default: 1024 up to 9,000 connections, "
                             "2048 above)")
    parser.add_argument("--time-limit", type=float, default=1800.0, help="seconds for the whole soak (default: 1800)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    parser.add_argument("server_args", nargs="*", help="after --: more arguments for the server")
    args = parser.parse_args()
    name = os.path.basename(args.script)  # a path elsewhere (a changed copy) runs as its name would
    source = args.script if os.path.dirname(args.script) else None
    result = soak.soak(name, args.warmup, args.connections, max(1, args.step), args.threads,
                  args.max_growth, args.time_limit, report=lambda line: print(line, flush=True),
                  server_args=args.server_args, source=source)
    if args.json:
        print(json.dumps(result))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
