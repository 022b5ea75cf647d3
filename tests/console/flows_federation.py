"""The federation pages' flows (to be written with the pages)."""


def pages(c):
    c.go("/console/federation")
    c.shot("federation")
