"""The position ids of a left-padded batch, as ``generate`` numbers them: shared by the decode loop and the CPU's
shared-prompt passes, which continue or rebuild a cache that must be numbered alike."""


def generation_positions(attention_mask):
    """The position ids ``generate`` gives a left-padded batch (transformers' ``_prepare_position_ids_for_generation``):
    the count of real tokens before each one, 0 on padding. (A forward pass without position ids numbers every column
    instead; with rotary embeddings only differences of positions count, so both score a row alike, but a cache must
    be continued with the numbering it was built with.)"""
    return (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
