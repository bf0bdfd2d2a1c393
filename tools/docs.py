"""`make docs`, `make docs-reference`, `make compare`: the generated numbers of README.md and docs/ (thai_grpo_tools.reference).

  render     README.md's and docs/*.md's tables from docs/reference/ (make docs)
  summarise  results/ -> docs/reference/*.json, with the commit, command and CPU (make docs-reference)
  check      exit 1 naming every table that differs from what render would write
  compare    your results/ against docs/reference/: which numbers differ, by how much, within the spread? (make compare)
"""

import argparse
import csv
import datetime
import os
import sys
from pathlib import Path

from thai_grpo.core.io import atomic_write_text, read_json, read_jsonl, write_json
from thai_grpo.jobs.machine import commit_of, this_cpu
from thai_grpo_tools import reference as ref
from thai_grpo_tools import reference_tables as rt

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def summaries(results: Path, time_file: Path | None, untimed: list[str] = (), notes: dict | None = None,
              walls: dict | None = None) -> dict:
    """{part: summary with its source} for every part whose results file exists under ``results``; the parts in
    ``untimed`` get no wall or job time (a run interrupted and resumed), ``notes`` a note each, ``walls`` a wall time
    each (seconds, measured by ``time``). A study whose results record its own jobs gets their seconds, and no wall
    time unless given."""
    if not (results / "results.json").exists():
        sys.exit(f"no {results / 'results.json'}: run `make run` first (or pass --results DIR)")
    commit, cpu, cores = commit_of(results.parent), this_cpu(), len(os.sched_getaffinity(0))
    benchmarks = results / "benchmarks"
    timed = {p.stem: (p.stat().st_mtime, float(next(iter(_rows(p))).get("s", 0))) for p in benchmarks.glob("*.tsv")}
    out = {}
    for part, (path, _) in ref.PARTS.items():
        if not (results / path).exists():
            continue
        data = read_json(results / path)
        summary = ref.SUMMARISERS[part](data)
        stems = ref.main_stages(data) if part == "main" else ref.target_stages(part, list(timed))
        stages = {s: timed[s] for s in stems if s in timed}
        wall = ref.stage_span(stages)
        if part == "main" and time_file:
            wall = ref.wall_from_time_output(time_file.read_text()) or wall
        jobs = sum(s for _, s in stages.values()) or None
        own = ref.study_job_seconds(part, data)
        if own is not None:  # its jobs may have run beside other targets': their span is not its wall time
            wall, jobs = None, own
        if part in (walls or {}):
            wall = walls[part]
        if part in untimed:
            wall = jobs = None
        date = datetime.datetime.fromtimestamp((results / path).stat().st_mtime, datetime.timezone.utc)
        out[part] = {"source": ref.source(part, commit, cpu, cores, wall, jobs, date.strftime("%Y-%m-%d"),
                                          (notes or {}).get(part)), **summary}
        if part == "main":  # one held-out problem with SFT's and GRPO's answers, for README
            samples = {m: read_jsonl(results / f"eval/{m}/samples.jsonl") for m in ("sft", "grpo")
                       if (results / f"eval/{m}/samples.jsonl").exists()}
            out[part]["example"] = ref.example_problem(samples)
            headline = results / "headline.json"
            timed_headline = headline.exists() and part not in untimed  # an untimed run has no headline time either
            out[part]["source"]["headline_seconds"] = _headline_seconds(headline, stages) if timed_headline else None
    return out


def _headline_seconds(headline: Path, stages: dict) -> float | None:
    """Seconds from the first job's start to results/headline.json, from the benchmark files' times."""
    if not stages:
        return None
    return round(headline.stat().st_mtime - min(end - s for end, s in stages.values()))


def _rows(path: Path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t")) or [{}]


def load_reference(directory: Path) -> tuple[dict, dict]:
    parts = {part: read_json(directory / f"{part}.json") for part in ref.PARTS if (directory / f"{part}.json").exists()}
    if "main" not in parts:
        sys.exit(f"no {directory / 'main.json'}: `make docs-reference` after `make run` writes it")
    elsewhere = directory / "elsewhere.json"
    return parts, read_json(elsewhere) if elsewhere.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["render", "summarise", "check", "compare"])
    parser.add_argument("--results", type=Path, default=REPO / "results", help="a run's results/ (default: ./results)")
    parser.add_argument("--reference", type=Path, default=REPO / "docs" / "reference")
    parser.add_argument("--time-file", type=Path, help="`time make run`'s output: the main run's wall time")
    parser.add_argument("--untimed", action="append", default=[], choices=list(ref.PARTS),
                        help="summarise: a part whose times are not a measurement (e.g. interrupted and resumed)")
    parser.add_argument("--note", action="append", default=[], metavar="PART=TEXT",
                        help="summarise: a note on how a part was run, shown beside its times")
    parser.add_argument("--wall", action="append", default=[], metavar="PART=SECONDS",
                        help="summarise: a part's wall time, measured by `time` (a study run alone)")
    parser.add_argument("--all", action="store_true", help="compare: list every differing number")
    args = parser.parse_args()
    if args.command == "summarise":
        notes = dict(note.split("=", 1) for note in args.note)
        walls = {part: float(seconds) for part, seconds in (wall.split("=", 1) for wall in args.wall)}
        for part, summary in summaries(args.results.resolve(), args.time_file, args.untimed, notes, walls).items():
            write_json(args.reference / f"{part}.json", summary)
            print(f"wrote {args.reference / f'{part}.json'} ({summary['source']['command']})")
        return
    parts, elsewhere = load_reference(args.reference)
    if args.command == "compare":
        own = summaries(args.results.resolve(), None)
        spreads = ref.spread(ref.chain_rows(parts, elsewhere))
        print(ref.compare_report(ref.compare(parts, own, spreads), parts, own, args.all))
        return
    tables = rt.render_tables(parts, elsewhere)
    stale = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        if args.command == "check":
            stale += [f"{path.relative_to(REPO)}: table:{name}" for name in rt.stale_tables(text, tables)]
        elif rt.replace_tables(text, tables) != text:
            atomic_write_text(path, rt.replace_tables(text, tables))
            print(f"updated {path.relative_to(REPO)}")
    if stale:
        sys.exit("tables that differ from `make docs`:\n  " + "\n  ".join(stale))


if __name__ == "__main__":
    main()
