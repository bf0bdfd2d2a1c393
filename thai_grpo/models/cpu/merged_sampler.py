"""A LoRA policy's rollouts from a merged copy (W + scale * B A, refreshed before each rollout): no LoRA products per
decoding step, and the policy is never merged and unmerged, which would round its frozen base each step."""

from __future__ import annotations


def lora_layers(policy) -> dict:
    """{module name in the plain model: LoRA layer} of a PeftModel (PEFT's ``LoraLayer`` modules)."""
    from peft.tuners.lora import LoraLayer

    base = policy.get_base_model()
    return {name: module for name, module in base.named_modules() if isinstance(module, LoraLayer)}


def can_merge_copy(policy) -> bool:
    """True for a PeftModel on a CPU with a float32 base (``MERGE_KEEPS_UPDATE``) and no active LoRA dropout."""
    import torch

    from thai_grpo.models.loading import MERGE_KEEPS_UPDATE, weights_dtype

    if not hasattr(policy, "get_base_model") or policy.device.type != "cpu":
        return False
    if weights_dtype(policy) not in MERGE_KEEPS_UPDATE:
        return False
    for layer in lora_layers(policy).values():
        for adapter in layer.active_adapters:
            dropout = layer.lora_dropout[adapter]
            if not isinstance(dropout, torch.nn.Identity) and not (dropout.p == 0 or not dropout.training):
                return False
    return True


class MergedCopy:
    """A plain model (the base's class and config) holding ``policy``'s merged weights, re-folded by ``refresh()``."""

    def __init__(self, policy):
        import copy

        import torch

        self.policy = policy
        base = policy.get_base_model()
        with torch.device("meta"):
            model = type(base)(base.config)
        model = model.to_empty(device=policy.device).to(base.dtype)
        self.layers = lora_layers(policy)
        # the base's own weights under their plain names (an adapted layer's frozen W: refresh adds its delta)
        model.load_state_dict({name.replace(".base_layer", ""): value for name, value in base.state_dict().items()
                               if "lora_" not in name})
        model.tie_weights()
        with torch.no_grad():  # buffers outside the state dict (rotary frequencies): uninitialised after to_empty
            own = dict(base.named_buffers())
            for name, buffer in model.named_buffers():
                buffer.copy_(own[name])
        model.generation_config = copy.deepcopy(base.generation_config)
        self.model = model.eval().requires_grad_(False)
        self.refresh()

    def refresh(self):
        """Fold each adapted layer's current weights (frozen W plus the active adapters' delta) into the copy."""
        import torch

        with torch.no_grad():
            for name, layer in self.layers.items():
                weight = layer.base_layer.weight.detach().clone()
                for adapter in layer.active_adapters:
                    weight += layer.get_delta_weight(adapter).to(weight.dtype)
                self.model.get_submodule(name).weight.copy_(weight)
        return self.model
