"""schemathesis hooks of ops/schemathesis (loaded through SCHEMATHESIS_HOOKS).

A client sends an `Idempotency-Key` with one request only: the API answers the same key with
another request 422 `idempotency_key_reused` (tests/tests/api/idempotency.rs tests that and
the rest of the key's rules). Generated keys repeat across operations and examples, so each
well-formed key is made unique before it is sent; a malformed one is sent as generated, for
the API to refuse.

The key schemathesis authenticates with is never revoked (a `DELETE /api-keys/{id}` of it is
sent for a random id instead): a run that revoked it would test the rest against 401 only.
"""

import os
import re
import uuid

import schemathesis
from schemathesis.core.parameters import ParameterLocation

WELL_FORMED = re.compile(r"[!-~]{1,255}")


def _drops_a_parameter(case):
    """A coverage case that leaves a required parameter out (`Authorization`, say): sent as
    generated, since editing its headers makes schemathesis send the configured key again."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    return str(getattr(data, "scenario", "")) == "missing_parameter"


# parley_types::fields::TEXT: no NUL anywhere.
NUL_FREE = "^[^\\u0000]*$"


@schemathesis.hook
def before_load_schema(context, raw_schema):
    """The served document states free JSON's NUL rule in words, since generators drop the
    recursive schema that states it (api/src/openapi/request_rules.rs); schemathesis gets it
    stated exactly, so it generates values the API must take and values it must refuse."""
    schemas = raw_schema.get("components", {}).get("schemas", {})
    if "FreeJson" in schemas:
        free = {"$ref": "#/components/schemas/FreeJson"}
        # One schema of every type, each keyword applying to its own type only (`pattern` to
        # strings, `items` to arrays, the rest to objects), rather than an `anyOf` of one
        # branch per type: the negative phases mutate one branch of an `anyOf` (a string
        # made an integer) and expect a refusal of what another branch still allows.
        schemas["FreeJson"] = {
            "description": schemas["FreeJson"].get("description", ""),
            "type": ["string", "number", "boolean", "null", "array", "object"],
            "pattern": NUL_FREE,
            "items": free,
            "propertyNames": {"pattern": NUL_FREE},
            "additionalProperties": free,
        }


@schemathesis.hook
def filter_case(context, case):
    """A multipart body carries text only: a part's value is the same bytes whatever type the
    schema gave it, so a negative multipart case (an extra part's "integer", an object's key)
    is on the wire a valid body the API rightly takes; those are not sent. The API's own tests
    send malformed multipart bodies (tests/tests/api/import_bodies.rs)."""
    if not str(case.media_type or "").startswith("multipart/form-data"):
        return True
    body = case.meta.components.get(ParameterLocation.BODY) if case.meta else None
    return body is None or not body.mode.is_negative


# The id of the key schemathesis authenticates with (ops/schemathesis): a stateful run that
# revoked it would test every later operation against a 401 only.
OWN_KEY_ID = os.environ.get("PARLEY_SCHEMATHESIS_KEY_ID", "")


@schemathesis.hook
def before_call(context, case, **kwargs):
    params = case.path_parameters or {}
    if (
        OWN_KEY_ID
        and case.method.upper() == "DELETE"
        and case.operation.path == "/api/v1/api-keys/{id}"
        and str(params.get("id")) == OWN_KEY_ID
    ):
        params["id"] = str(uuid.uuid4())
    headers = case.headers
    if not headers or _drops_a_parameter(case):
        return
    for name in list(headers):
        key = headers[name]
        if name.lower() == "idempotency-key" and isinstance(key, str) and WELL_FORMED.fullmatch(key):
            headers[name] = key[:200] + "-" + uuid.uuid4().hex
