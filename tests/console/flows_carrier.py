"""The carrier pages' flows (to be written with the pages)."""


def dry_run_switch(c):
    c.go("/console/carrier")
    c.shot("carrier")
