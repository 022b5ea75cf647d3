"""Signing in and out, the overview, a narrow screen, and a key that may
only send requests."""

import os


def sign_in(c):
    # A page asked for before signing in leads to the sign-in form.
    c.go("/console/keys")
    c.until("the sign-in form", lambda: c.path() == "/console/sign-in")
    c.shot("sign-in")
    # A wrong token is refused with the API's code, and nothing opens.
    field = c.field("Admin token or API key")
    field.send_keys("sy_" + "0" * 64)
    c.press("Sign in")
    c.until("the refusal", lambda: "unauthorized" in c.text())
    c.sign_in(os.environ["SWITCHYARD_ADMIN_TOKEN"])
    c.until_text("Requests and errors per second")
    for card in ["Carrier", "Replicas", "Nodes", "Deployments", "Requests"]:
        if card not in c.text():
            raise AssertionError(f"the overview lacks {card}")
    c.shot("overview")


def narrow_screen(c):
    c.viewport(390, 844)
    try:
        for path in ["/console/", "/console/nodes", "/console/deployments", "/console/keys"]:
            c.go(path)
            if not c.no_horizontal_overflow():
                raise AssertionError(f"{path} is wider than a 390 px screen")
        c.go("/console/")
        c.shot("overview-narrow")
    finally:
        c.viewport(1280, 800)


def sign_out(c):
    c.go("/console/")
    c.sign_out()
    # The session is gone: a page leads back to signing in.
    c.go("/console/keys")
    c.until("the sign-in form", lambda: c.path() == "/console/sign-in")


def inference_key_sees_no_admin_pages(c):
    c.sign_in(os.environ["SWITCHYARD_CONSOLE_INFERENCE_KEY"])
    nav = [a.text for a in c.find_all("header nav a")]
    if nav != ["Overview", "Try prompt"]:
        raise AssertionError(f"an inference key's navigation shows {nav}")
    for path in ["/console/nodes", "/console/models", "/console/deployments", "/console/admission",
                 "/console/plugins", "/console/keys", "/console/audit", "/console/usage", "/console/carrier", "/console/federation"]:
        c.go(path)
        if "Not allowed" not in c.text() or "forbidden" not in c.text():
            raise AssertionError(f"{path} is not the 403 page for an inference key")
    status = c.driver.execute_script(
        "return fetch('/console/keys').then(r => r.status)")
    if status != 403:
        raise AssertionError(f"/console/keys answered {status} to an inference key")
    c.shot("forbidden")
    c.sign_out()
