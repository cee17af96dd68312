"""YAML texts parsed once and kept as JSON (testbed.documents)."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import pytest
import yaml

from testbed import documents

TEXT = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
data: {x: "1", y: "on"}
---
---
apiVersion: v1
kind: List
items: [{kind: Secret, metadata: {name: b}}]
"""


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MODEL_SERVING_ADDON_CACHE", str(tmp_path))
    return tmp_path


def _entries() -> list[Path]:
    return sorted(documents.directory().glob("*.json"))


def test_the_documents_are_pyyamls_and_kept_for_the_next_read() -> None:
    first = documents.load_all(TEXT)
    assert first == list(yaml.safe_load_all(TEXT))  # the empty document too
    (entry,) = _entries()
    entry.write_text('[{"kept": true}]')  # what the next read returns is the entry's
    assert documents.load_all(TEXT) == [{"kept": True}]


def test_each_read_returns_new_objects() -> None:
    a, b = documents.load_all(TEXT), documents.load_all(TEXT)
    a[0]["data"]["x"] = "changed"
    assert b[0]["data"]["x"] == "1" and documents.load_all(TEXT)[0]["data"]["x"] == "1"


def test_a_text_json_would_change_is_parsed_each_time() -> None:
    dated = "when: 2026-12-06\n"
    keyed = "1: one\n"
    assert documents.load(dated) == {"when": datetime.date(2026, 12, 6)}
    assert documents.load(keyed) == {1: "one"}
    assert _entries() == []


def test_an_unreadable_entry_is_parsed_again_and_replaced() -> None:
    documents.load_all(TEXT)
    (entry,) = _entries()
    entry.write_text('[{"trunc')
    assert documents.load_all(TEXT) == list(yaml.safe_load_all(TEXT))
    assert documents.load_all(TEXT) == list(yaml.safe_load_all(TEXT))
    assert _entries() == [entry] and entry.read_text().startswith('[{"apiVersion"')


def test_load_is_one_document_or_none() -> None:
    assert documents.load("") is None
    assert documents.load("a: 1\n") == {"a": 1}
    with pytest.raises(ValueError, match="one YAML document, found 2"):
        documents.load("a: 1\n---\nb: 2\n")


def test_the_least_recently_read_entries_go(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents, "KEPT", 2)
    documents.load("a: 1\n")
    documents.load("b: 2\n")
    old = _entries()
    for number, entry in enumerate(old):
        os.utime(entry, (1000 + number, 1000 + number))
    documents.load("a: 1\n")  # read again: now the newest
    documents.load("c: 3\n")
    assert len(_entries()) == 2
    assert documents.load("a: 1\n") == {"a": 1}
    assert documents._entry("b: 2\n") not in _entries()


def test_a_cache_that_cannot_be_written_still_parses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("MODEL_SERVING_ADDON_CACHE", str(blocked))  # no directory under a file
    assert documents.load_all(TEXT) == list(yaml.safe_load_all(TEXT))
    assert documents.load_all(TEXT) == list(yaml.safe_load_all(TEXT))
