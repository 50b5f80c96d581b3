"""schemathesis hooks of ops/schemathesis (loaded through SCHEMATHESIS_HOOKS).

A client sends an `Idempotency-Key` with one request only: the API answers the same key with
another request 422 `idempotency_key_reused` (tests/tests/api/idempotency.rs tests that and
the rest of the key's rules). Generated keys repeat across operations and examples, so each
well-formed key is made unique before it is sent; a malformed one is sent as generated, for
the API to refuse.
"""

import re
import uuid

import schemathesis

WELL_FORMED = re.compile(r"[!-~]{1,255}")


def _drops_a_parameter(case):
    """A coverage case that leaves a required parameter out (`Authorization`, say): sent as
    generated, since editing its headers makes schemathesis send the configured key again."""
    data = getattr(getattr(case.meta, "phase", None), "data", None)
    return str(getattr(data, "scenario", "")) == "missing_parameter"


@schemathesis.hook
def before_call(context, case, **kwargs):
    headers = case.headers
    if not headers or _drops_a_parameter(case):
        return
    for name in list(headers):
        key = headers[name]
        if name.lower() == "idempotency-key" and isinstance(key, str) and WELL_FORMED.fullmatch(key):
            headers[name] = key[:200] + "-" + uuid.uuid4().hex
