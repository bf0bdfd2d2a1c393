"""Tools around the pipeline, for its maintainers: benchmarks, rehearsals, the memory and time plans, documentation
tables, run comparisons. Their command lines are in ``tools/`` (``make bench``, ``make docs``, ``make rehearse-full``,
``make memory-plan``, ``make ship-base``); the pipeline never imports them."""
