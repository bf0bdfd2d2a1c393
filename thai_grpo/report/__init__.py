"""Report: what a reader sees, from the other stages' outputs; the top layer, which nothing in the package imports."""
