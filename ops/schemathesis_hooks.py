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
        schemas["FreeJson"] = {
            "description": schemas["FreeJson"].get("description", ""),
            "anyOf": [
                {"type": "string", "pattern": NUL_FREE},
                {"type": ["number", "boolean", "null"]},
                {"type": "array", "items": free},
                {"type": "object", "propertyNames": {"pattern": NUL_FREE}, "additionalProperties": free},
            ],
        }


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
