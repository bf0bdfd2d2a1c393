"""Jobs: the machinery of one job, which a reader of the algorithm can skip: its device and precision (``devices``),
what it ran on (``machine``), its start and end (``job``), and the GPU memory each stage needs (``memory_plan``, ``memory_stages``). It imports only ``core``."""
