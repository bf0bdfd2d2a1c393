"""Data: the problems and texts the models see, before any model exists.

Loading the Thai grade-school problems (synthetic, local or hub), parsing gold answers, the split and SFT's examples
(``problems``), the system prompt and the chat prompts a policy reads (``prompts``), the deterministic synthetic
problems of the offline config (``synthetic``) and the texts the offline base and its SFT adapter are trained on
(``corpus``). It may import only ``core``.
"""
