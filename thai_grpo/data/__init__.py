"""Data: the problems and texts the models see, before any model exists: loading, gold answers, the split and SFT's
examples (``problems``), the prompts a policy reads (``prompts``), the offline config's synthetic problems
(``synthetic``) and the offline base's and SFT adapter's training texts (``corpus``). May import only ``core``.
"""
