"""The admission pages: bind model-allowlist to the inference chain, see
the generation reach every replica, dry-run a denied and an allowed
request. The chain is left allowing `tiny*` (the Try prompt flow streams
from `tiny`)."""



def chain_and_dry_run(c):
    c.go("/console/admission")
    c.until_text("Generation")
    for point in ["inference", "deploy", "transfer", "federation"]:
        if point not in c.text():
            raise AssertionError(f"the admission page lists no {point} point")
    c.shot("admission-points")
    c.find("a[href=\"/console/admission/inference\"]").click()
    c.until_text("Set the inference chain")

    c.fill("Policy", "model-allowlist 1.0.0")
    c.fill("Mode", "enforce")
    c.fill("On error", "deny (fail closed)")
    c.fill("Settings (JSON)", '{"default": ["tiny*"]}')
    c.press("Set chain")
    c.until("the chain set", lambda: "chain is set" in c.text())
    done = c.expect_done("The inference chain is set: generation")
    generation = done.split("generation ")[1].split(".")[0]
    c.until_text(f"Chain at generation {generation}")
    # The replicas follow the new generation (the page redraws them).
    c.until("every replica on the new generation",
            lambda: f"1 of 1 current at generation {generation}" in c.text())
    c.shot("admission")

    # A model the list does not allow: denied, with the policy's code.
    c.fill("Model", "gpt-4o")
    c.press("Evaluate")
    c.until("the verdict", lambda: "Decision:" in c.text())
    verdict = c.find("section.verdict").text
    for seen in ["Decision: deny", "model_not_allowed", "model-allowlist@1.0.0", "gpt-4o"]:
        if seen not in verdict:
            raise AssertionError(f"the verdict lacks {seen!r}: {verdict}")
    c.shot("admission-dry-run")

    # `tiny` is allowed.
    c.fill("Model", "tiny")
    c.press("Evaluate")
    c.until("the allow", lambda: "Decision: allow" in c.find("section.verdict").text)

    # "Add step" draws one more step without losing the first; an empty
    # step is dropped. Monitor mode makes a new generation, then a rollback
    # restores the enforced chain (a newer generation with the older chain).
    c.go("/console/admission/inference")
    c.until_text("Set the inference chain")
    c.press("Add step")
    c.until("a second step", lambda: "Step 2" in c.text())
    if c.field("Policy").get_attribute("value") != "model-allowlist@1.0.0":
        raise AssertionError("adding a step lost the first one")
    c.fill("Mode", "monitor (log what it would do)")
    c.press("Set chain")
    c.until("the monitor chain", lambda: "chain is set" in c.text())
    monitor = int(c.expect_done("generation").split("generation ")[1].split(".")[0])
    chain = c.find("section[aria-labelledby=chain-title]").text
    if "monitor" not in chain or "Step 2" in chain:
        raise AssertionError(f"the chain is not one monitored policy: {chain}")
    c.press("Roll back")
    c.until("the rollback", lambda: "Rolled back" in c.text())
    c.expect_done(f"generation {monitor + 1}")
    chain = c.find("section[aria-labelledby=chain-title]").text
    if "enforce" not in chain or "tiny*" not in chain:
        raise AssertionError(f"the rollback did not restore the enforced chain: {chain}")

    # Another point takes a request record as JSON, prefilled with its shape.
    c.go("/console/admission/deploy/dry-run")
    if '"memory_per_gpu_bytes"' not in c.field("Request record (JSON)").get_attribute("value"):
        raise AssertionError("the deploy record is not prefilled")
    c.press("Evaluate record")
    c.until("the deploy verdict", lambda: "Decision: allow" in c.find("section.verdict").text)
