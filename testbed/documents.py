"""YAML texts as the harness reads them: parsed once, then kept as JSON for every later read.

The harness reads the same large YAML texts over and over: OCM's and KServe's CRDs on every
fleet start, the agent's rendered bundles, the chart's renders. PyYAML builds the Python
objects in Python even over libyaml (a KServe CRD file of a few megabytes costs seconds of
CPU), and each of ``make test``'s workers did it again: a py-spy profile of one run's four test
processes (2026-12-06) had 38 % of their samples in PyYAML. JSON is read in C.

So the documents of a text are kept as JSON in the testbed's cache (:func:`testbed.paths.
cache_dir`), under the sha256 of the text: every process and every later run reads them from
there. A text whose documents JSON would change (a date, a key that is not a string) is parsed
each time instead; an unreadable cache entry is parsed again and replaced. Each call returns
new objects, which the caller may change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from testbed.paths import cache_dir

KEPT = 256
"""Entries kept in the cache: the least recently read go first (a run reads about 60)."""


def load_all(text: str) -> list[Any]:
    """Every document of a YAML text, as ``list(yaml.safe_load_all(text))`` (empty ones too)."""
    path = _entry(text)
    with contextlib.suppress(OSError, ValueError):
        docs: list[Any] = json.loads(path.read_bytes())
        with contextlib.suppress(OSError):
            os.utime(path)  # recently read: kept when the cache is pruned
        return docs
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = list(yaml.load_all(text, Loader=loader))
    try:
        encoded = json.dumps(docs)
    except (TypeError, ValueError):
        return docs
    if json.loads(encoded) == docs:
        _store(path, encoded)
    return docs


def load(text: str) -> Any:
    """The one document of a YAML text, as ``yaml.safe_load`` (None for an empty text).

    Raises ValueError for a text of several documents.
    """
    docs = load_all(text)
    if len(docs) > 1:
        raise ValueError(f"expected one YAML document, found {len(docs)}")
    return docs[0] if docs else None


def load_file(path: Path) -> list[Any]:
    """Every document of a YAML file (:func:`load_all`)."""
    return load_all(path.read_text())


def directory() -> Path:
    """Where the documents are kept."""
    return cache_dir() / "yaml-as-json"


def _entry(text: str) -> Path:
    return directory() / f"{hashlib.sha256(text.encode()).hexdigest()}.json"


def _store(path: Path, encoded: str) -> None:
    """Write an entry atomically (other workers read the same ones), then prune."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as out:
            out.write(encoded)
        os.replace(tmp, path)
    except OSError:
        return  # a read-only or full cache: parse each time
    _prune(path.parent)


def _prune(root: Path) -> None:
    entries = []
    for entry in root.glob("*.json"):
        with contextlib.suppress(OSError):
            entries.append((entry.stat().st_mtime, entry))
    entries.sort(reverse=True)
    for _, entry in entries[KEPT:]:
        with contextlib.suppress(OSError):
            entry.unlink()
