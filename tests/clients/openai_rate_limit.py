"""Parallel clients of the official OpenAI Python client under a rate limit.

Usage: openai_rate_limit.py API_KEY MODEL CLIENTS REQUESTS_EACH URL [URL...]

CLIENTS threads (client i talks to URL i mod len(URLs)) send REQUESTS_EACH
chat completions each, no retries. Prints one JSON line:
{"ok": answered, "limited": refused with 429, "tokens": total_tokens of
the answered ones, "codes": {code: n}}. Exits non-zero when a 429 is not
as an OpenAI client expects it: status, `type` rate_limit_error, a code,
and OpenAI's x-ratelimit headers with Retry-After.
"""

import json
import sys
import threading

from openai import OpenAI, RateLimitError

HEADERS = [
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "retry-after",
]
PROMPT = "please answer these several longish words briefly"


def run(base, key, model, n, totals, problems, lock):
    client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
    for _ in range(n):
        try:
            answer = client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": PROMPT}],
                max_tokens=8,
            )
            with lock:
                totals["ok"] += 1
                totals["tokens"] += answer.usage.total_tokens
        except RateLimitError as e:
            missing = [h for h in HEADERS if h not in e.response.headers]
            with lock:
                totals["limited"] += 1
                totals["codes"][e.code] = totals["codes"].get(e.code, 0) + 1
                if e.status_code != 429 or e.type != "rate_limit_error" or not e.code:
                    problems.append(f"{e.status_code} {e.type} {e.code}: {e.body}")
                if missing:
                    problems.append(f"a 429 without {missing}: {dict(e.response.headers)}")
                if int(e.response.headers.get("retry-after", "0")) < 1:
                    problems.append(f"Retry-After below 1 s: {dict(e.response.headers)}")


def main() -> None:
    key, model, clients, each = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    urls = sys.argv[5:]
    totals = {"ok": 0, "limited": 0, "tokens": 0, "codes": {}}
    problems: list[str] = []
    lock = threading.Lock()
    threads = [
        threading.Thread(
            target=run, args=(urls[i % len(urls)], key, model, each, totals, problems, lock)
        )
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(totals))
    if problems:
        sys.exit("\n".join(problems[:10]))


if __name__ == "__main__":
    main()
