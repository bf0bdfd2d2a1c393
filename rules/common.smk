# Helpers shared by the rule files: config lookups and the path of each model's adapter.

import sys

from snakemake.utils import validate

from thai_grpo.config import ConfigError, check_config, coerce_scalars, check_trainer_fields, variant_settings
from thai_grpo.data import SYSTEM_PROMPT

config.update(coerce_scalars(config))
validate(config, "../config/schema.yaml")
try:
    check_config(config)
except ConfigError as error:
    sys.exit(f"config error: {error}")

SYSTEM = config["data"].get("system_prompt", SYSTEM_PROMPT)
VARIANTS = list(config["variants"])
EVAL_MODELS = config["eval"]["models"]


def adapter_of(model):
    """The adapter folder a held-out model samples with; the bare base has none."""
    if model == "base":
        return {}
    if model == "sft":
        return {"adapter": "results/model/sft_adapter"}
    return {"adapter": f"results/runs/{model}/adapter"}

