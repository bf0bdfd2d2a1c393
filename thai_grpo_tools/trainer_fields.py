"""`python -m thai_grpo_tools.trainer_fields`: rewrite ``thai_grpo/trainer_fields.json`` from the installed TRL and
transformers, after an upgrade."""

import dataclasses
import importlib
import json

from thai_grpo.workflow import FIELDS_FILE

CLASSES = {"GRPOConfig": "trl", "RLOOConfig": "trl", "DPOConfig": "trl", "RewardConfig": "trl", "SFTConfig": "trl",
           "TrainingArguments": "transformers"}


def installed_fields() -> dict:
    """{"versions": {library: version}, "fields": {class: sorted field names}} of the installed TRL and transformers."""
    modules = {name: importlib.import_module(name) for name in set(CLASSES.values())}
    return {"versions": {name: module.__version__ for name, module in sorted(modules.items())},
            "fields": {cls: sorted(f.name for f in dataclasses.fields(getattr(modules[library], cls)))
                       for cls, library in CLASSES.items()}}


if __name__ == "__main__":
    FIELDS_FILE.write_text(json.dumps(installed_fields(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {FIELDS_FILE}")
