"""Report: what a reader sees, built from the other stages' outputs: results.json, the figures, the verdicts in words
and the HTML page. The top layer: it may import every other subpackage; nothing in the package imports it."""
