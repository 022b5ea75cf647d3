"""The models pages' flows (to be written with the pages)."""


def import_by_url(c):
    c.go("/console/models")
    c.shot("models")
