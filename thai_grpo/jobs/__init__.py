"""Jobs: the machinery of one job, which a reader of the algorithm can skip.

Where a job runs and in which precision (``devices``: device choice, one GPU per job, precision per compute
capability), what it ran on (``machine``: CPU and commit), its threads and priority among the others (``scheduling``),
its start and end (``job``: ``model_job``), and how much GPU memory each stage needs (``memory_plan``: the pieces;
``memory_stages``: per stage and device, and the ``auto`` sizes a job picks). It imports only ``core``.
"""
