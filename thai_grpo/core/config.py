"""What a job shares of the config's rules (the checks are ``thai_grpo.workflow``): the refusal, our ``grpo`` keys."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value the pipeline refuses, with a message that says how to fix it."""


# Our own keys in a grpo section, never passed to TRL: num_processes (the batch check), reference (the KL's policy).
OURS = ("num_processes", "reference")


def inherited_args(section: dict, fields, exclude=()) -> tuple[dict, list[str]]:
    """(kept, dropped): the entries of a merged ``grpo`` section that another TRL config class (``fields``) also has,
    and the other keys, sorted. ``exclude`` names shared fields whose meaning differs (DPO's ``beta``)."""
    fields, exclude = set(fields), set(exclude)
    kept = {k: v for k, v in section.items() if (k in fields and k not in exclude) or k in OURS}
    return kept, sorted(set(section) - set(kept))
