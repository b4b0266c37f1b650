"""schemathesis hooks: sign every request like a participant or an operator (rtgs-api auth).

Load with `SCHEMATHESIS_HOOKS=schemathesis_hooks` and this directory on `PYTHONPATH`. The
signature covers the exact bytes sent, so it is computed by a `requests` auth object, which
sees the prepared request (final body and path) just before it goes out. Operator endpoints
(`/v1/operator/...`) are signed with the operator's key, the others with the participant's.

    RTGS_ST_KEY / RTGS_ST_SECRET          participant key id and secret
    RTGS_ST_OPS_KEY / RTGS_ST_OPS_SECRET  operator key id and secret
"""

import hashlib
import hmac
import itertools
import os
import time

import requests
import schemathesis

_nonce = itertools.count()


class RtgsSignature(requests.auth.AuthBase):
    def __call__(self, r):
        path = r.path_url  # path and query, as the server verifies them
        if path.startswith("/v1/operator/"):
            key, secret = os.environ["RTGS_ST_OPS_KEY"], os.environ["RTGS_ST_OPS_SECRET"]
        else:
            key, secret = os.environ["RTGS_ST_KEY"], os.environ["RTGS_ST_SECRET"]
        ts = f"{int(time.time())}.st{next(_nonce)}"
        body = r.body or b""
        if isinstance(body, str):
            body = body.encode()
        message = f"{r.method}\n{path}\n{ts}\n".encode() + body
        r.headers["x-rtgs-key"] = key
        r.headers["x-rtgs-timestamp"] = ts
        r.headers["x-rtgs-signature"] = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
        return r


@schemathesis.hook
def before_call(context, case, kwargs):
    kwargs["auth"] = RtgsSignature()
