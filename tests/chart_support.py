"""Running the real helm binary against the chart (the testbed's own chart helpers)."""

from __future__ import annotations

from testbed.chart import CHART, helm, render

__all__ = ["CHART", "helm", "render"]
