"""The federation pages on a cluster with no peer yet: its identity, a join
token minted and shown once, a join to an address where no cluster listens
refused with the API's code, offers published (the `tiny` deployment from
the deployments flow as a service, when it is there) and withdrawn, the
empty states of requests, grants and copies, and job ownership set to
maintenance and back."""

BOGUS_PEER = "http://127.0.0.1:9/"


def pages(c):
    overview(c)
    pair(c)
    offers(c)
    empty_lists(c)
    eligibility(c)
    narrow(c)


def overview(c):
    c.go("/console/federation")
    c.until_text("Key fingerprint")
    fingerprint = c.find("#key-fingerprint").text
    if len(fingerprint.split()) != 8:
        raise AssertionError(f"the key fingerprint reads {fingerprint!r}")
    c.until_text("No peers yet")
    if "verified" not in c.text():
        raise AssertionError("the overview does not say federation runs here (verified)")
    c.shot("federation")


def pair(c):
    c.go("/console/federation/pair")
    c.press("Mint a join token")
    token = c.until("the minted token",
                    lambda: c.find("#join-token-minted").get_attribute("value"))
    command = c.field("The other cluster's operator runs").get_attribute("value")
    if token not in command or "switchyard federation join --url http://" not in command:
        raise AssertionError(f"the join command is {command!r}")
    # Shown once: the page read again holds no token.
    c.go("/console/federation/pair")
    c.until_text("Join another cluster")
    if c.find_all("#join-token-minted") or token in c.driver.page_source:
        raise AssertionError("the join token is shown again")

    # Nothing listens there: the API's code, and the form keeps the URL.
    c.fill("Peer URL", BOGUS_PEER)
    c.fill("Join token", "syj_" + "0" * 40)
    c.fill("Label for the peer", "nowhere")
    c.press("Join")
    c.until("the refusal", lambda: c.flash())
    c.expect_refused("NODE_UNAVAILABLE")
    if c.field("Peer URL").get_attribute("value") != BOGUS_PEER:
        raise AssertionError("the refused join lost the URL typed")
    if c.field("Join token").get_attribute("value"):
        raise AssertionError("the refused join shows the token typed back")
    c.shot("federation-pair")

    # Nothing was registered.
    c.go("/console/federation")
    c.until_text("No peers yet")


def offers(c):
    c.go("/console/federation/offers")
    c.until_text("Nothing is offered yet.")
    c.fill("Engine", "reference")
    c.fill("GPUs per replica", "1")
    c.press("Publish runtime")
    c.until("the published message", lambda: c.flash())
    c.expect_done("Offer reference-1gpu published")

    # The deployment the deployments flow left, shared as the service `tiny`.
    shared_tiny = False
    if c.find_all("#offer-deployment"):
        options = [o.text for o in c.find_all("#offer-deployment option")]
        tiny = next((o for o in options if o.startswith("tiny")), None)
        if tiny:
            c.fill("Deployment", tiny)
            c.fill("Service id", "tiny")
            c.press("Publish service")
            c.until("the published message", lambda: c.flash())
            c.expect_done("Offer tiny published")
            shared_tiny = True
    table = c.find("table").text
    if "reference-1gpu" not in table or (shared_tiny and "tiny" not in table):
        raise AssertionError(f"the offers table reads {table!r}")
    c.shot("federation-offers")

    # Publishing the same id again is the API's refusal.
    c.fill("Engine", "reference")
    c.fill("GPUs per replica", "1")
    c.press("Publish runtime")
    c.until("the refusal", lambda: c.flash())
    c.expect_refused("offer_exists")

    c.press("Withdraw offer reference-1gpu")
    c.until("the withdrawn message", lambda: c.flash())
    c.expect_done("withdrawn")
    listed = " ".join(t.text for t in c.find_all("table"))
    if "reference-1gpu" in listed:
        raise AssertionError("the withdrawn offer is still listed")


def empty_lists(c):
    c.go("/console/federation/requests")
    c.until_text("No peer has asked this cluster for access.")
    c.until_text("This cluster has asked no peer for access.")
    c.shot("federation-requests")

    c.go("/console/federation/grants")
    c.until_text("No grants yet, in either direction.")
    c.shot("federation-grants")

    c.go("/console/federation/share")
    c.until_text("No peers to share with.")

    c.go("/console/federation/copies")
    c.until_text("No model copies.")
    c.fill("Peer", "nowhere")
    c.fill("Model", "tiny")
    c.fill("Revision", "r1")
    c.press("Acquire or resume copy")
    c.until("the refusal", lambda: c.flash())
    c.expect_refused("not_found")
    c.shot("federation-copies")

    # A peer that is not there: the API's refusal, not a broken page.
    c.go("/console/federation/peers/nowhere")
    c.until_text("not_found")


def eligibility(c):
    c.go("/console/federation/eligibility")
    c.until_text("Jobs this cluster owns, not ended")
    c.fill("Peers' new jobs", "maintenance: refuse peers' new jobs")
    c.fill("Reason", "console test")
    c.press("Set")
    c.until("the set message", lambda: c.flash())
    c.expect_done("maintenance")
    c.until_text("console test")
    c.shot("federation-eligibility")
    c.fill("Peers' new jobs", "eligible: peers may make this cluster a job's owner (undrain)")
    c.fill("Reason", "")
    c.press("Set")
    c.until("the set message", lambda: c.flash())
    c.expect_done("eligible")


def narrow(c):
    c.viewport(390, 844)
    try:
        for path in ["/console/federation", "/console/federation/pair", "/console/federation/offers",
                     "/console/federation/grants", "/console/federation/copies"]:
            c.go(path)
            if not c.no_horizontal_overflow():
                raise AssertionError(f"{path} is wider than a 390 px screen")
        c.go("/console/federation/pair")
        c.shot("federation-pair-narrow")
    finally:
        c.viewport(1280, 800)
