"""The plugins pages' flows (to be written with the pages)."""


def upload(c):
    c.go("/console/plugins")
    c.shot("plugins")
