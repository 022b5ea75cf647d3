"""Schemathesis checks of our own, loaded with SCHEMATHESIS_HOOKS.

Every error answer of the API is JSON shaped `{"error": {"code", "message"}}`
(the `/v1` routes add OpenAI's `type`), whatever the input was.
"""

import schemathesis


@schemathesis.check
def error_shape(ctx, response, case):
    if response.status_code < 400:
        return None
    content_type = response.headers.get("content-type", [""])
    if isinstance(content_type, list):
        content_type = content_type[0] if content_type else ""
    assert content_type.startswith("application/json"), (
        f"error {response.status_code} is {content_type or 'untyped'}, not JSON: "
        f"{response.text[:200]!r}"
    )
    body = response.json()
    error = body.get("error") if isinstance(body, dict) else None
    assert isinstance(error, dict), f"error {response.status_code} has no `error` object: {body!r}"
    assert isinstance(error.get("code"), str) and error["code"], f"no `error.code`: {body!r}"
    assert isinstance(error.get("message"), str), f"no `error.message`: {body!r}"
    return None


@schemathesis.serializer("application/wasm")
def wasm(ctx, value):
    """Plugin uploads are raw bytes, like octet-stream."""
    if isinstance(value, bytes):
        return {"data": value}
    return {"data": str(value).encode("utf8")}
