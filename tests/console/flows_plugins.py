"""The plugins page: upload a policy and see its digest, world and size;
upload a file that is not a component and see the API's refusal."""

import hashlib
import os
import tempfile




def refused_with(c, code):
    return lambda: code in ((c.flash() or ("", ""))[1]) and c.flash()[0] == "error"


def upload(c):
    c.go("/console/plugins")
    c.until_text("Upload a component")
    policy = c.env["SWITCHYARD_CONSOLE_POLICY"]
    with open(policy, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()

    c.fill("Name", "model-allowlist")
    c.fill("Version", "1.0.0")
    c.field("Component file (.wasm)").send_keys(policy)
    c.press("Upload")
    c.until("the uploaded record", lambda: "Uploaded model-allowlist 1.0.0" in c.text())
    c.expect_done("model-allowlist 1.0.0")
    panel = c.find("section.created")
    for seen in [digest, "switchyard:policy/admission-policy", f"{len(data)} bytes", "policy"]:
        if seen not in panel.text:
            raise AssertionError(f"the uploaded panel lacks {seen!r}: {panel.text}")
    rows = [row.text for row in c.find_all("table tbody tr")]
    if not any("model-allowlist" in row and "1.0.0" in row for row in rows):
        raise AssertionError(f"the registry lists no model-allowlist 1.0.0: {rows}")
    c.shot("plugins")

    # A file that is not a component: the API's code, the fields kept.
    with tempfile.NamedTemporaryFile(suffix=".wasm", delete=False) as f:
        f.write(b"this is not a WebAssembly component\n")
        junk = f.name
    try:
        c.fill("Name", "not-a-component")
        c.fill("Version", "0.1.0")
        c.field("Component file (.wasm)").send_keys(junk)
        c.press("Upload")
        c.until("the refusal", refused_with(c, "invalid_component"))
        c.expect_refused("invalid_component")
        if c.field("Name").get_attribute("value") != "not-a-component":
            raise AssertionError("the refused form lost its name")
        c.shot("plugins-refused")
    finally:
        os.unlink(junk)

    # A component of a world the host does not serve: the API names it.
    other = os.path.join(os.path.dirname(policy), "other-world.wasm")
    if os.path.exists(other):
        c.fill("Name", "other-world")
        c.fill("Version", "0.1.0")
        c.field("Component file (.wasm)").send_keys(other)
        c.press("Upload")
        c.until("the refusal", refused_with(c, "unsupported_world"))
        c.expect_refused("unsupported_world")
