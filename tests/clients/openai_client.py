"""The official OpenAI Python client against a Switchyard frontend.

Usage: openai_client.py BASE_URL API_KEY MODEL
Lists the models, completes, and streams; exits non-zero with a message on
the first thing that is not as an OpenAI client expects.
"""

import sys

from openai import OpenAI


def main() -> None:
    base, key, model = sys.argv[1:4]
    client = OpenAI(base_url=f"{base}/v1", api_key=key)

    ids = [m.id for m in client.models.list()]
    assert model in ids, f"{model} not in {ids}"

    completion = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Hello!"}],
        max_tokens=4,
    )
    assert completion.choices[0].message.role == "assistant", completion
    assert completion.usage is not None and completion.usage.completion_tokens >= 1, completion

    pieces = []
    finish = None
    for chunk in client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Stream, please."}],
        max_tokens=3,
        stream=True,
    ):
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces).strip(), f"no streamed text: {pieces}"
    assert finish is not None, "the stream ended without a finish reason"
    print("ok")


if __name__ == "__main__":
    main()
