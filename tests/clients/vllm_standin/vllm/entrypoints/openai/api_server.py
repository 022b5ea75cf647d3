"""A stand-in for vLLM's OpenAI server, for machines without a GPU.

vLLM needs a GPU, so the `vllm` engine kind's real code path (the command
line `python -m vllm.entrypoints.openai.api_server ...`, CUDA_VISIBLE_DEVICES,
the health probe, readiness, the OpenAI routes, stop) is exercised against
this module instead, found first on PYTHONPATH. It takes vLLM's flags,
writes what it was started with to $VLLM_STANDIN_RECORD, and answers
/health, /v1/models and /v1/chat/completions.
"""

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--served-model-name", required=True)
parser.add_argument("--host", required=True)
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--tensor-parallel-size", type=int, required=True)
args = parser.parse_args()

with open(os.environ["VLLM_STANDIN_RECORD"], "w") as record:
    json.dump(
        {
            "argv": sys.argv[1:],
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "model_exists": os.path.exists(args.model),
        },
        record,
    )


class Handler(BaseHTTPRequestHandler):
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {})
        elif self.path == "/v1/models":
            self.answer(200, {"object": "list", "data": [
                {"id": args.served_model_name, "object": "model", "owned_by": "vllm"}]})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        request = json.loads(self.rfile.read(length) or b"{}")
        if self.path != "/v1/chat/completions":
            return self.answer(404, {"error": "not found"})
        self.answer(200, {
            "object": "chat.completion",
            "model": request.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    def log_message(self, *_):
        pass


ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
