"""model-allowlist in Python: the same rules as policies/model-allowlist
(Rust) and examples/model-allowlist-js, on the same fixtures and cases.

Settings (`test_data/settings.json`): `rules`, each naming exactly one of
`key_id`, `project` (inference, transfer) or `peer` (federation) and the
`models` it may call; `default` for everyone without a rule. A pattern is
a model id or a prefix ending in `*`. The most specific rule decides: key,
else project, else default (a peer's rule, else default, for federation).
A refused model is denied with `model_not_allowed`.
"""

import json

import switchyard_policy as sp

MODEL_NOT_ALLOWED = "model_not_allowed"
SUBJECTS = ("key_id", "project", "peer")
# Names as the messages print them, as the Rust policy does.
SUBJECT_NAMES = {"key_id": "key", "project": "project", "peer": "peer"}


def check_pattern(pattern):
    if not pattern:
        return "a pattern may not be empty"
    if "*" in pattern.rstrip("*") or pattern.endswith("**"):
        return f"pattern {json.dumps(pattern)} is not supported: `*` may only end a pattern, once"
    return None


def matches(pattern, model):
    if pattern.endswith("*"):
        return model.startswith(pattern[:-1])
    return pattern == model


class ModelAllowlist(sp.Policy):
    points = ["inference", "transfer", "federation"]

    def parse_settings(self, doc):
        fields = sp.Fields(doc)
        rules = {}
        for rule in fields.objects("rules"):
            named = [(s, rule.string(s)) for s in SUBJECTS]
            models = rule.strings("models", required=True)
            rule.done()
            named = [(s, v) for s, v in named if v is not None]
            if len(named) != 1:
                raise sp.SettingsError(f"{rule.where} must name exactly one of key_id, project, peer")
            subject = named[0]
            whom = f"{SUBJECT_NAMES[subject[0]]} {subject[1]}"
            if subject in rules:
                raise sp.SettingsError(f"{rule.where}: {whom} already has a rule; merge their models")
            for model in models:
                problem = check_pattern(model)
                if problem:
                    raise sp.SettingsError(f"{rule.where} ({whom}): {problem}")
            rules[subject] = models
        default = fields.strings("default", default=[])
        fields.done()
        for model in default:
            problem = check_pattern(model)
            if problem:
                raise sp.SettingsError(f"default: {problem}")
        return {"rules": rules, "default": default}

    def inference(self, settings, request):
        return judge(settings, caller_subjects(request.caller), request.model)

    def transfer(self, settings, request):
        return judge(settings, caller_subjects(request.caller), request.model)

    def federation(self, settings, request):
        if request.model is None:
            return sp.allow()
        return judge(settings, [("peer", request.peer)], request.model)


def caller_subjects(caller):
    subjects = [("key_id", caller.key_id)]
    if caller.project is not None:
        subjects.append(("project", caller.project))
    return subjects


def judge(settings, subjects, model):
    """Checks `model` against the first of `subjects` with a rule, else the
    default list."""
    for subject in subjects:
        if subject in settings["rules"]:
            whom = f"for {SUBJECT_NAMES[subject[0]]} {subject[1]}"
            patterns = settings["rules"][subject]
            break
    else:
        whom, patterns = "by default", settings["default"]
    if any(matches(p, model) for p in patterns):
        return sp.allow()
    allowed = ", ".join(patterns) if patterns else "none"
    return sp.deny(
        MODEL_NOT_ALLOWED,
        f"model {json.dumps(model)} is not allowed {whom} (allowed: {allowed})",
    )


Admission = sp.export(ModelAllowlist())
