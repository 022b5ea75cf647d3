"""The console's browser harness: Debian's chromium through chromedriver
(selenium), headless at 1280x800, with the network log on so a flow can
prove no page asked anything of another host.

Flows get a `Console`: it signs in, goes to pages, fills labelled fields,
waits for conditions (never a fixed sleep), and writes a screenshot of
every page it is asked to into the run's folder.
"""

import json
import os
import time
import urllib.parse

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

PATIENCE = 60.0


class FlowFailed(AssertionError):
    pass


class Console:
    def __init__(self):
        self.base = os.environ["SWITCHYARD_CONSOLE_URL"].rstrip("/")
        self.shots = os.environ["SWITCHYARD_CONSOLE_SHOTS"]
        os.makedirs(self.shots, exist_ok=True)
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("SWITCHYARD_CHROMIUM", "/usr/bin/chromium")
        for flag in [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1280,800", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-default-apps",
            "--disable-extensions", "--hide-scrollbars",
            # A request to any other host fails at once rather than waiting on
            # DNS; the network log below still records that it was made.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
        ]:
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        service = Service(executable_path=os.environ.get("SWITCHYARD_CHROMEDRIVER", "/usr/bin/chromedriver"))
        self.driver = webdriver.Chrome(service=service, options=options)
        self.viewport(1280, 800)
        self.requested = []
        self.env = os.environ

    def viewport(self, width, height):
        """The page's viewport (what a screenshot holds), whatever the
        window's frame takes."""
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600})

    # -- navigation -----------------------------------------------------
    def url(self, path):
        return self.base + path

    def go(self, path):
        self.driver.get(self.url(path))
        self.collect_network()

    def path(self):
        return urllib.parse.urlparse(self.driver.current_url).path

    def find(self, css):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def find_all(self, css):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def text(self):
        return self.driver.find_element(By.TAG_NAME, "body").text

    def field(self, label):
        """The input, select or textarea whose <label> reads `label`."""
        for element in self.find_all("label"):
            if element.text.strip() == label:
                target = element.get_attribute("for")
                if target:
                    return self.driver.find_element(By.ID, target)
                return element.find_element(By.CSS_SELECTOR, "input, select, textarea")
        raise FlowFailed(f"no field labelled {label!r} on {self.path()}")

    def fill(self, label, value):
        element = self.field(label)
        if element.tag_name == "select":
            from selenium.webdriver.support.select import Select
            Select(element).select_by_visible_text(value)
        else:
            element.clear()
            element.send_keys(value)
        return element

    def button(self, text, within=None):
        scope = within or self.driver
        for element in scope.find_elements(By.CSS_SELECTOR, "button, input[type=submit], a.button"):
            if element.text.strip() == text or element.get_attribute("aria-label") == text:
                return element
        raise FlowFailed(f"no button {text!r} on {self.path()}")

    def press(self, text, within=None):
        self.button(text, within).click()
        self.collect_network()

    # -- waiting --------------------------------------------------------
    def until(self, what, check, patience=PATIENCE):
        deadline = time.monotonic() + patience
        last = None
        while time.monotonic() < deadline:
            try:
                result = check()
                if result:
                    return result
            # Not there yet, gone stale, or a node of the page a form's
            # answer is replacing (chromium may refuse to read it): look again.
            except (WebDriverException, FlowFailed) as e:
                last = e
            time.sleep(0.1)
        self.shot("failed-" + "".join(ch if ch.isalnum() else "-" for ch in what)[:60])
        raise FlowFailed(f"timed out waiting for {what} on {self.path()} (last: {last})")

    def until_text(self, text, patience=PATIENCE):
        return self.until(f"the text {text!r}", lambda: text in self.text(), patience)

    def flash(self):
        """The message a form left (`ok` or `error`, text), if any."""
        for element in self.find_all("p.flash, div.flash"):
            kind = "error" if "error" in element.get_attribute("class") else "ok"
            return kind, element.text
        return None

    def expect_done(self, contains=""):
        flash = self.flash()
        if not flash or flash[0] != "ok" or contains not in flash[1]:
            self.shot("failed-expected-done")
            raise FlowFailed(f"expected a done message containing {contains!r} on {self.path()}, got {flash}")
        return flash[1]

    def expect_refused(self, code):
        flash = self.flash()
        if not flash or flash[0] != "error" or code not in flash[1]:
            self.shot("failed-expected-refusal")
            raise FlowFailed(f"expected the refusal {code!r} on {self.path()}, got {flash}")
        return flash[1]

    # -- evidence -------------------------------------------------------
    def shot(self, name):
        self.driver.save_screenshot(os.path.join(self.shots, f"{name}.png"))

    def collect_network(self):
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                self.requested.append(message["params"]["request"]["url"])

    def foreign_requests(self):
        self.collect_network()
        own = urllib.parse.urlparse(self.base)
        foreign = []
        for url in self.requested:
            parsed = urllib.parse.urlparse(url)
            if parsed.scheme in ("data", "about", "blob"):
                continue
            if (parsed.scheme, parsed.netloc) != (own.scheme, own.netloc):
                foreign.append(url)
        return foreign

    def no_horizontal_overflow(self):
        return self.driver.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth + 1")

    def sign_in(self, token):
        """Signs in with the keyboard alone: the field has focus, Enter submits."""
        self.go("/console/sign-in")
        active = self.driver.switch_to.active_element
        if active.get_attribute("name") != "token":
            raise FlowFailed("the token field does not have focus on the sign-in page")
        active.send_keys(token)
        active.send_keys(Keys.ENTER)
        self.until("the overview", lambda: self.path() == "/console/")

    def sign_out(self):
        self.press("Sign out")
        self.until("the sign-in page", lambda: self.path() == "/console/sign-in")

    def quit(self):
        self.driver.quit()
