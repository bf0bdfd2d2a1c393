"""Analyses: what the report and the studies read from finished runs' records (health flags, the KL study, update size,
the chapter's contract). No job imports them; they import no trainer (``methods``) and no ``evaluation``."""
