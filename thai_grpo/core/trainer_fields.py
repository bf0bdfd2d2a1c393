"""The field names of the trainers' config classes, kept as a checked-in list so that a misspelt config key is
refused when Snakemake parses the workflow (also by ``snakemake -n``), without importing TRL (seconds).

``trainer_fields.json`` holds, per class (TRL's ``GRPOConfig``, ``RLOOConfig``, ``DPOConfig``, ``RewardConfig``,
``SFTConfig`` and transformers' ``TrainingArguments``), its dataclass field names, with the library versions they
were read from. ``installed_fields()`` reads them from the installed libraries (imports TRL);
``python -m thai_grpo.core.trainer_fields`` rewrites the file after an upgrade; tests/test_knobs.py compares the two.
PPO's section is our own ``PPOSettings`` (``thai_grpo.methods.ppo``), read directly.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from pathlib import Path

FIELDS_FILE = Path(__file__).with_name("trainer_fields.json")
CLASSES = {"GRPOConfig": "trl", "RLOOConfig": "trl", "DPOConfig": "trl", "RewardConfig": "trl", "SFTConfig": "trl",
           "TrainingArguments": "transformers"}


def installed_fields() -> dict:
    """{"versions": {library: version}, "fields": {class name: sorted field names}} of the installed TRL and
    transformers (imports both)."""
    import dataclasses
    import importlib

    modules = {name: importlib.import_module(name) for name in set(CLASSES.values())}
    return {"versions": {name: module.__version__ for name, module in sorted(modules.items())},
            "fields": {cls: sorted(f.name for f in dataclasses.fields(getattr(modules[library], cls)))
                       for cls, library in CLASSES.items()}}


@cache
def known_fields() -> dict:
    """The checked-in list (``trainer_fields.json``), as ``installed_fields`` wrote it."""
    return json.loads(FIELDS_FILE.read_text(encoding="utf-8"))


def fields_of(cls: str) -> frozenset[str]:
    """The field names of one trainer config class, from the checked-in list."""
    return frozenset(known_fields()["fields"][cls])


def unknown_key(section: dict, known, where: str, owner: str) -> str | None:
    """A one-line refusal for the first key of ``section`` not in ``known``, naming the nearest valid one; None when
    every key is known."""
    unknown = sorted(set(section or {}) - set(known))
    if not unknown:
        return None
    nearest = difflib.get_close_matches(unknown[0], sorted(known), n=1)
    hint = f"did you mean {nearest[0]}?" if nearest else "check the spelling against its documentation"
    return f"{where}.{unknown[0]} is not a field of {owner}: {hint}"


if __name__ == "__main__":
    FIELDS_FILE.write_text(json.dumps(installed_fields(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FIELDS_FILE}")
