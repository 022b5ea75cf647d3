"""The nodes pages' flows (to be written with the pages)."""


def approve_pending_node(c):
    c.go("/console/nodes")
    c.shot("nodes")
