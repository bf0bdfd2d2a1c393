"""A 16-bit base's trainable parameters in float32 (fp16's loss scaler refuses to unscale float16 gradients)."""


def upcast_trainable(model):
    """``model`` with every trainable parameter in float32 (PEFT upcasts LoRA's matrices, not a copied score head); an
    upcast module gets float32 inputs (``float32_inputs``): without autocast a 16-bit base would meet a float32 head."""
    import torch

    for module in model.modules():
        own = [p for p in module.parameters(recurse=False) if p.requires_grad and p.dtype != torch.float32]
        for parameter in own:
            parameter.data = parameter.data.float()
        if own:
            module.register_forward_pre_hook(float32_inputs)
    return model


def float32_inputs(module, args):
    """A forward pre-hook: the module's floating-point tensor arguments in float32 (a float32 head on a 16-bit base)."""
    import torch

    return tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)
