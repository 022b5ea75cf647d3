"""The official OpenAI Python client runs a batch against a Switchyard frontend.

Usage: openai_batch.py BASE_URL API_KEY MODEL LINES [OWNER]
Uploads LINES chat completion requests as a batch input file, creates the
batch (owned by the cluster labelled OWNER when given), prints its id, polls it until it ends, then reads the output file and
checks it: every line answered once with a 200, one output line per input
line. Exits non-zero with a message on the first thing that is not as an
OpenAI client expects; prints "ok" at the end.
"""

import io
import json
import sys
import time

from openai import OpenAI

FINAL = ("completed", "failed", "expired", "cancelled")


def main() -> None:
    base, key, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    metadata = {"suite": "batches"}
    if len(sys.argv) > 5:
        metadata["owner"] = sys.argv[5]
    client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=5)

    lines = [
        json.dumps(
            {
                "custom_id": f"line-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": model,
                    "messages": [{"role": "user", "content": f"request number {i}"}],
                    "max_tokens": 8,
                },
            }
        )
        for i in range(n)
    ]
    content = ("\n".join(lines) + "\n").encode()
    uploaded = client.files.create(file=("batch.jsonl", io.BytesIO(content)), purpose="batch")
    assert uploaded.id.startswith("file-"), uploaded
    assert uploaded.purpose == "batch" and uploaded.bytes == len(content), uploaded
    assert client.files.retrieve(uploaded.id).filename == "batch.jsonl"

    batch = client.batches.create(
        input_file_id=uploaded.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata,
    )
    assert batch.id.startswith("batch_") and batch.object == "batch", batch
    assert batch.request_counts.total == n, batch
    print(batch.id, flush=True)

    deadline = time.monotonic() + 300
    while batch.status not in FINAL:
        assert time.monotonic() < deadline, f"the batch never ended: {batch}"
        time.sleep(0.2)
        batch = client.batches.retrieve(batch.id)
    counts = batch.request_counts
    assert batch.status == "completed", batch
    if batch.error_file_id is not None:
        errors = client.files.content(batch.error_file_id).text.splitlines()
        raise AssertionError(f"{len(errors)} lines failed, the first: {errors[:3]}; {batch}")
    assert (counts.total, counts.completed, counts.failed) == (n, n, 0), batch
    assert batch.error_file_id is None, batch
    assert batch.metadata == metadata, batch
    assert batch.completed_at >= batch.in_progress_at >= batch.created_at, batch

    text = client.files.content(batch.output_file_id).text
    out = [json.loads(line) for line in text.splitlines()]
    assert len(out) == n, f"{len(out)} output lines for {n} input lines"
    assert len({o["custom_id"] for o in out}) == n, "custom_ids repeat"
    for o in out:
        assert o["error"] is None, o
        assert o["response"]["status_code"] == 200, o
        assert o["response"]["body"]["object"] == "chat.completion", o
    assert client.files.retrieve(batch.output_file_id).bytes == len(text.encode())

    listed = client.batches.list(limit=10)
    assert any(b.id == batch.id for b in listed.data), listed
    print("ok", flush=True)


if __name__ == "__main__":
    main()
