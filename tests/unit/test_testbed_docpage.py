"""The docs tests' reading of a page (testbed.support.docpage), without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from testbed.support.docpage import steps

PAGE = '''# Title

## 1. Install

```sh
kubectl create namespace ml-fleet
helm install x charts/y \\
  --set 'a={b}' \\
  --set-json 'c={"d":["e"]}'   # a comment
```

## 2. Enable

```yaml
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
kind: ConfigMap
```

```python
not run
```
'''


def test_commands_join_continuations_and_drop_comments_under_their_heading() -> None:
    found = steps(PAGE)
    assert [s.argv for s in found if s.argv] == [
        ("kubectl", "create", "namespace", "ml-fleet"),
        ("helm", "install", "x", "charts/y", "--set", "a={b}", "--set-json",
         'c={"d":["e"]}'),
    ]
    assert [(s.heading, s.line) for s in found] == [
        ("1. Install", 6), ("1. Install", 7), ("2. Enable", 15)]
    assert found[2].objects == ({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "a"}}, {"kind": "ConfigMap"})


def test_a_broken_command_or_block_names_its_line() -> None:
    with pytest.raises(ValueError, match="line 2: No closing quotation"):
        steps("```sh\necho 'open\n```\n")
    with pytest.raises(ValueError, match="line 1: a ``` block is never closed"):
        steps("```sh\nls\n")


def test_the_hub_setup_page_reads() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "hub-setup.md"
    programs = {s.argv[0] for s in steps(page.read_text()) if s.argv}
    assert programs == {"kubectl", "helm", "clusteradm"}


def test_the_readers_variables_are_expanded_as_a_shell_would() -> None:
    page = ('```sh\nkubectl --kubeconfig "$HUB" get x\n'
            'tool predict a $VIA --kubeconfig "${HUB}" $UNSET\n```\n')
    env = {"HUB": "/tmp/a b/hub.kubeconfig", "VIA": "--via c1=http://h:1 --via c2=http://h:2"}
    got = [s.argv for s in steps(page, env)]
    assert got == [
        ("kubectl", "--kubeconfig", "/tmp/a b/hub.kubeconfig", "get", "x"),
        ("tool", "predict", "a", "--via", "c1=http://h:1", "--via", "c2=http://h:2",
         "--kubeconfig", "/tmp/a b/hub.kubeconfig", "$UNSET"),
    ]
    assert steps(page)[0].argv[2] == "$HUB"  # nothing set: as written
