"""``python -m addon_cli.troubleshooting``: write docs/troubleshooting.md's generated blocks."""

import sys

from addon_cli.troubleshooting.doc import main

sys.exit(main())
