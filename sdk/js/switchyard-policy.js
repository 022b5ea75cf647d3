// Write Switchyard admission policies in JavaScript.
//
// A policy is an object with the points it judges, a settings parser and
// one function per point; `exportPolicy` turns it into the `admission`
// interface the component exports:
//
//   import { allow, deny, exportPolicy, Fields } from "./switchyard-policy.js";
//
//   export const admission = exportPolicy({
//     points: ["inference"],
//     parseSettings(doc) {
//       const fields = new Fields(doc);
//       const limit = fields.integer("max_tokens", { minimum: 1 });
//       fields.done();
//       return limit;
//     },
//     inference(limit, request) {
//       if (request.maxTokens != null && request.maxTokens > limit) {
//         return deny("max_tokens_exceeded", `max_tokens must be at most ${limit}, got ${request.maxTokens}`);
//       }
//       return allow();
//     },
//   });
//
// Requests are the WIT records as componentize-js passes them: fields in
// camelCase (`request.caller.project`, `request.maxTokens`), `null`
// for an absent option (test with `== null`). Settings documents keep the snake_case the
// operator writes. Decisions are the WIT variants (`{ tag: "allow" }`,
// `{ tag: "deny", val: { code, message } }`, `{ tag: "patch", val: {...} }`),
// the same shape at every point. Nothing here imports the host, so it
// also runs under plain Node. To log through the host, import its logger:
// `import { log } from "switchyard:plugin/log@0.1.0"; log("info", "...")`.
//
// Layout: decisions, the settings reader (`parseDocument`, `Fields`), then
// `exportPolicy`.

/** The admission points, as the WIT enum's values. */
export const POINTS = ["inference", "deploy", "transfer", "federation"];

/** Deny code of a point the policy does not judge (the default; the host
 * refuses to bind a policy there, so it is only a safety net). */
export const POINT_NOT_SUPPORTED = "point_not_supported";

/** Deny code of an evaluation before any settings were accepted: the host
 * always validates first, so this means a host bug. */
export const NOT_CONFIGURED = "not_configured";

// The fields each point's patch may set (the WIT's `*-patch` records).
const PATCH_FIELDS = {
  inference: ["maxTokens"],
  deploy: ["memoryPerGpuBytes"],
  transfer: ["maxBytesPerSecond"],
  federation: ["maxTokens"],
};

// --- Decisions --------------------------------------------------------------

/** Let the request go ahead unchanged. */
export function allow() {
  return { tag: "allow" };
}

/** Refuse with a stable code (`model_not_allowed`) and a message for the
 * person who reads it. */
export function deny(code, message) {
  return { tag: "deny", val: { code: String(code), message: String(message) } };
}

/** Let the request go ahead changed: `patch({ maxTokens: 1024 })`
 * (inference, federation), `{ memoryPerGpuBytes }` (deploy, a BigInt),
 * `{ maxBytesPerSecond }` (transfer, a BigInt). */
export function patch(fields) {
  return { tag: "patch", val: { ...fields } };
}

// --- Settings ---------------------------------------------------------------

/** Settings the policy cannot use; the host shows the message to the
 * operator as is, so write it for them. */
export class SettingsError extends Error {}

/** The settings JSON as an object. An empty document reads as `{}`, as the
 * Rust SDK reads it. */
export function parseDocument(text) {
  if (text.trim() === "") return {};
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new SettingsError(`invalid settings: ${error.message}`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
    throw new SettingsError("invalid settings: expected a JSON object");
  }
  return doc;
}

/** Reads the fields of one JSON object, with messages that name where a
 * field is (`rule 2: ...`), and refuses fields nobody read (`done()`), as
 * serde's `deny_unknown_fields` does. */
export class Fields {
  constructor(doc, where = "settings") {
    if (doc === null || typeof doc !== "object" || Array.isArray(doc)) {
      throw new SettingsError(`${where} must be a JSON object`);
    }
    this.doc = doc;
    this.where = where;
    this.read = new Set();
  }

  take(name, fallback, required) {
    this.read.add(name);
    const value = this.doc[name];
    if (value !== undefined && value !== null) return { value, given: true };
    if (required) throw new SettingsError(`${this.where}: missing field \`${name}\``);
    return { value: fallback, given: false };
  }

  /** A string field. */
  string(name, { fallback, required = false } = {}) {
    const { value, given } = this.take(name, fallback, required);
    if (given && typeof value !== "string") {
      throw new SettingsError(`${this.where}: \`${name}\` must be a string`);
    }
    return value;
  }

  /** A list of strings. */
  strings(name, { fallback, required = false } = {}) {
    const { value, given } = this.take(name, fallback, required);
    if (given && !(Array.isArray(value) && value.every((v) => typeof v === "string"))) {
      throw new SettingsError(`${this.where}: \`${name}\` must be a list of strings`);
    }
    return value;
  }

  /** A whole number, optionally bounded. */
  integer(name, { fallback, required = true, minimum, maximum } = {}) {
    const { value, given } = this.take(name, fallback, required);
    if (!given) return value;
    if (!Number.isSafeInteger(value)) {
      throw new SettingsError(`${this.where}: \`${name}\` must be a whole number`);
    }
    if (minimum !== undefined && value < minimum) {
      throw new SettingsError(`${this.where}: \`${name}\` must be at least ${minimum}, got ${value}`);
    }
    if (maximum !== undefined && value > maximum) {
      throw new SettingsError(`${this.where}: \`${name}\` must be at most ${maximum}, got ${value}`);
    }
    return value;
  }

  /** A string that must be one of `choices`. */
  choice(name, choices, options = {}) {
    const value = this.string(name, options);
    if (value !== undefined && !choices.includes(value)) {
      throw new SettingsError(
        `${this.where}: \`${name}\` must be one of ${choices.join(", ")}, got ${JSON.stringify(value)}`,
      );
    }
    return value;
  }

  /** A list of objects, each as its own `Fields` (numbered from 1, as an
   * operator counts them in the file). */
  objects(name, { required = false } = {}) {
    const { value, given } = this.take(name, [], required);
    if (given && !Array.isArray(value)) {
      throw new SettingsError(`${this.where}: \`${name}\` must be a list`);
    }
    const singular = name.endsWith("s") ? name.slice(0, -1) : name;
    return value.map((item, i) => new Fields(item, `${singular} ${i + 1}`));
  }

  /** Refuses fields that were not read: a typo must not pass silently. */
  done() {
    const unknown = Object.keys(this.doc).filter((name) => !this.read.has(name)).sort();
    if (unknown.length > 0) {
      const expected = [...this.read].sort().map((n) => `\`${n}\``).join(", ");
      throw new SettingsError(`${this.where}: unknown field \`${unknown[0]}\`, expected one of ${expected}`);
    }
  }
}

// --- The component ----------------------------------------------------------

function unsupported(point) {
  return deny(POINT_NOT_SUPPORTED, `this policy does not judge the ${point} point`);
}

/** The `admission` interface: keeps the settings the instance accepted and
 * hands them to `policy` on every evaluation. `policy` has `points`,
 * optionally `parseSettings(doc)` (throws `SettingsError`), and one
 * `(settings, request) => decision` function per point it judges. */
export function exportPolicy(policy) {
  for (const point of policy.points) {
    if (!POINTS.includes(point)) {
      throw new Error(`unknown admission point ${JSON.stringify(point)}; points: ${POINTS.join(", ")}`);
    }
    if (typeof policy[point] !== "function") {
      throw new Error(`the policy lists the ${point} point but has no ${point}(settings, request) function`);
    }
  }
  const parse = policy.parseSettings ?? ((doc) => doc);
  // One component instance judges with one binding's settings; the host
  // validates on every fresh instance before it evaluates.
  let state = { configured: false, settings: undefined };

  const judge = (point) => (request) => {
    if (!state.configured) {
      return deny(NOT_CONFIGURED, "the policy was evaluated before its settings were accepted");
    }
    if (!policy.points.includes(point)) return unsupported(point);
    const decision = policy[point](state.settings, request);
    if (decision.tag === "patch") {
      const unknown = Object.keys(decision.val).filter((f) => !PATCH_FIELDS[point].includes(f));
      if (unknown.length > 0) throw new Error(`a ${point} patch cannot set ${unknown[0]}`);
    }
    return decision;
  };

  return {
    points() {
      return [...policy.points];
    },
    validateSettings(text) {
      // A refused document drops the settings accepted before, so the
      // instance fails closed rather than judging with stale ones.
      state = { configured: false, settings: undefined };
      let settings;
      try {
        settings = parse(parseDocument(text));
      } catch (error) {
        if (error instanceof SettingsError) throw error.message;
        throw error;
      }
      state = { configured: true, settings };
    },
    evaluateInference: judge("inference"),
    evaluateDeploy: judge("deploy"),
    evaluateTransfer: judge("transfer"),
    evaluateFederation: judge("federation"),
  };
}
