"""GRPO with code-graded rewards on Thai grade-school math: the logic behind the Snakemake pipeline."""
