"""Core: the helpers every stage shares (file output, config checks, seeds, the chapter's contract, rewards, hub).

The bottom layer: it imports no other subpackage of thai_grpo.
"""
