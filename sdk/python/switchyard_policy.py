"""Write Switchyard admission policies in Python.

A policy is a class with the points it judges, a settings parser and one
method per point; `export` turns it into the `Admission` class that
componentize-py looks for in the app module:

    import switchyard_policy as sp

    class MaxTokens(sp.Policy):
        points = ["inference"]

        def parse_settings(self, doc):
            fields = sp.Fields(doc)
            limit = fields.integer("max_tokens", minimum=1)
            fields.done()
            return limit

        def inference(self, limit, request):
            if request.max_tokens is not None and request.max_tokens > limit:
                return sp.deny("max_tokens_exceeded",
                               f"max_tokens must be at most {limit}, got {request.max_tokens}")
            return sp.allow()

    Admission = sp.export(MaxTokens())

Requests are the WIT records as componentize-py generates them: attributes
in snake_case (`request.caller.project`, `request.max_tokens`), `None` for
an absent option. Decisions are point-independent (`allow()`, `deny(code,
message)`, `patch(max_tokens=...)`); `export` builds the point's WIT
variant from them. The WIT bindings (`wit_world`) exist only inside the
component build, so everything here except `export` and `log` runs in a
plain Python too.

Layout: decisions, the settings reader (`parse_document`, `Fields`), the
`Policy` base class, then `export` and `log`, the parts that touch the
bindings.
"""

import json

POINTS = ("inference", "deploy", "transfer", "federation")

# Deny code of a point the policy does not judge (the default method body;
# the host refuses to bind a policy there, so it is only a safety net).
POINT_NOT_SUPPORTED = "point_not_supported"

# Deny code of an evaluation before any settings were accepted: the host
# always validates first, so this means a host bug.
NOT_CONFIGURED = "not_configured"

# The field each point's patch may set (the WIT's `*-patch` records).
PATCH_FIELDS = {
    "inference": ("max_tokens",),
    "deploy": ("memory_per_gpu_bytes",),
    "transfer": ("max_bytes_per_second",),
    "federation": ("max_tokens",),
}


# --- Decisions --------------------------------------------------------------


class Decision:
    """A point-independent decision: `allow`, `deny` or `patch`."""

    __slots__ = ("kind", "code", "message", "fields")

    def __init__(self, kind, code=None, message=None, fields=None):
        self.kind = kind
        self.code = code
        self.message = message
        self.fields = fields or {}

    def __repr__(self):
        if self.kind == "deny":
            return f"deny({self.code!r}, {self.message!r})"
        if self.kind == "patch":
            return f"patch({self.fields!r})"
        return "allow()"


def allow():
    """Let the request go ahead unchanged."""
    return Decision("allow")


def deny(code, message):
    """Refuse with a stable code (`model_not_allowed`) and a message for the
    person who reads it."""
    return Decision("deny", code=str(code), message=str(message))


def patch(**fields):
    """Let the request go ahead changed: `patch(max_tokens=1024)` (inference,
    federation), `patch(memory_per_gpu_bytes=...)` (deploy),
    `patch(max_bytes_per_second=...)` (transfer)."""
    return Decision("patch", fields=fields)


# --- Settings ---------------------------------------------------------------


class SettingsError(ValueError):
    """Settings the policy cannot use; the host shows the message to the
    operator as is, so write it for them."""


def parse_document(text):
    """The settings JSON as a dict. An empty document reads as `{}`, as the
    Rust SDK reads it, so a policy whose settings all have defaults can be
    bound without a file."""
    if not text.strip():
        return {}
    try:
        doc = json.loads(text)
    except ValueError as error:
        raise SettingsError(f"invalid settings: {error}") from None
    if not isinstance(doc, dict):
        raise SettingsError("invalid settings: expected a JSON object")
    return doc


class Fields:
    """Reads the fields of one JSON object, with messages that name where a
    field is (`rule 2: models must be a list of strings`), and refuses
    fields nobody read (`done()`), as serde's `deny_unknown_fields` does."""

    def __init__(self, doc, where="settings"):
        if not isinstance(doc, dict):
            raise SettingsError(f"{where} must be a JSON object")
        self.doc = doc
        self.where = where
        self.read = set()

    def _take(self, name, default, required):
        self.read.add(name)
        if name in self.doc and self.doc[name] is not None:
            return self.doc[name], True
        if required:
            raise SettingsError(f"{self.where}: missing field `{name}`")
        return default, False

    def string(self, name, default=None, required=False):
        """A string field."""
        value, given = self._take(name, default, required)
        if given and not isinstance(value, str):
            raise SettingsError(f"{self.where}: `{name}` must be a string")
        return value

    def strings(self, name, default=None, required=False):
        """A list of strings."""
        value, given = self._take(name, default, required)
        if given and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise SettingsError(f"{self.where}: `{name}` must be a list of strings")
        return value

    def integer(self, name, default=None, required=True, minimum=None, maximum=None):
        """A whole number, optionally bounded."""
        value, given = self._take(name, default, required)
        if not given:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingsError(f"{self.where}: `{name}` must be a whole number")
        if minimum is not None and value < minimum:
            raise SettingsError(f"{self.where}: `{name}` must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise SettingsError(f"{self.where}: `{name}` must be at most {maximum}, got {value}")
        return value

    def choice(self, name, choices, default=None, required=False):
        """A string that must be one of `choices`."""
        value = self.string(name, default=default, required=required)
        if value is not None and value not in choices:
            listed = ", ".join(choices)
            raise SettingsError(f"{self.where}: `{name}` must be one of {listed}, got {value!r}")
        return value

    def objects(self, name, required=False):
        """A list of objects, each as its own `Fields` (numbered from 1, as an
        operator counts them in the file)."""
        value, given = self._take(name, [], required)
        if given and not isinstance(value, list):
            raise SettingsError(f"{self.where}: `{name}` must be a list")
        singular = name[:-1] if name.endswith("s") else name
        return [Fields(item, f"{singular} {number}") for number, item in enumerate(value, 1)]

    def done(self):
        """Refuses fields that were not read: a typo must not pass silently."""
        unknown = sorted(set(self.doc) - self.read)
        if unknown:
            expected = ", ".join(f"`{n}`" for n in sorted(self.read))
            raise SettingsError(f"{self.where}: unknown field `{unknown[0]}`, expected one of {expected}")


# --- The policy -------------------------------------------------------------


class Policy:
    """Subclass it: list `points`, parse the settings, judge each point.

    A point left out keeps the default method, which denies with
    `point_not_supported`."""

    points = ()

    def parse_settings(self, doc):
        """Turns the settings dict into whatever the methods below take;
        raises `SettingsError` for settings that cannot be used."""
        return doc

    def inference(self, settings, request):
        """Judges an OpenAI-compatible request."""
        return _unsupported("inference")

    def deploy(self, settings, request):
        """Judges placing an engine replica on a node."""
        return _unsupported("deploy")

    def transfer(self, settings, request):
        """Judges a model file copy."""
        return _unsupported("transfer")

    def federation(self, settings, request):
        """Judges a call from a peer cluster."""
        return _unsupported("federation")


def _unsupported(point):
    return deny(POINT_NOT_SUPPORTED, f"this policy does not judge the {point} point")


# --- The component ----------------------------------------------------------


def export(policy):
    """The `Admission` class componentize-py exports: keeps the settings the
    instance accepted and hands them to `policy` on every evaluation."""
    from componentize_py_types import Err
    from wit_world.imports import switchyard_plugin_types as plugin_types
    from wit_world.imports import switchyard_policy_types as types

    unknown = [p for p in policy.points if p not in POINTS]
    if unknown:
        raise ValueError(f"unknown admission point {unknown[0]!r}; points: {', '.join(POINTS)}")

    # One component instance judges with one binding's settings; the host
    # validates on every fresh instance before it evaluates.
    state = {"settings": None, "configured": False}

    def to_wit(point, decision):
        prefix = point.capitalize()
        variant = getattr(types, f"{prefix}Decision_Allow")
        if decision.kind == "deny":
            denial = plugin_types.Denial(code=decision.code, message=decision.message)
            return getattr(types, f"{prefix}Decision_Deny")(denial)
        if decision.kind == "patch":
            unknown = set(decision.fields) - set(PATCH_FIELDS[point])
            if unknown:
                raise ValueError(f"a {point} patch cannot set {sorted(unknown)[0]}")
            fields = {name: decision.fields.get(name) for name in PATCH_FIELDS[point]}
            patched = getattr(types, f"{prefix}Patch")(**fields)
            return getattr(types, f"{prefix}Decision_Patch")(patched)
        return variant()

    def judge(point, request):
        if not state["configured"]:
            message = "the policy was evaluated before its settings were accepted"
            return to_wit(point, deny(NOT_CONFIGURED, message))
        return to_wit(point, getattr(policy, point)(state["settings"], request))

    class Admission:
        def points(self):
            return [getattr(types.AdmissionPoint, p.upper()) for p in policy.points]

        def validate_settings(self, settings):
            # A refused document drops the settings accepted before, so the
            # instance fails closed rather than judging with stale ones.
            state["configured"] = False
            try:
                state["settings"] = policy.parse_settings(parse_document(settings))
            except SettingsError as error:
                raise Err(str(error)) from None
            state["configured"] = True

        def evaluate_inference(self, request):
            return judge("inference", request)

        def evaluate_deploy(self, request):
            return judge("deploy", request)

        def evaluate_transfer(self, request):
            return judge("transfer", request)

        def evaluate_federation(self, request):
            return judge("federation", request)

    return Admission


def log(level, message):
    """Writes a line through the host's logger: level is `"trace"`,
    `"debug"`, `"info"`, `"warn"` or `"error"`."""
    from wit_world.imports import log as host_log
    from wit_world.imports import switchyard_plugin_types as plugin_types

    host_log.log(getattr(plugin_types.LogLevel, level.upper()), str(message))
