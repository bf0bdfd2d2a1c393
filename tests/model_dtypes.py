"""The dtypes a loaded model's parameters ended up in, for the precision tests."""


def trainable_dtypes(model) -> dict[str, set[str]]:
    """The dtypes of a model's trainable and frozen parameters, ``{"trainable": {...}, "frozen": {...}}``."""
    kinds: dict[str, set[str]] = {"trainable": set(), "frozen": set()}
    for parameter in model.parameters():
        kinds["trainable" if parameter.requires_grad else "frozen"].add(str(parameter.dtype).removeprefix("torch."))
    return kinds
