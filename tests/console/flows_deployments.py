"""The deployments page: preview where `tiny@r1` would go (the scheduler
names gpu-a), create it, and watch its replica stage and become ready;
leaves it serving as `tiny` with 100 ms per token for the Try prompt flow."""


def create_until_ready(c):
    node = c.env["SWITCHYARD_CONSOLE_PENDING_NODE"]
    c.go("/console/deployments")
    c.until_text("No deployment yet.")
    c.fill("Model", "tiny@r1")
    c.fill("Engine", "reference")
    c.fill("Replicas", "1")
    c.fill("GPUs per replica", "1")
    c.fill("Token delay ms", "100")
    # Two GPUs per replica fit nowhere: the preview says why gpu-a refuses.
    c.fill("GPUs per replica", "2")
    c.press("Preview")
    c.until("the refusing preview", lambda: c.find_all("#refused"))
    refused = c.find("#refused").text
    if node not in refused or "1 suitable free GPUs, 2 needed" not in refused:
        raise AssertionError(f"the preview does not say why {node} refuses: {refused}")
    c.fill("GPUs per replica", "1")
    c.press("Preview")
    c.until("the preview", lambda: c.find_all("#placements"))
    placements = c.find("#placements").text
    if node not in placements:
        raise AssertionError(f"the preview does not place on {node}: {placements}")
    if "Every replica fits" not in c.text():
        raise AssertionError("the preview does not say the replica fits")
    # The form keeps what was typed.
    if c.field("Token delay ms").get_attribute("value") != "100":
        raise AssertionError("the preview lost the form's values")
    c.shot("deployment-preview")

    c.press("Create")
    c.until("the created message",
            lambda: (flash := c.flash()) and flash[0] == "ok" and "Deployment tiny created" in flash[1])
    seen = set()

    def ready():
        states = [row.get_attribute("data-replica-state")
                  for row in c.find_all('section[data-deployment="tiny"] tr[data-replica-state]')]
        seen.update(states)
        if any(s == "staging" for s in states) and c.find_all('section[data-deployment="tiny"] progress'):
            seen.add("progress drawn")
        return states == ["ready"]

    c.until("the replica ready", ready, patience=120)
    c.shot("deployments")
    print(f"deployment states seen: {sorted(seen)}")
