"""Report: what a reader sees, built from the other stages' outputs.

results.json from the scores and training logs (``results``), the figures (``figures``, ``figures_gains``,
``plotting``), sentences from numbers (``verdicts``), the chapter's lessons the report's body shows (``lessons``) and
the HTML report (``html``). The top layer: it may import every other subpackage; nothing in the package imports it.
"""
