"""Try prompt: a chat completion streamed token by token, and one cancelled."""

import os


def stream_and_cancel(c):
    c.go("/console/try")
    c.fill("Model", os.environ.get("SWITCHYARD_CONSOLE_SLOW_MODEL", "tiny"))
    c.fill("Max tokens", "8")
    c.press("Send")
    c.until("the stream to finish", lambda: c.find("#stream-status").text.startswith("Done"))
    if not c.find("#output").text.strip():
        raise AssertionError("the streamed answer is empty")
    c.shot("try-prompt")
    # A long answer, cancelled while it streams.
    c.fill("Max tokens", "400")
    c.press("Send")
    c.until("tokens to arrive", lambda: len(c.find("#output").text) > 0)
    c.press("Cancel")
    c.until("the cancellation", lambda: c.find("#stream-status").text.startswith("Cancelled"))
    c.shot("try-prompt-cancelled")
