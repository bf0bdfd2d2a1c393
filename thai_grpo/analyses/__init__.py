"""Analyses: what the report and the studies read from finished runs' records (the training-health flags, the KL
study, the update size, the chapter's contract beside each run's values). No job imports them, and they import no
trainer (``methods``) and no ``evaluation``: only ``data`` and ``core``.
"""
