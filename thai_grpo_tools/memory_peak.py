"""The peak of live tensor memory during a call, as an allocator sees it: what the memory plan's stages are checked
against on this CPU (tests/test_memory_measured.py) without a GPU.

torch's profiler with ``profile_memory=True`` records every allocation and free of a tensor's storage made while it
runs, each with the allocator's running total of live bytes (``total_allocated``, computed under the allocator's lock,
so exact whatever order the events are read in). The peak of that total above its value at the start is the most the
call held at once beyond what it found; adding the bytes of the tensors already live (weights, buffers, a cache built
before) gives the peak of live tensor memory. That is what a CUDA caching allocator's ``max_memory_allocated`` counts,
without its rounding of blocks to 512 bytes (and without the reserved-but-free blocks ``max_memory_reserved`` adds).
Unlike the process's RSS it sees no allocator slack, no freed pages malloc keeps, no Python objects or libraries.

One blind spot: the CPU allocator reports the free of a tensor allocated before the profiler started as nothing
(torch warns "Memory block of unknown size"), so a call that frees tensors it found reads as holding them to its end:
an upper bound. A measurement that must see such frees (the cache compaction) builds those tensors inside the call.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Peak:
    """``found``: bytes of the tensors live at the start (as given); ``above``: the most the call held beyond them at
    once; ``end``: what it still held beyond them when it returned; ``result``: the call's return value."""
    found: int
    above: int
    end: int
    result: object = None

    @property
    def peak(self) -> int:
        """The peak of live tensor memory: what was found plus the most held above it."""
        return self.found + self.above


def storage_bytes(*things) -> int:
    """Bytes of the distinct tensor storages in ``things`` (tensors, modules' parameters and buffers, lists, tuples and
    dicts of them), each storage counted once however many tensors view it (tied embeddings, shared bases)."""
    import torch

    seen: dict[int, int] = {}

    def visit(thing) -> None:
        if isinstance(thing, torch.Tensor):
            storage = thing.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(thing, torch.nn.Module):
            for tensor in (*thing.parameters(), *thing.buffers()):
                visit(tensor)
        elif isinstance(thing, dict):
            for value in thing.values():
                visit(value)
        elif isinstance(thing, (list, tuple)):
            for value in thing:
                visit(value)

    for thing in things:
        visit(thing)
    return sum(seen.values())


def allocation_events(profiler) -> list[tuple[int, int, int]]:
    """(start time in ns, bytes allocated (negative: freed), the allocator's total live bytes after it) of every
    allocation event a finished ``torch.profiler.profile(profile_memory=True)`` recorded, in time order."""
    events = []
    pending = list(profiler.profiler.kineto_results.experimental_event_tree())
    while pending:
        node = pending.pop()
        fields = node.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation":
            events.append((node.start_time_ns, fields.alloc_size, fields.total_allocated))
        pending.extend(node.children)
    return sorted(events)


def peak_above(events: list[tuple[int, int, int]]) -> tuple[int, int]:
    """(the most live bytes above the total before the first event, the bytes above it after the last event). The
    allocator's totals are exact; only which event came first is read from the timestamps."""
    if not events:
        return 0, 0
    _, size, total = events[0]
    start = total - size
    return max(0, max(total for _, _, total in events) - start), events[-1][2] - start


def measure_peak(call, *found) -> Peak:
    """Runs ``call()`` under torch's profiler (CPU activity, ``profile_memory``) and returns its ``Peak``: ``found``
    (the tensors, modules, or containers of them already live that the call uses) counted by ``storage_bytes``."""
    import warnings

    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes on frees of blocks it did not see allocated
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            result = call()
    above, end = peak_above(allocation_events(profiler))
    return Peak(found=storage_bytes(*found), above=above, end=end, result=result)
