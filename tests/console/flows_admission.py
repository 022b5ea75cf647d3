"""The admission pages' flows (to be written with the pages)."""


def chain_and_dry_run(c):
    c.go("/console/admission")
    c.shot("admission")
