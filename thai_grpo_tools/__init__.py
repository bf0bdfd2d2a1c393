"""The maintainers' tools, one module per tool, each run as ``python -m thai_grpo_tools.X`` (``make bench``, ``make
docs``, ``make rehearse-full``, ``make memory-plan``, ``make ship-base``, ...): benchmarks, rehearsals, the memory plan,
the documents' tables, run comparisons. The pipeline never imports them."""
