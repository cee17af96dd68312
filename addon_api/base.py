"""Base model and schema helpers shared by every API model.

A validation rule is declared once, as a :class:`Cel`: its CEL expression goes
into the CRD (``x-kubernetes-validations``, checked at admission by the API
server) and its Python ``check`` runs when pydantic validates the same object,
so both sides reject the same objects with the same message.

Rules on a whole model are listed in the model's ``cel_rules`` class variable;
rules on one field are attached with ``Annotated[..., Cel(...)]``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any, ClassVar, Final, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, InitErrorDetails, PydanticCustomError, core_schema

CelReason = Literal[
    "FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate"
]


@dataclass(frozen=True)
class Cel:
    """One ``x-kubernetes-validations`` rule and its Python twin.

    ``check`` receives the validated value (a model instance for model rules)
    and returns ``True`` when the value is valid.  ``field_path`` (relative to
    the schema the rule is on, e.g. ``.kserve``) and ``reason`` tune where and
    how the API server reports a failure.
    """

    rule: str
    message: str
    check: Callable[[Any], bool] | None = field(default=None, compare=False)
    field_path: str | None = None
    reason: CelReason | None = None

    def schema(self) -> dict[str, str]:
        """The rule as it appears in a CRD."""
        out = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        return out

    def validate(self, value: Any) -> None:
        """Raise ``ValueError`` with the rule's message if ``check`` rejects ``value``."""
        if self.check is not None and not self.check(value):
            raise ValueError(self.message)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        inner = handler(source)
        if self.check is None:
            return inner

        def run(value: Any) -> Any:
            self.validate(value)
            return value

        return core_schema.no_info_after_validator_function(run, inner)

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = dict(handler(schema))
        out["x-kubernetes-validations"] = [
            *out.get("x-kubernetes-validations", []),
            self.schema(),
        ]
        return out


def _model_schema_extra(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    rules: Sequence[Cel] = getattr(cls, "cel_rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [rule.schema() for rule in rules]


class ApiModel(BaseModel):
    """Base of every API model: camelCase on the wire, strict about unknown fields.

    Attribute docstrings become the field descriptions of the CRDs (what
    ``kubectl explain`` prints).
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        strict=True,  # like the API server: "1" is not an integer, "yes" is not a boolean
        use_attribute_docstrings=True,
        json_schema_extra=_model_schema_extra,
    )

    cel_rules: ClassVar[tuple[Cel, ...]] = ()
    """Rules on the whole model (CEL in the CRD, ``check`` in Python)."""

    @model_validator(mode="after")
    def _check_cel_rules(self) -> Self:
        for rule in type(self).cel_rules:
            rule.validate(self)
        return self

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Self:
        """Validate a Kubernetes object given as any mapping (e.g. a kopf body).

        An object nested deeper than :data:`MAX_NESTING` (the API server admits 10,000
        levels in the open parts of a schema, such as templates) is rejected first, without
        recursion, with an error naming where.
        """
        deep = too_deep(obj, MAX_NESTING)
        if deep is not None:
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "too_deep",
                            "nested more than {limit} levels deep",
                            {"limit": MAX_NESTING},
                        ),
                        loc=deep[:4],
                        input="...",
                    )
                ],
            )
        return cls.from_wire(plain(obj))

    @classmethod
    def from_wire(cls, value: Any) -> Self:
        """Validate ``value`` as it comes over the wire: camelCase field names only.

        Python code may build a model by its field names (``dev_flags=...``), but an object
        read from an API server, or a spec an override patch made, may not: a key spelled
        ``dev_flags`` is an unknown field there (``extra_forbidden``), refused naming it, as the
        CRD's schema would prune or refuse it. So no guard that reads camelCase keys can be
        passed by another spelling of the same field.
        """
        return cls.model_validate(value, by_alias=True, by_name=False, context=WIRE)

    def to_dict(self) -> dict[str, Any]:
        """The object as the API server stores it (camelCase, unset fields left out)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_patch(self) -> dict[str, Any]:
        """The fields set on this object (camelCase, None left out), for a merge patch.

        Unlike :meth:`to_dict`, a field left at its default is not written, so a merge patch
        keeps what the server stores there (e.g. a status's ``stackVersion``).
        """
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=True)


WIRE: Final = {"wire": True}
"""Validation context of :meth:`ApiModel.from_wire` (what :class:`OpenModel` checks)."""


class OpenModel(ApiModel):
    """A model that keeps fields it does not declare (``x-kubernetes-preserve-unknown-fields``).

    Used for upstream objects (ServingRuntime and InferenceService templates,
    HPA metrics) that this API passes through without owning their schema. On the wire
    (:meth:`ApiModel.from_wire`) a declared field's Python name is refused, not kept as an
    unknown field beside it.
    """

    model_config = ConfigDict(extra="allow")

    @model_validator(mode="before")
    @classmethod
    def _wire_names_only(cls, value: Any, info: ValidationInfo) -> Any:
        if not (isinstance(info.context, Mapping) and info.context.get("wire")):
            return value
        if isinstance(value, Mapping):
            spelled = [name for name, f in cls.model_fields.items()
                       if f.alias and f.alias != name and name in value]
            if spelled:
                raise ValidationError.from_exception_data(cls.__name__, [
                    InitErrorDetails(type="extra_forbidden", loc=(name,), input=value[name])
                    for name in spelled])
        return value


MAX_NESTING = 64
"""Deepest nesting of an object the models read (a real template is about 10 levels deep)."""


def too_deep(value: Any, limit: int) -> tuple[str | int, ...] | None:
    """The path of a value nested more than ``limit`` levels deep in ``value``, or None.

    Iterative, so that a value nested thousands of levels deep does not exhaust the stack.
    """
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > limit:
            return path
        if isinstance(node, Mapping):
            stack.extend((v, (*path, str(k))) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
    return None


def plain(value: Any) -> Any:
    """``value`` with every mapping turned into a dict and every list-like into a list."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


# Helpers -----------------------------------------------------------------------------------------


def unique_items(values: list[Any]) -> list[Any]:
    """Reject lists with duplicates (``x-kubernetes-list-type: set`` in the CRD)."""
    seen: set[Hashable] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"duplicate value {value!r}")
        seen.add(value)
    return values


def unique_by(key: str) -> Callable[[list[Any]], list[Any]]:
    """Reject lists whose items repeat ``key`` (``x-kubernetes-list-type: map``)."""

    def check(values: list[Any]) -> list[Any]:
        seen: set[Hashable] = set()
        for value in values:
            k = getattr(value, key)
            if k in seen:
                raise ValueError(f"duplicate {key} {k!r}")
            seen.add(k)
        return values

    return check


def set_list(max_items: int, *, min_items: int = 0) -> Any:
    """``Field`` arguments for a list of unique scalars."""
    return Field(
        min_length=min_items or None,
        max_length=max_items,
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


def map_list(key: str, max_items: int) -> Any:
    """``Field`` arguments for a list of objects keyed by ``key`` (camelCase)."""
    return Field(
        max_length=max_items,
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": [key],
        },
    )


UniqueList = AfterValidator(unique_items)
"""Python side of ``x-kubernetes-list-type: set``."""


# Strings -----------------------------------------------------------------------------------------

DNS_LABEL_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SECRET_KEY_RE = r"^[-._a-zA-Z0-9]+$"
QUANTITY_RE = (
    r"^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)))?$"
)

DnsLabel = Annotated[str, Field(min_length=1, max_length=63, pattern=DNS_LABEL_RE)]
"""An RFC 1123 label: a namespace or a Deployment name."""

DnsSubdomain = Annotated[str, Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_RE)]
"""An RFC 1123 subdomain: the name of most Kubernetes objects."""

SecretKey = Annotated[str, Field(min_length=1, max_length=253, pattern=SECRET_KEY_RE)]
"""A key of a Secret's data."""

Quantity = Annotated[str, Field(max_length=64, pattern=QUANTITY_RE)]
"""A resource quantity such as ``500m``, ``2Gi`` or ``1``."""

ShortText = Annotated[str, Field(max_length=1024)]
"""A bounded free-form string (reasons, messages, identifiers)."""

TRUNCATED = " [truncated]"
"""What ends a string :func:`sanitized` had to cut."""
_BIDI = frozenset(chr(x) for x in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E,
                                   0x200F, 0x061C))


def sanitized(value: str, limit: int) -> str:
    """``value`` made inert and short: at most ``limit`` characters.

    Control characters (but newline and tab) and bidirectional overrides are dropped, and
    a longer string is cut with :data:`TRUNCATED` at the end.

    What a cluster feeds back (KServe's messages, a container's termination message) is
    written by whoever runs there; the hub shows it bounded and inert, and a string longer
    than its field never makes the hub's status fold fail.
    """
    clean = "".join(ch for ch in value if ch in "\n\t" or (
        unicodedata.category(ch) != "Cc" and ch not in _BIDI))
    if len(clean) <= limit:
        return clean
    return clean[:max(0, limit - len(TRUNCATED))] + TRUNCATED[:limit]


def bounded(limit: int) -> BeforeValidator:
    """The validator of a status string of at most ``limit`` characters.

    It applies :func:`sanitized` on the way in, so the string never fails validation for its
    length (the schema still says ``maxLength``).
    """
    def clean(value: Any) -> Any:
        return sanitized(value, limit) if isinstance(value, str) else value

    return BeforeValidator(clean)


StatusWord = Annotated[str, bounded(64), Field(max_length=64)]
"""A fed-back phase, state or version: bounded and sanitized (:func:`bounded`)."""
StatusReason = Annotated[str, bounded(256), Field(max_length=256)]
"""A fed-back reason: bounded and sanitized."""
StatusText = Annotated[str, bounded(1024), Field(max_length=1024)]
"""A status message: bounded and sanitized."""
StatusUrl = Annotated[str, bounded(2048), Field(max_length=2048)]
"""A fed-back URL: bounded and sanitized."""
ConditionReason = Annotated[str, bounded(1024), Field(max_length=1024)]
"""A condition's reason: bounded and sanitized."""
ConditionMessage = Annotated[str, bounded(32768), Field(max_length=32768)]
"""A condition's message: bounded and sanitized."""

Timestamp = Annotated[datetime, Field(strict=False)]
"""An RFC 3339 date-time (parsed from its string form)."""


def is_dns_label(value: str) -> bool:
    """Whether ``value`` is an RFC 1123 label."""
    return len(value) <= 63 and re.fullmatch(DNS_LABEL_RE, value) is not None


_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def parse_quantity(value: str) -> Decimal:
    """The numeric value of a Kubernetes quantity (``"1500m"`` -> ``Decimal("1.5")``)."""
    if re.fullmatch(QUANTITY_RE, value) is None:
        raise ValueError(f"{value!r} is not a quantity")
    number = value.rstrip("numkMGTPEi")
    suffix = value[len(number) :]
    if suffix not in _SUFFIXES:  # e.g. "1e3": the exponent is part of the number
        number, suffix = value, ""
    try:
        return Decimal(number) * _SUFFIXES[suffix]
    except InvalidOperation as err:  # pragma: no cover - the pattern rules this out
        raise ValueError(f"{value!r} is not a quantity") from err


def field_errors(err: ValidationError, prefix: str = "") -> str:
    """A validation error as ``field.path: message`` clauses joined by ``; ``.

    Paths use the API's (camelCase) field names, list items their index, each after
    ``prefix`` (e.g. ``spec``), so a status condition names exactly what to fix.
    """
    clauses = []
    for e in err.errors(include_url=False):
        # An empty key (e.g. an unknown field "" in an override patch) is shown as "".
        parts = [str(p) if p != "" else '""' for p in e["loc"]]
        path = ".".join([prefix, *parts] if prefix else parts)
        msg = str(e["msg"])
        last = parts[-1] if parts else ""
        if e["type"] == "extra_forbidden" and "_" in last and to_camel(last) != last:
            msg += f" (the API takes camelCase names: {to_camel(last)})"
        clauses.append(f"{path}: {msg}" if path else msg)
    return "; ".join(clauses)
