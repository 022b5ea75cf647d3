"""The deployments pages' flows (to be written with the pages)."""


def create_until_ready(c):
    c.go("/console/deployments")
    c.shot("deployments")
