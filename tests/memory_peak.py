"""The peak of live tensor memory during a call, as an allocator sees it: what the memory plan's stages are checked
against on a CPU (tests/test_memory_measured.py). torch's profiler (``profile_memory``) records every allocation and
free with the allocator's running total of live bytes; its peak above the total at the start, plus the tensors already
live, is what CUDA's ``max_memory_allocated`` counts (without its 512-byte rounding), with no allocator slack, freed
pages or Python objects. Blind spot: a free of a tensor allocated before the profiler started reads as nothing, so a
call that frees tensors it found reads as holding them (an upper bound): a measurement that must see such frees
builds those tensors inside the call.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Peak:
    """``found``: bytes live at the start; ``above``: the most the call held beyond them; ``end``: what it still held
    beyond them at its return; ``result``: its return value."""
    found: int
    above: int
    end: int
    result: object = None

    @property
    def peak(self) -> int:
        """The peak of live tensor memory: what was found plus the most held above it."""
        return self.found + self.above


def storage_bytes(*things) -> int:
    """Bytes of the distinct tensor storages in ``things`` (tensors, modules, and lists, tuples and dicts of them), each
    storage counted once however many tensors view it (tied embeddings, shared bases)."""
    import torch

    seen: dict[int, int] = {}

    def visit(thing) -> None:
        if isinstance(thing, torch.Tensor):
            storage = thing.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(thing, torch.nn.Module):
            for tensor in (*thing.parameters(), *thing.buffers()):
                visit(tensor)
        elif isinstance(thing, (dict, list, tuple)):
            for value in thing.values() if isinstance(thing, dict) else thing:
                visit(value)

    for thing in things:
        visit(thing)
    return sum(seen.values())


def allocation_events(profiler) -> list[tuple[int, int, int]]:
    """(start ns, bytes allocated (negative: freed), the allocator's live total after it) of every allocation event a
    finished ``torch.profiler.profile(profile_memory=True)`` recorded, in time order."""
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
    """(the most live bytes above the total before the first event, the bytes above it after the last event)."""
    if not events:
        return 0, 0
    _, size, total = events[0]
    start = total - size
    return max(0, max(total for _, _, total in events) - start), events[-1][2] - start


def measure_peak(call, *found) -> Peak:
    """``call()`` run under torch's profiler, its ``Peak``; ``found``: what it uses that is already live."""
    import warnings

    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes on frees of blocks it did not see allocated
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            result = call()
    above, end = peak_above(allocation_events(profiler))
    return Peak(found=storage_bytes(*found), above=above, end=end, result=result)
