// {{name}}: an admission policy for Switchyard. As generated it refuses
// inference requests whose prompt is longer than the binding allows;
// replace that rule with yours, and the cases with your own.
//
// Settings (`test_data/settings.json`): `{ "max_prompt_tokens": 4096 }`.
// A longer prompt is denied with `prompt_too_long`. Point: `inference`.

import { Fields, allow, deny, exportPolicy } from "./switchyard-policy.js";

export const PROMPT_TOO_LONG = "prompt_too_long";

export const admission = exportPolicy({
  points: ["inference"],
  parseSettings(doc) {
    const fields = new Fields(doc);
    const limit = fields.integer("max_prompt_tokens", { minimum: 1 });
    fields.done();
    return limit;
  },
  inference(limit, request) {
    if (request.promptTokens > limit) {
      return deny(PROMPT_TOO_LONG, `the prompt has ${request.promptTokens} tokens; at most ${limit} are allowed`);
    }
    return allow();
  },
});
