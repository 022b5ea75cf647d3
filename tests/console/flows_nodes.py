"""The nodes page: approve the pending worker, then put it in maintenance
and back, leaving it healthy and schedulable for the deployment flow."""

from selenium.webdriver.common.by import By


def panel(c, name):
    return c.find(f'section.node[data-node="{name}"]')


def state(c, name):
    return panel(c, name).find_element(By.CSS_SELECTOR, "h2 [data-state]").text


def in_maintenance(c, name):
    return bool(panel(c, name).find_elements(By.CSS_SELECTOR, "[data-maintenance]"))


def act(c, label):
    """Presses a button that a refresh of the list may be redrawing."""
    def attempt():
        c.press(label)
        return True
    c.until(f"pressing {label!r}", attempt)


def until_done(c, contains):
    c.until(f"the message {contains!r}",
            lambda: (flash := c.flash()) and flash[0] == "ok" and contains in flash[1])


def approve_pending_node(c):
    name = c.env["SWITCHYARD_CONSOLE_PENDING_NODE"]
    c.go("/console/nodes")
    c.until(f"{name} pending", lambda: state(c, name) == "pending")
    text = panel(c, name).text
    for fact in ["Last heartbeat", "Machine", "GPUs", "L4", "24.0 GiB", "Engines"]:
        if fact not in text:
            raise AssertionError(f"the node's panel lacks {fact!r}: {text}")
    act(c, f"Approve {name}")
    until_done(c, f"Node {name} approved")
    c.until(f"{name} healthy", lambda: state(c, name) == "healthy")
    c.shot("nodes")

    act(c, f"Maintenance {name}")
    until_done(c, "in maintenance")
    c.until(f"{name} in maintenance", lambda: in_maintenance(c, name))
    act(c, f"Undrain {name}")
    until_done(c, "back to normal scheduling")
    c.until(f"{name} schedulable again",
            lambda: state(c, name) == "healthy" and not in_maintenance(c, name))

    # The registration tokens: the one the test's worker joined with is listed.
    if "Registration tokens" not in c.text() or "console" not in c.find("#tokens ~ div.table-wrap").text:
        raise AssertionError("the registration tokens are not listed")
