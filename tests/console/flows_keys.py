"""API keys: one created (its token shown once) and revoked."""


def create_and_revoke(c):
    c.go("/console/keys")
    c.fill("Name", "console-e2e")
    c.press("Create key")
    c.until_text("Key created")
    token = c.field("Token of " + c.find("section.created code").text).get_attribute("value")
    if not token.startswith("sy_"):
        raise AssertionError(f"the new key's token is {token!r}")
    c.shot("keys-created")
    # The token is on that answer only.
    c.go("/console/keys")
    if token in c.driver.page_source:
        raise AssertionError("the token is shown again")
    row = [r for r in c.find_all("tbody tr") if "console-e2e" in r.text][0]
    key_id = row.find_elements("css selector", "code")[0].text
    c.press(f"Revoke key {key_id}", within=row)
    c.until_text(f"Key {key_id} revoked.")
    c.expect_done("revoked")
    row = [r for r in c.find_all("tbody tr") if key_id in r.text][0]
    if "revoked" not in row.text:
        raise AssertionError(f"the key's row reads {row.text!r}")
    c.shot("keys")


def audit_trail(c):
    """The key revoked from the console is in the audit trail, as this
    session's key, from the browser's address, and the chain holds."""
    c.go("/console/audit")
    c.until_text("records checked")
    if "holds" not in c.find("#chain-title").find_element("xpath", "..").text:
        raise AssertionError("the audit chain does not hold")
    rows = [r for r in c.find_all("tbody tr") if "DELETE /api/keys/{id}" in r.text]
    if not rows:
        raise AssertionError("the console's revocation left no audit record")
    if "127.0.0.1" not in rows[0].text or "204" not in rows[0].text:
        raise AssertionError(f"the revocation's record reads {rows[0].text!r}")
    c.shot("audit")
