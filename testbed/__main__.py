"""``python -m testbed``: build binaries, or bring a local fleet up."""

from __future__ import annotations

import sys

from testbed.cli import main

sys.exit(main(sys.argv[1:]))
