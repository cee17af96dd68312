"""``python -m model_serving_addon``: the same as the ``model-serving-addon`` executable."""

from __future__ import annotations

import sys

from model_serving_addon.cli import main

if __name__ == "__main__":
    sys.exit(main())
