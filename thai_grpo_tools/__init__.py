"""Tools around the pipeline, for its users and maintainers: benchmarks, rehearsals, documentation tables, run comparisons. The pipeline never imports them."""
