"""{{name}}: an admission policy for Switchyard. As generated it refuses
inference requests whose prompt is longer than the binding allows; replace
that rule with yours, and the cases with your own.

Settings (`test_data/settings.json`): `{ "max_prompt_tokens": 4096 }`.
A longer prompt is denied with `prompt_too_long`. Point: `inference`.
"""

import switchyard_policy as sp

PROMPT_TOO_LONG = "prompt_too_long"


class ThisPolicy(sp.Policy):
    points = ["inference"]

    def parse_settings(self, doc):
        fields = sp.Fields(doc)
        limit = fields.integer("max_prompt_tokens", minimum=1)
        fields.done()
        return limit

    def inference(self, limit, request):
        if request.prompt_tokens > limit:
            return sp.deny(
                PROMPT_TOO_LONG,
                f"the prompt has {request.prompt_tokens} tokens; at most {limit} are allowed",
            )
        return sp.allow()


# componentize-py exports the class named after the WIT interface.
Admission = sp.export(ThisPolicy())
