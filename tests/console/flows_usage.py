"""Usage: the prompts sent from the console are metered, drawn per group,
and the same report downloads as CSV."""


def report_and_export(c):
    c.go("/console/usage?group_by=model&granularity=hour")
    c.until_text("Tokens by model")
    bars = c.find_all("svg.bars rect.completion")
    if not bars:
        raise AssertionError("no bar drawn for the metered prompts")
    if not c.find_all("tbody tr"):
        raise AssertionError("the report has no row")
    href = c.find("#usage-export").get_attribute("href")
    csv = c.driver.execute_script(
        "return fetch(arguments[0]).then(r => r.text())", href)
    if not csv.startswith("bucket,model,requests,prompt_tokens,completion_tokens,cached_tokens\n"):
        raise AssertionError(f"the export reads {csv[:200]!r}")
    c.shot("usage")
