# SPDX-License-Identifier: 0BSD
"""A file copied alone carries its terms: every .py file the pack ships (the servers, client.py,
bench/, tests/) has LICENSE's SPDX line as its first line (its second, after a shebang)."""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPDX_LINE = "# SPDX-License-Identifier: 0BSD"
SHIPPED = sorted({path.relative_to(ROOT).as_posix()
                  for pattern in ("*.py", "bench/**/*.py", "tests/**/*.py") for path in ROOT.glob(pattern)})


def test_the_licence_is_0bsd():
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("BSD Zero Clause License\n")
    assert "Permission to use, copy, modify, and/or distribute this software for any\npurpose with or " \
           "without fee is hereby granted." in text


def test_the_shipped_files_are_found():
    assert {"client.py", "echo_epoll.py", "bench/regenerate.py", "tests/helpers.py", "tests/test_licence.py"} \
        <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_file_carries_the_spdx_line(name):
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()[:2]
    top = lines[1:2] if lines[:1] and lines[0].startswith("#!") else lines[:1]
    assert top == [SPDX_LINE], "{}: the first line (after a shebang) must be {!r}".format(name, SPDX_LINE)
