"""The position ids ``generate`` gives a left-padded batch, shared by the decode loop and the CPU's prompt sharing."""


def generation_positions(attention_mask):
    """The count of real tokens before each token, 0 on padding: a cache must be continued with the numbering it was
    built with, and a forward pass without position ids numbers every column instead."""
    return (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
