"""Stage 2: integer gold answers and the held-out / GRPO / SFT / pretraining sets, disjoint in text and skeleton.

``data.selection``: ``chapter`` = the GRPO problems are datasets' ``shuffle(seed).select(range(train_size))`` of the
source rows, held-out and SFT cut from the rest (``chapter_split``); ``heldout_first`` = one seeded shuffle of the
parsed rows, held-out drawn first so that changing train_size never moves it, rows sharing a held-out skeleton set
aside as ``reserved`` (``split_rows``)."""

from thai_grpo.core.io import read_jsonl, write_json, write_jsonl
from thai_grpo.jobs.job import log_to
from thai_grpo.data.problems import assert_no_leakage, chapter_split, deduplicate, normalize_rows, split_rows

log_to(snakemake.log[0])
data = snakemake.params.data
records = read_jsonl(snakemake.input.rows)
sft_size = data["sft_size"] if snakemake.params.train_sft else 0
if data["selection"] == "chapter":
    splits = chapter_split(records, data["shuffle_seed"], data["train_size"], data["heldout_size"], sft_size,
                           data["question_column"], data["answer_column"])
    counts = {"dropped_unparseable": splits.pop("dropped"), "duplicates_removed": splits.pop("duplicates"),
              "seen_in_training_dropped": splits.pop("seen_in_training")}
    unique = splits["train"] + splits["heldout"] + splits["sft"]
else:
    rows, dropped = normalize_rows(records, data["question_column"], data["answer_column"])
    unique = deduplicate(rows)
    splits = split_rows(unique, data["shuffle_seed"], data["train_size"], data["heldout_size"], sft_size)
    counts = {"dropped_unparseable": dropped, "duplicates_removed": len(rows) - len(unique)}
reserved = splits.pop("reserved")
assert_no_leakage(splits["heldout"], train=splits["train"], sft=splits["sft"], pretrain=splits["pretrain"])

for name, part in splits.items():
    write_jsonl(snakemake.output[name], part)
stats = {"source_rows": len(records), "selection": data["selection"], **counts,
         "reserved_for_heldout_skeletons": len(reserved),
         "heldout_skeletons": len({r["skeleton"] for r in splits["heldout"] if r.get("skeleton")}),
         "leakage_check": "text hash and skeleton" if any(r.get("skeleton") for r in unique) else "text hash",
         **{f"{name}_size": len(part) for name, part in splits.items()}}
print(stats)
write_json(snakemake.output.stats, stats)
