"""The Go-template subset that renders OCM's operator manifests for the testbed."""

from __future__ import annotations

import pytest

from testbed.gotemplate import TemplateError, render

DOC = """\
metadata:
  name: open-cluster-management:{{ .Name }}-work:agent
  labels:
    {{ if gt (len .Labels) 0 }}
    {{ range $key, $value := .Labels }}
    "{{ $key }}": "{{ $value }}"
    {{ end }}
    {{ end }}
  {{ if .Arn }}
  annotations: {role: "{{ .Arn }}"}
  {{ else }}
  annotations: {}
  {{end}}
"""


def test_fields_conditions_and_empty_ranges() -> None:
    out = render(DOC, {".Name": "klusterlet"}, {"gt (len .Labels) 0": False, ".Arn": False})
    assert "name: open-cluster-management:klusterlet-work:agent" in out
    assert "$key" not in out and "range" not in out
    assert "annotations: {}" in out and "role" not in out


def test_a_true_condition_renders_its_branch_and_needs_its_values() -> None:
    with pytest.raises(TemplateError, match=r"no value for \.Arn"):
        render(DOC, {".Name": "k"}, {"gt (len .Labels) 0": False, ".Arn": True})
    out = render(DOC, {".Name": "k", ".Arn": "r"}, {"gt (len .Labels) 0": False, ".Arn": True})
    assert 'annotations: {role: "r"}' in out and "annotations: {}" not in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{{ if .New }}x{{ end }}", "unknown condition"),
        ("{{ if .A }}x", "unclosed block"),
        ("x{{ end }}", "without a block"),
        ("{{ template \"t\" }}", "unsupported action"),
        ("{{ $x }}", "outside a range"),
    ],
)
def test_anything_outside_the_subset_fails_loudly(text: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(text, {}, {".A": True})
