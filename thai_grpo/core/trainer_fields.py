"""The field names of the trainers' config classes, checked in (``trainer_fields.json``) so that a misspelt config
key is refused as Snakemake parses the workflow, without importing TRL (seconds). After an upgrade,
``python -m thai_grpo_tools.trainer_fields`` rewrites the file.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

FIELDS_FILE = Path(__file__).with_name("trainer_fields.json")


@cache
def known_fields() -> dict:
    """The checked-in list (``trainer_fields.json``), as ``thai_grpo_tools.trainer_fields`` wrote it."""
    return json.loads(FIELDS_FILE.read_text(encoding="utf-8"))


def fields_of(cls: str) -> frozenset[str]:
    """The field names of one trainer config class, from the checked-in list."""
    return frozenset(known_fields()["fields"][cls])


def unknown_key(section: dict, known, where: str, owner: str) -> str | None:
    """A one-line refusal for the first key of ``section`` not in ``known``, naming the nearest valid one, or None."""
    unknown = sorted(set(section or {}) - set(known))
    if not unknown:
        return None
    nearest = difflib.get_close_matches(unknown[0], sorted(known), n=1)
    hint = f"did you mean {nearest[0]}?" if nearest else "check the spelling against its documentation"
    return f"{where}.{unknown[0]} is not a field of {owner}: {hint}"
