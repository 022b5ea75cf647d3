"""The carrier page: the status of the `tunnel` set, then a dry-run switch
to `nats`: the preflight (ok, or its blockers with codes) and the live
replicas on the confirmation. The one real change is an upgrade of the
active set's tunnel component to another version (the same protocol as a
switch), confirmed, drawn phase by phase, and waited for until the
cluster is stable on `tunnel` again: the later flows need the carrier."""

import os



def dry_run_switch(c):
    c.go("/console/carrier")
    c.until_text("Carrier set")
    status = c.find("#carrier-status").text
    for seen in ["tunnel", "stable", "Replicas", "Workers"]:
        if seen not in status:
            raise AssertionError(f"the carrier status lacks {seen!r}: {status}")
    c.until("the phases drawn", lambda: c.find("#carrier-phases [data-final]"))
    c.shot("carrier")

    c.fill("Target carrier set", "nats")
    c.press("Check the switch")
    c.until("the preflight", lambda: "Live replicas that would switch" in c.text())
    report = c.find("section.preflight").text
    ok = "Nothing blocks the switch" in report
    if not ok:
        # Each blocker names its code.
        codes = [e.text for e in c.find_all("ul.blockers li code")]
        known = {"already_active", "change_under_way", "replica_cannot_build",
                 "replica_silent", "worker_cannot_follow"}
        if not codes or not set(codes) <= known:
            raise AssertionError(f"the blockers carry no known code: {report}")
    replicas = c.find_all("section[aria-labelledby=confirm-title] table")[0]
    rows = replicas.find_elements("css selector", "tbody tr")
    if not rows:
        raise AssertionError("the confirmation lists no live replica")
    if ok:
        c.button("Switch to nats now")  # offered, not pressed
    c.shot("carrier-preflight")

    # Nothing moved.
    c.go("/console/carrier")
    c.until("the carrier page", lambda: "Carrier set" in c.text())
    if "tunnel" not in c.find("#carrier-status").text:
        raise AssertionError("the dry run changed the carrier")

    upgrade_tunnel(c)

    # The plugins, admission and carrier pages fit a narrow screen.
    c.viewport(390, 844)
    try:
        for path in ["/console/plugins", "/console/admission", "/console/admission/inference",
                     "/console/admission/inference/dry-run", "/console/carrier"]:
            c.go(path)
            if not c.no_horizontal_overflow():
                c.shot("failed-narrow-" + path.strip("/").replace("/", "-"))
                raise AssertionError(f"{path} is wider than a 390 px screen")
        c.go("/console/carrier")
        c.shot("carrier-narrow")
    finally:
        c.viewport(1280, 800)


def upgrade_tunnel(c):
    tunnel = os.path.join(os.path.dirname(c.env["SWITCHYARD_CONSOLE_POLICY"]), "tunnel.wasm")
    version = "0.0.1-console"
    c.go("/console/plugins")
    c.fill("Name", "tunnel")
    c.fill("Version", version)
    c.field("Component file (.wasm)").send_keys(tunnel)
    c.press("Upload")
    c.until("the tunnel upload", lambda: f"Uploaded tunnel {version}" in c.text())
    c.expect_done(f"tunnel {version}")

    c.go("/console/carrier")
    c.fill("Target carrier set", "tunnel (active)")
    c.fill("Component versions (optional)", f"tunnel={version}")
    c.press("Check the switch")
    c.until("the preflight", lambda: "Live replicas that would switch" in c.text())
    if "Nothing blocks the switch" not in c.find("section.preflight").text:
        raise AssertionError(f"the upgrade is blocked: {c.find('section.preflight').text}")
    c.press("Switch to tunnel now")
    c.until("the carrier page", lambda: c.path() == "/console/carrier" and c.flash())
    c.expect_done("The change to tunnel started")
    c.shot("carrier-change")
    # The phases redraw themselves until the change settles.
    c.until("the change to settle",
            lambda: c.find("#carrier-phases [data-final]") and "settled" in c.find("#carrier-phases").text,
            patience=150)
    phases = c.find("#carrier-phases").text
    for phase in ["prepare ✓", "commit ✓", "drain ✓", "stable ✓"]:
        if phase not in phases:
            raise AssertionError(f"the phases lack {phase!r}: {phases}")
    c.until("the status to follow",
            lambda: version in c.find("#carrier-status").text and "stable" in c.find("#carrier-status").text)
    c.shot("carrier-switched")
