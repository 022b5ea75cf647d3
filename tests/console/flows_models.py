"""The models pages: fetch a model by URL with its progress drawn, then its
revision's files and digests; leaves `tiny@r1` in the library."""

from selenium.webdriver.common.by import By


def import_by_url(c):
    sha256 = c.env["SWITCHYARD_CONSOLE_MODEL_SHA256"]
    c.go("/console/models")
    c.until_text("The library is empty.")
    # A refusal shows the API's code, and the form keeps what was typed.
    c.fill("File URL", "ftp://files.example/tiny.gguf")
    c.fill("SHA-256 of the file", sha256)
    c.fill("Model id", "tiny")
    c.fill("Revision", "r1")
    c.press("Fetch")
    c.until("the refusal", lambda: "invalid_url" in c.text())
    if c.field("Model id").get_attribute("value") != "tiny":
        raise AssertionError("the refused form lost its values")
    c.fill("File URL", c.env["SWITCHYARD_CONSOLE_MODEL_URL"])
    c.fill("SHA-256 of the file", sha256)
    c.fill("Model id", "tiny")
    c.fill("Revision", "r1")
    c.press("Fetch")
    c.until("the import page", lambda: c.path() == "/console/models/import")
    # The file arrives at 8 MiB/s: the bar is drawn while it downloads.
    c.until("a progress bar while downloading",
            lambda: "Downloading" in c.text() and c.find_all("#import progress"))

    def midway():
        if "is in the library" in c.text():
            return True
        bars = c.find_all("#import progress")
        return bars and float(bars[0].get_attribute("value") or 0) > 5
    c.until("the download under way", midway)
    c.shot("model-import")
    c.until("the import's end", lambda: "is in the library" in c.text())
    done = c.find("#import progress")
    if float(done.get_attribute("value")) != 100.0:
        raise AssertionError(f"the finished bar reads {done.get_attribute('value')}")

    c.driver.find_element(By.LINK_TEXT, "Open the revision").click()
    c.until("the revision page", lambda: c.path() == "/console/models/tiny/r1")
    files = c.find("#files").text
    if "tiny.gguf" not in files or sha256 not in files:
        raise AssertionError(f"the revision's files lack the file or its digest: {files}")
    c.shot("model-revision")

    c.go("/console/models")
    c.until_text("tiny")
    c.shot("models")
