// Switchyard console: the little the pages need beyond HTML forms.
//  - [data-live="URL"]: the element's content is replaced by what URL answers
//    (an HTML fragment) every data-every ms, until the answer carries
//    data-final; progress bars and phases move without reloading the page.
//  - form[data-stream]: the Try prompt form streams a chat completion and
//    appends each token; [data-cancel] aborts it (the server cancels the
//    engine's work when the stream closes).
// Every request goes to this host; the page's CSP allows nothing else.
"use strict";

const csrf = () => document.querySelector('meta[name="csrf-token"]')?.content ?? "";

function live(element) {
  const every = Number(element.dataset.every || 1000);
  const tick = async () => {
    if (!document.body.contains(element)) return;
    // Someone typing in a form inside the region keeps what they typed; a
    // focused button (an abort while a change prepares) keeps its focus.
    if (element.contains(document.activeElement) && document.activeElement !== document.body &&
        document.activeElement.matches("input, select, textarea, button")) {
      setTimeout(tick, every);
      return;
    }
    try {
      const answer = await fetch(element.dataset.live, { headers: { "accept": "text/html" }, credentials: "same-origin" });
      if (answer.redirected || answer.status === 401) { location.reload(); return; }
      if (answer.ok) {
        element.innerHTML = await answer.text();
        if (element.querySelector("[data-final]")) return;
      }
    } catch (_) { /* the next tick tries again */ }
    setTimeout(tick, every);
  };
  if (!element.querySelector("[data-final]")) setTimeout(tick, every);
}

function stream(form) {
  const output = document.getElementById("output");
  const status = document.getElementById("stream-status");
  const cancel = form.querySelector("[data-cancel]");
  const submit = form.querySelector('button[type="submit"]');
  let controller = null;
  const say = (text) => { status.textContent = text; };
  const count = (n) => `${n} token${n === 1 ? "" : "s"}`;
  cancel.disabled = true;
  cancel.addEventListener("click", () => {
    if (controller) controller.abort();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = {
      model: data.get("model"),
      messages: [{ role: "user", content: data.get("prompt") }],
      max_tokens: Number(data.get("max_tokens") || 64),
      stream: true,
    };
    output.textContent = "";
    controller = new AbortController();
    cancel.disabled = false;
    submit.disabled = true;
    say("Streaming…");
    let tokens = 0;
    try {
      const answer = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", "x-csrf-token": csrf() },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!answer.ok) {
        const error = await answer.json().catch(() => ({}));
        const e = error.error || {};
        say(`Refused: ${e.code || answer.status}: ${e.message || answer.statusText}`);
        return;
      }
      const reader = answer.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          for (const line of event.split("\n")) {
            if (!line.startsWith("data:")) continue;
            const payload = line.slice(5).trim();
            if (payload === "[DONE]") { say(`Done: ${count(tokens)}.`); continue; }
            const chunk = JSON.parse(payload);
            if (chunk.error) { say(`Stopped: ${chunk.error.code}: ${chunk.error.message}`); continue; }
            const text = chunk.choices?.[0]?.delta?.content ?? "";
            if (text) { output.textContent += text; tokens += 1; }
          }
        }
      }
      if (status.textContent === "Streaming…") say(`Ended after ${count(tokens)}.`);
    } catch (error) {
      say(error.name === "AbortError" ? `Cancelled after ${count(tokens)}.` : `Failed: ${error.message}`);
    } finally {
      controller = null;
      cancel.disabled = true;
      submit.disabled = false;
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll("[data-live]").forEach(live);
  document.querySelectorAll("form[data-stream]").forEach(stream);
});
