// model-allowlist in JavaScript: the same rules as policies/model-allowlist
// (Rust) and examples/model-allowlist-python, on the same fixtures and cases.
//
// Settings (`test_data/settings.json`): `rules`, each naming exactly one of
// `key_id`, `project` (inference, transfer) or `peer` (federation) and the
// `models` it may call; `default` for everyone without a rule. A pattern is
// a model id or a prefix ending in `*`. The most specific rule decides: key,
// else project, else default (a peer's rule, else default, for federation).
// A refused model is denied with `model_not_allowed`.

import { Fields, SettingsError, allow, deny, exportPolicy } from "./switchyard-policy.js";

export const MODEL_NOT_ALLOWED = "model_not_allowed";
const SUBJECTS = ["key_id", "project", "peer"];
// Names as the messages print them, as the Rust policy does.
const SUBJECT_NAMES = { key_id: "key", project: "project", peer: "peer" };

function checkPattern(pattern) {
  if (pattern === "") return "a pattern may not be empty";
  if (pattern.replace(/\*+$/, "").includes("*") || pattern.endsWith("**")) {
    return `pattern ${JSON.stringify(pattern)} is not supported: \`*\` may only end a pattern, once`;
  }
  return null;
}

function matches(pattern, model) {
  return pattern.endsWith("*") ? model.startsWith(pattern.slice(0, -1)) : pattern === model;
}

function parseSettings(doc) {
  const fields = new Fields(doc);
  // Keyed by "kind name", e.g. "project research".
  const rules = new Map();
  for (const rule of fields.objects("rules")) {
    const named = SUBJECTS.map((s) => [s, rule.string(s)]).filter(([, v]) => v !== undefined);
    const models = rule.strings("models", { required: true });
    rule.done();
    if (named.length !== 1) {
      throw new SettingsError(`${rule.where} must name exactly one of key_id, project, peer`);
    }
    const whom = `${SUBJECT_NAMES[named[0][0]]} ${named[0][1]}`;
    if (rules.has(whom)) {
      throw new SettingsError(`${rule.where}: ${whom} already has a rule; merge their models`);
    }
    for (const model of models) {
      const problem = checkPattern(model);
      if (problem) throw new SettingsError(`${rule.where} (${whom}): ${problem}`);
    }
    rules.set(whom, models);
  }
  const fallback = fields.strings("default", { fallback: [] });
  fields.done();
  for (const model of fallback) {
    const problem = checkPattern(model);
    if (problem) throw new SettingsError(`default: ${problem}`);
  }
  return { rules, fallback };
}

function callerSubjects(caller) {
  const subjects = [`key ${caller.keyId}`];
  if (caller.project != null) subjects.push(`project ${caller.project}`);
  return subjects;
}

// Checks `model` against the first of `subjects` with a rule, else the
// default list.
function judge(settings, subjects, model) {
  const whom = subjects.find((s) => settings.rules.has(s));
  const patterns = whom === undefined ? settings.fallback : settings.rules.get(whom);
  if (patterns.some((p) => matches(p, model))) return allow();
  const allowed = patterns.length > 0 ? patterns.join(", ") : "none";
  const scope = whom === undefined ? "by default" : `for ${whom}`;
  return deny(MODEL_NOT_ALLOWED, `model ${JSON.stringify(model)} is not allowed ${scope} (allowed: ${allowed})`);
}

export const admission = exportPolicy({
  points: ["inference", "transfer", "federation"],
  parseSettings,
  inference: (settings, request) => judge(settings, callerSubjects(request.caller), request.model),
  transfer: (settings, request) => judge(settings, callerSubjects(request.caller), request.model),
  federation: (settings, request) =>
    request.model == null ? allow() : judge(settings, [`peer ${request.peer}`], request.model),
});
