"""Keep one object as the manager wants it: create it, or replace it when it differs (shell).

The manager owns a few single objects outright (the add-on's AddOnDeploymentConfig, its
registration on an OLM install) and writes each the same way: read it; create it when it is
missing; leave it when it already says what is wanted; otherwise replace it with the wanted
content over what the live object holds. A conflict (someone wrote it in between) reads it
again, a few times.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Obj = dict[str, Any]

MANAGED_BY = "model-serving-addon-manager"
"""``app.kubernetes.io/managed-by`` of the objects the manager keeps (not Helm, not OLM)."""

ATTEMPTS = 5
"""Reads and writes before giving up on an object others keep writing."""


def keep(what: str, want: Obj, *, get: Callable[[], Obj], create: Callable[[Obj], Any],
         replace: Callable[[Obj], Any], differs: Callable[[Obj, Obj], bool],
         merged: Callable[[Obj, Obj], Obj]) -> bool:
    """Make the object ``what`` (named in logs) say ``want``; True when it does.

    ``get`` reads it (ApiException 404 when missing), ``create`` and ``replace`` write it,
    ``differs(live, want)`` says whether it needs a write and ``merged(live, want)`` is the
    body that replaces it. Other API errors are raised. False after :data:`ATTEMPTS`
    conflicts.
    """
    from kubernetes.client.exceptions import ApiException

    for _ in range(ATTEMPTS):
        try:
            live = get()
        except ApiException as err:
            if err.status != 404:
                raise
            try:
                create(want)
                log.info("%s created", what)
                return True
            except ApiException as conflict:
                if conflict.status != 409:
                    raise
                continue
        if not differs(live, want):
            return True
        try:
            replace(merged(live, want))
            log.info("%s updated", what)
            return True
        except ApiException as err:
            if err.status != 409:
                raise
    return False
