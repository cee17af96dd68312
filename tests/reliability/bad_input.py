"""Generated intents, valid and invalid, and what a valid ManifestWork is.

Shared by tests/reliability/test_bad_input.py (the manager's pure path, and a sample through
a real API server). An intent is generated from one of the good objects of
tests/data/admission_cases.yaml of its kind, then given a name, per-cluster overrides, and
0-3 mutations: a field set to a plausible value (taken from the good objects), to a nasty
one (wrong type, out of range, bad name, oversized string), an unknown field added, or a
field deleted. The generator records which paths it touched, so a rejection can be checked
to name one of them.
"""

from __future__ import annotations

import copy
import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from addon_api import constants as c
from addon_api.base import DNS_LABEL_RE, DNS_SUBDOMAIN_RE

ROOT = Path(__file__).resolve().parents[2]
CASES: dict[str, Any] = yaml.safe_load(
    (ROOT / "tests" / "data" / "admission_cases.yaml").read_text()
)
HUB_KINDS: tuple[str, ...] = tuple(c.HUB_KINDS)
GOOD: dict[str, list[dict[str, Any]]] = {
    kind: [obj for _, obj in sorted(CASES["good"].items()) if obj["kind"] == kind]
    for kind in HUB_KINDS
}

CLUSTER_LABELS: dict[str, dict[str, str]] = {
    "cluster1": {"environment": "production", "region": "eu-west-1", "gpu": "true"},
    "cluster2": {"environment": "staging", "region": "us-east-1"},
    "cluster3": {},
}
"""The clusters every generated intent is rendered for, with their ManagedCluster labels."""

Path_ = tuple[str | int, ...]


# Values ------------------------------------------------------------------------------------------


def _harvest() -> dict[str, list[Any]]:
    """Every value found under each key name in the good objects (plausible replacements)."""
    out: dict[str, list[Any]] = defaultdict(list)

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                if sub not in out[key]:
                    out[key].append(copy.deepcopy(sub))
                walk(sub)
        elif isinstance(value, list):
            for sub in value:
                walk(sub)

    for objs in GOOD.values():
        for obj in objs:
            walk(obj["spec"])
    return dict(out)


PLAUSIBLE = _harvest()

BAD_NAMES = [
    "", "Team_A", "-a", "a-", "UPPER", "a..b", "a.-b", "ü", "a b", "a/b", "1" * 64, "a" * 254,
]
NASTY_SCALARS: list[Any] = [
    None, True, False, 0, -1, 1, 11, 101, 2**31, 2**63 - 1, -(2**63), 1.5, -0.5, 1e300,
    "", " ", "1", "true", "null", "lots", "1e400", "-", "\u0000", "\U0001f600",
    "x" * 64, "x" * 254, "x" * 1025, "x" * 2049, "x" * 32769, *BAD_NAMES,
]
HUGE = 600_000
"""Characters of an oversized string: more than a ManifestWork may carry (500 KiB)."""
UNKNOWN_KEYS = ["unknownField", "platfrom", "x", "", "a.b", "spec", "status"]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
nasty = st.one_of(
    st.sampled_from(NASTY_SCALARS), json_value, st.sampled_from([[], {}, [None]])
).map(copy.deepcopy)  # never share a mutable value between examples


def plausible_for(key: str | int) -> st.SearchStrategy[Any]:
    """A value the good objects have under ``key`` (any value if they have none)."""
    values = PLAUSIBLE.get(str(key))
    if not values:
        return nasty
    return st.sampled_from(values).map(copy.deepcopy)


# Names ------------------------------------------------------------------------------------------

_label = st.from_regex(re.compile(r"[a-z]([-a-z0-9]{0,14}[a-z0-9])?"), fullmatch=True)


def _long_name(n: int) -> str:
    """A DNS subdomain of exactly ``n`` characters, made of labels of up to 63."""
    parts, left = [], n
    while left > 0:
        size = min(63, left)
        if left - size == 1:  # never leave a lone separator
            size -= 1
        parts.append("m" * size)
        left -= size + 1
    return ".".join(parts)[:n].rstrip(".-")


valid_names = st.one_of(
    _label,
    st.lists(_label, min_size=2, max_size=4).map(".".join).filter(lambda s: len(s) <= 253),
    st.integers(min_value=40, max_value=253).map(_long_name),
)
"""Names the API server accepts for any object (RFC 1123 subdomains, up to 253)."""
valid_namespaces = st.one_of(
    st.sampled_from(["team-a", "ml-fleet"]),
    st.integers(min_value=1, max_value=63).map(lambda n: "n" * n),
)


# Overrides ---------------------------------------------------------------------------------------


def spec_paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every path into ``value`` (dict keys and list indices), parents first."""
    if isinstance(value, dict):
        for key, sub in value.items():
            yield (*prefix, key)
            yield from spec_paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield (*prefix, i)
            yield from spec_paths(sub, (*prefix, i))


def get_path(value: Any, path: Path_) -> Any:
    """The value at ``path``."""
    for part in path:
        value = value[part]
    return value


def set_path(value: Any, path: Path_, new: Any) -> None:
    """Set (or add) the value at ``path``; its parent must exist."""
    get_path(value, path[:-1])[path[-1]] = new


def del_path(value: Any, path: Path_) -> None:
    """Delete the value at ``path``."""
    del get_path(value, path[:-1])[path[-1]]


@st.composite
def patches(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch of ``spec``: 1-3 fields set (plausible or nasty) or removed (null)."""
    out: dict[str, Any] = {}
    routing = ("placementRef", "overrides")
    paths = [p for p in spec_paths(spec) if p[0] not in routing] or [("unknownField",)]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(paths))
        cut = next((i for i, p in enumerate(path) if isinstance(p, int)), len(path))
        if cut < len(path):  # merge patches replace lists whole: send the list, one item changed
            whole = copy.deepcopy(get_path(spec, path[:cut]))
            set_path(whole, path[cut:], draw(st.one_of(plausible_for(path[-1]), nasty)))
            path, value = path[:cut], whole
        else:
            value = draw(st.one_of(plausible_for(path[-1]), nasty, st.none()))
        node = out
        for part in path[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = node[part] = {}
            node = nxt
        node[path[-1]] = value
    if draw(st.integers(min_value=0, max_value=9)) == 0:  # what an override may not touch
        out[draw(st.sampled_from(routing))] = draw(json_value)
    return out


selector = st.fixed_dictionaries(
    {},
    optional={
        "matchLabels": st.dictionaries(
            st.sampled_from(["environment", "region", "gpu", "Bad Key"]),
            st.sampled_from(["production", "staging", "eu-west-1", "true", "x" * 64]),
            max_size=2,
        ),
        "matchExpressions": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.sampled_from(["environment", "region", "gpu", ""]),
                    "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Is"]),
                },
                optional={
                    "values": st.lists(st.sampled_from(["production", "eu-west-1", "true"]),
                                       max_size=2)
                },
            ),
            max_size=2,
        ),
    },
)


@st.composite
def overrides(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """One override: some clusters (by name and/or selector) and a patch."""
    out: dict[str, Any] = {}
    if draw(st.booleans()):
        out["clusterNames"] = draw(
            st.lists(st.sampled_from([*CLUSTER_LABELS, *CLUSTER_LABELS, "cluster9", "Bad_Name"]),
                     max_size=3)
        )
    if draw(st.booleans()):
        out["clusterSelector"] = draw(selector)
    if draw(st.integers(min_value=0, max_value=19)):
        out["patch"] = draw(patches(spec))
    elif draw(st.booleans()):
        out["patch"] = draw(nasty)  # not an object
    return out


# Intents -----------------------------------------------------------------------------------------


@dataclass
class Generated:
    """A generated intent and the paths the generator changed from a good object."""

    obj: dict[str, Any]
    touched: list[Path_]
    base: str
    """kind and name of the good object it started from."""

    @property
    def kind(self) -> str:
        """Kind of the intent."""
        return str(self.obj["kind"])


@st.composite
def mutation(draw: st.DrawFn, obj: dict[str, Any]) -> Path_:
    """Change ``obj`` in place once; return the path changed."""
    paths = [("spec", *p) for p in spec_paths(obj["spec"])]
    path = draw(st.sampled_from([("spec",), *paths]))
    node = get_path(obj, path)
    op = draw(st.sampled_from(["plausible", "plausible", "nasty", "unknown", "delete", "huge"]))
    if op == "huge" and isinstance(node, str):  # accepted where the schema is open
        set_path(obj, path, "x" * HUGE)
        return path
    if op == "unknown" and isinstance(node, dict):
        key = draw(st.sampled_from(UNKNOWN_KEYS))
        node[key] = draw(json_value)
        return (*path, key)
    if op == "delete" and len(path) > 1:
        del_path(obj, path)
        return path
    if len(path) == 1:
        return path
    value = draw(plausible_for(path[-1]) if op == "plausible" else nasty)
    set_path(obj, path, value)
    return path


@st.composite
def intents(
    draw: st.DrawFn,
    *,
    names: st.SearchStrategy[str] = valid_names,
    kinds: tuple[str, ...] = HUB_KINDS,
    max_mutations: int = 3,
) -> Generated:
    """A hub intent of any kind, valid or not (see the module docstring)."""
    kind = draw(st.sampled_from(kinds))
    base = draw(st.sampled_from(GOOD[kind]))
    obj = copy.deepcopy(base)
    touched: list[Path_] = []
    name = draw(st.one_of(st.just(obj["metadata"]["name"]), names))
    if name != obj["metadata"]["name"]:
        touched.append(("metadata", "name"))
    obj["metadata"] = {"name": name, "namespace": draw(valid_namespaces)}
    if draw(st.booleans()):
        spec = obj["spec"]
        spec["overrides"] = draw(st.lists(overrides(spec), max_size=3))
        touched.append(("spec", "overrides"))
    for _ in range(draw(st.integers(min_value=0, max_value=max_mutations))):
        touched.append(draw(mutation(obj)))
    return Generated(obj, touched, f"{kind}/{base['metadata']['name']}")


# Checks ------------------------------------------------------------------------------------------

QUALIFIED_NAME_RE = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
LABEL_VALUE_RE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"


def is_subdomain(value: Any) -> bool:
    """An RFC 1123 subdomain (most object names)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 253
        and re.fullmatch(DNS_SUBDOMAIN_RE, value) is not None
    )


def is_label(value: Any) -> bool:
    """An RFC 1123 label (namespaces)."""
    return (
        isinstance(value, str) and 0 < len(value) <= 63 and re.fullmatch(DNS_LABEL_RE, value)
        is not None
    )


def label_problems(labels: Any) -> list[str]:
    """What makes ``labels`` invalid as Kubernetes labels (empty when valid)."""
    if not isinstance(labels, dict):
        return [f"labels is {type(labels).__name__}"]
    out = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if prefix and not is_subdomain(prefix):
            out.append(f"label key prefix {prefix!r}")
        if not (0 < len(name) <= 63 and re.fullmatch(QUALIFIED_NAME_RE, name)):
            out.append(f"label key {key!r}")
        if not isinstance(value, str) or len(value) > 63 or not re.fullmatch(
            LABEL_VALUE_RE, value
        ):
            out.append(f"label {key} value {value!r} ({len(str(value))} characters)")
    return out


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact JSON."""
    return len(json.dumps(value, separators=(",", ":")).encode())
