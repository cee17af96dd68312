"""The in-process ``kubectl get -o json``: argument parsing and type names (pure)."""

from __future__ import annotations

import pytest

from testbed import reading
from testbed.reading import NotHandled, Query, Reader, index, parse


def test_parse_reads_what_kubectl_get_takes() -> None:
    assert parse(("msv", "kserve", "-n", "ns1", "-o", "json")) == Query(
        ("msv",), "kserve", "ns1", False, None
    )
    assert parse(("manifestworks", "-A", "-l", "a=b,c=d", "-o", "json")) == Query(
        ("manifestworks",), None, None, True, "a=b,c=d"
    )
    assert parse(("crd/x.example.com", "--output=json")) == Query(
        ("crd",), "x.example.com", None, False, None
    )
    assert parse(("msv,sconn", "--namespace=t", "-ojson")).types == ("msv", "sconn")


@pytest.mark.parametrize(
    "args",
    [
        ("msv", "a"),  # table output: kubectl's
        ("msv", "-o", "yaml"),
        ("msv", "-o", "jsonpath={.items}"),
        ("--raw=/readyz",),
        ("msv", "a", "b", "-o", "json"),  # several names
        ("msv,sconn", "a", "-o", "json"),
        ("msv", "--field-selector=x", "-o", "json"),
    ],
)
def test_anything_else_is_left_to_kubectl(args: tuple[str, ...]) -> None:
    with pytest.raises(NotHandled):
        parse(args)


def test_types_resolve_by_every_name_core_group_first() -> None:
    found = index(
        [
            ("", "v1", [
                {"name": "events", "kind": "Event", "namespaced": True, "singularName": "event",
                 "shortNames": ["ev"]},
                {"name": "pods/log", "kind": "Pod", "namespaced": True},
            ]),
            ("events.k8s.io", "v1", [
                {"name": "events", "kind": "Event", "namespaced": True, "singularName": "event"},
            ]),
            ("serving.kserve.io", "v1beta1", [
                {"name": "inferenceservices", "kind": "InferenceService", "namespaced": True,
                 "singularName": "inferenceservice", "shortNames": ["isvc"]},
            ]),
        ]
    )
    assert found["events"].group == ""
    assert found["ev"].group == ""
    assert found["events.events.k8s.io"].group == "events.k8s.io"
    for name in ("isvc", "inferenceservice", "inferenceservices", "InferenceService".lower(),
                 "inferenceservices.serving.kserve.io", "isvc.v1beta1.serving.kserve.io"):
        assert found[name].path("ns", "iris") == (
            "/apis/serving.kserve.io/v1beta1/namespaces/ns/inferenceservices/iris"
        )
    assert "pods/log" not in found
    assert found["event"].path(None, None) == "/api/v1/events"


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "x-"}},
    {"kind": "ConfigMap", "metadata": {"name": "x"}},
    {"apiVersion": "v1", "metadata": {"name": "x"}},
])
def test_an_object_apply_cannot_address_is_left_to_kubectl(obj: dict[str, object]) -> None:
    """No request is made (there is no API server here): kubectl says what is wrong."""
    with pytest.raises(NotHandled):
        Reader(api_client=None).apply([obj], "testbed", timeout=1)


def test_served_resources_are_the_plural_and_group_of_aggregated_discovery() -> None:
    discovery = {"kind": "APIGroupDiscoveryList", "items": [
        {"metadata": {"name": "serving.kserve.io"}, "versions": [
            {"version": "v1beta1", "resources": [{"resource": "inferenceservices"}]},
            {"version": "v1alpha1", "resources": [{"resource": "servingruntimes"},
                                                  {"resource": "inferenceservices"}]}]},
        {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": []}]}]}
    assert reading.served_resources(discovery) == {
        "inferenceservices.serving.kserve.io", "servingruntimes.serving.kserve.io"}


def test_a_plain_group_list_is_not_aggregated_discovery() -> None:
    with pytest.raises(reading.NotHandled, match="APIGroupList"):
        reading.served_resources({"kind": "APIGroupList", "groups": []})


def test_warning_headers_are_the_texts_kubectl_prints() -> None:
    assert reading.warning_texts(['299 - "unknown field \\"bogus\\""', '299 - "a", 299 x "b"']) \
        == ['unknown field "bogus"', "a", "b"]
    assert reading.warning_texts(["not a warning"]) == []


@pytest.mark.parametrize("args", [
    ("delete", "ns", "x", "--as=alice"),  # a tenant's request: always kubectl
    ("delete", "ns", "x", "--grace-period=0"),
    ("label", "ns", "x", "a=b", "-l", "k=v"),
    ("patch", "cm", "a", "--patch-file=p.json"),
    ("create", "-f", "objects.yaml"),
    ("apply", "-f", "-"),
])
def test_writes_the_writer_does_not_know_are_left_to_kubectl(args: tuple[str, ...]) -> None:
    """Decided from the command line alone: no request (there is no API server here)."""
    from testbed.writing import Writer

    with pytest.raises(NotHandled):
        Writer(Reader(api_client=None)).run(args, "{}" if args[0] == "create" else None, 1)


def _invalid(*causes: tuple[str, str], name: str = "s") -> dict[str, object]:
    return {"kind": "Status", "reason": "Invalid", "message": "whatever the server says",
            "details": {"kind": "Service", "name": name,
                        "causes": [{"field": f, "message": m} for f, m in causes]}}


def test_a_refused_create_is_worded_as_kubectl_words_it() -> None:
    """The forms ``test_testbed_writing`` compares with kubectl on a real API server, and the
    answers kubectl words otherwise, which go to kubectl."""
    from testbed.writing import refusal

    assert refusal("creating", _invalid(("spec.type", "Unsupported value"))) == (
        'The Service "s" is invalid: spec.type: Unsupported value\n')
    # Several causes, one line each, a cause said twice said once.
    assert refusal("creating", _invalid(("a", "x"), ("b", "y"), ("a", "x"))) == (
        'The Service "s" is invalid: \n* a: x\n* b: y\n')
    assert refusal("creating", {"kind": "Status", "reason": "AlreadyExists",
                                "message": 'configmaps "a" already exists'}) == (
        'Error from server (AlreadyExists): error when creating "STDIN": '
        'configmaps "a" already exists\n')
    for body in ({"kind": "Status", "reason": "Unauthorized", "message": "no"},
                 {"kind": "Status", "message": "no reason"},
                 {"kind": "Status", "reason": "Invalid", "message": "no details"},
                 _invalid(),  # no causes
                 _invalid(("a", "x"), name='say "hi"'),  # Go would escape the quotes
                 "not a Status"):
        with pytest.raises(NotHandled):
            refusal("creating", body)
