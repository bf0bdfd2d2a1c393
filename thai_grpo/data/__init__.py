"""Data: the problems, prompts and training texts the models see, before any model exists. May import only ``core``."""
