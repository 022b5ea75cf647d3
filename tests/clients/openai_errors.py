"""The official OpenAI Python client reads Switchyard's `/v1` errors as OpenAI's.

Usage: openai_errors.py BASE_URL INFERENCE_KEY KEY_WITHOUT_INFERENCE
Each error kind the frontend answers itself must reach the client as the
exception class OpenAI's own would, with `type`, `code` and `param` set as
OpenAI sets them. Prints "ok" at the end; exits non-zero on the first miss.
"""

import json
import sys
import urllib.error
import urllib.request

import openai
from openai import OpenAI


def expect(error_class, call, kind, code, param=None):
    try:
        call()
    except error_class as e:
        assert e.type == kind, (e.type, e.body)
        assert e.code == code, (e.code, e.body)
        assert e.param == param, (e.param, e.body)
        return
    raise AssertionError(f"no {error_class.__name__}")


def main() -> None:
    base, key, narrow = sys.argv[1], sys.argv[2], sys.argv[3]
    ask = dict(messages=[{"role": "user", "content": "hi"}], max_tokens=2)

    good = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    expect(
        openai.NotFoundError,
        lambda: good.chat.completions.create(model="no-such-model", **ask),
        "invalid_request_error",
        "model_not_found",
        "model",
    )
    bad = OpenAI(base_url=f"{base}/v1", api_key="sy_not_a_key", max_retries=0)
    expect(
        openai.AuthenticationError,
        lambda: bad.chat.completions.create(model="demo", **ask),
        "authentication_error",
        "unauthorized",
    )
    scoped = OpenAI(base_url=f"{base}/v1", api_key=narrow, max_retries=0)
    expect(
        openai.PermissionDeniedError,
        lambda: scoped.chat.completions.create(model="demo", **ask),
        "permission_error",
        "forbidden",
    )
    expect(
        openai.BadRequestError,
        lambda: good.batches.create(
            input_file_id="file-0", endpoint="/v1/chat/completions", completion_window="1h"
        ),
        "invalid_request_error",
        "invalid_completion_window",
        "completion_window",
    )
    # Not JSON at all: what the client cannot send, sent by hand.
    request = urllib.request.Request(
        f"{base}/v1/chat/completions",
        data=b"{not json",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(request)
        raise AssertionError("a body that is not JSON was taken")
    except urllib.error.HTTPError as e:
        assert e.code == 400, e.code
        error = json.loads(e.read())["error"]
    assert error["type"] == "invalid_request_error" and "param" in error, error
    print("ok", flush=True)


if __name__ == "__main__":
    main()
