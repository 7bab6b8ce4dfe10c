"""One global arrival sequence per run (or sweep step), of which each process sends its share.

An open loop's requests are the arrivals of one seeded sequence: the due times of an `ArrivalProcess` (Poisson,
constant, gamma) or of a trace, in seconds from a common origin. Every process builds the same `DueTimes` from the
same seed (or trace), and an `Assignment` — decided by the master, sent in each process's plan — says which process
sends arrival i. So the total is exactly the requested process, whatever the number of workers (independent
per-worker constant or gamma schedules would superpose into something else), and each arrival is sent once.

The assignment is a list of epochs: from arrival `from_index` on, arrival i goes to slot `i % len(slots)`. When a
process joins or leaves, the master starts a new epoch at an arrival due far enough ahead that no process has sent
it yet (`Assignment.then`); when a process leaves, the arrivals it had not sent (from the low-water mark it last
reported) are also shared out among the survivors (`Assignment.without`), who send them late.
"""

from __future__ import annotations

import heapq
import random
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_locust.load.arrivals import ArrivalKind, ArrivalProcess

Slot = str | tuple["Slot", ...]
"""A process id, or (after a process left) the slots that share its arrivals in turn."""


class DueTimes:
    """Due times (seconds from the origin) of arrivals 0, 1, ...: a trace's, or an arrival process's, made lazily.

    `limit` caps the number of arrivals (None: unbounded for a process, the trace's length for a trace).
    """

    def __init__(self, times_s: Sequence[float] = (), process: ArrivalProcess | None = None, limit: int | None = None):
        self._times = array("d", times_s)
        self._process = process
        if process is None:
            limit = len(self._times) if limit is None else min(limit, len(self._times))
        self.limit = limit

    @classmethod
    def of_process(
        cls, rate_per_s: float, kind: ArrivalKind, burstiness: float, seed: int, limit: int | None = None
    ) -> DueTimes:
        """The arrival process's due times from 0 (seeded: every process that asks gets the same)."""
        return cls(process=ArrivalProcess(rate_per_s, kind, burstiness, 0.0, random.Random(seed)), limit=limit)

    def due_s(self, index: int) -> float | None:
        """Seconds from the origin at which arrival `index` is due; None past the end."""
        if self.limit is not None and index >= self.limit:
            return None
        self._extend(index)
        return self._times[index]

    def first_at(self, t_s: float) -> int:
        """The index of the first arrival due at or after `t_s` (the limit when none is)."""
        process = self._process
        while process is not None and (not self._times or self._times[-1] < t_s):
            if self.limit is not None and len(self._times) >= self.limit:
                break
            self._times.append(process.next_s())
        index = bisect_left(self._times, t_s)
        return index if self.limit is None else min(index, self.limit)

    def _extend(self, index: int) -> None:
        process = self._process
        while len(self._times) <= index and process is not None:
            self._times.append(process.next_s())


@dataclass(frozen=True, slots=True)
class Epoch:
    """From arrival `from_index` on (until the next epoch), arrival i goes to `slots[i % len(slots)]`."""

    from_index: int
    slots: tuple[Slot, ...]

    def owner(self, index: int) -> str:
        """The process that sends arrival `index`: slot `index % M`, within a shared slot `index // M` in turn."""
        slot: Slot = self.slots
        while not isinstance(slot, str):
            slot, index = slot[index % len(slot)], index // len(slot)
        return slot


@dataclass(frozen=True, slots=True)
class Assignment:
    """Which process sends each arrival: epochs by increasing `from_index` (the first from 0)."""

    epochs: tuple[Epoch, ...]

    @classmethod
    def of(cls, processes: Sequence[str]) -> Assignment:
        """Arrival i to `sorted(processes)[i % M]`."""
        return cls((Epoch(0, tuple(sorted(processes))),))

    @property
    def members(self) -> tuple[str, ...]:
        """The processes of the last epoch (those sending from now on), sorted."""
        return tuple(sorted(_processes(self.epochs[-1].slots)))

    def owner(self, index: int) -> str:
        """The process that sends arrival `index`."""
        starts = [e.from_index for e in self.epochs]
        return self.epochs[max(0, bisect_left(starts, index + 1) - 1)].owner(index)

    def then(self, from_index: int, processes: Sequence[str]) -> Assignment:
        """From `from_index` on, arrivals go to `processes` in turn (later epochs are replaced)."""
        kept = tuple(e for e in self.epochs if e.from_index < from_index)
        return Assignment((*kept, Epoch(from_index, tuple(sorted(processes)))))

    def without(self, gone: str, from_index: int, survivors: Sequence[str]) -> Assignment:
        """`gone`'s arrivals from `from_index` on go to `survivors` in turn; nothing else changes."""
        share = tuple(sorted(survivors))
        if not share:
            return self
        epochs = []
        for i, epoch in enumerate(self.epochs):
            end = self.epochs[i + 1].from_index if i + 1 < len(self.epochs) else None
            if end is not None and end <= from_index:
                epochs.append(epoch)
                continue
            slots = tuple(_drop(slot, gone, share) for slot in epoch.slots)
            if epoch.from_index >= from_index:
                epochs.append(Epoch(epoch.from_index, slots))
            else:  # split: before from_index as it was
                epochs += [epoch, Epoch(from_index, slots)]
        return Assignment(tuple(epochs))

    def changed_from(self, old: Assignment) -> int | None:
        """The first arrival whose epoch differs from `old`'s (None: same epochs)."""
        for mine, theirs in zip(self.epochs, old.epochs, strict=False):
            if mine != theirs:
                return min(mine.from_index, theirs.from_index)
        if len(self.epochs) != len(old.epochs):
            longer = self.epochs if len(self.epochs) > len(old.epochs) else old.epochs
            return longer[min(len(self.epochs), len(old.epochs))].from_index
        return None

    def to_wire(self) -> list[Any]:
        """A msgpack-able list; `from_wire` reverses it."""
        return [[e.from_index, _slot_to_wire(e.slots)] for e in self.epochs]

    @classmethod
    def from_wire(cls, data: list[Any]) -> Assignment:
        """Rebuild from `to_wire` output."""
        return cls(tuple(Epoch(f, _slot_from_wire(slots)) for f, slots in data))


def _drop(slot: Slot, gone: str, share: tuple[str, ...]) -> Slot:
    """`slot` with `gone` replaced by `share` wherever it appears (other processes keep their arrivals)."""
    if slot == gone:
        return share
    if isinstance(slot, str):
        return slot
    return tuple(_drop(s, gone, share) for s in slot)


def _processes(slot: Slot) -> set[str]:
    return {slot} if isinstance(slot, str) else {p for s in slot for p in _processes(s)}


def _slot_to_wire(slot: Slot) -> Any:
    return slot if isinstance(slot, str) else [_slot_to_wire(s) for s in slot]


def _slot_from_wire(data: Any) -> Any:
    return data if isinstance(data, str) else tuple(_slot_from_wire(s) for s in data)


class Sharing:
    """The master's side of one sequence: its `assignment` of arrivals to the processes, kept up to date as they
    join, leave or lose their users (see the module docstring).

    Every process some arrival may still be assigned to is remembered; each reports its low-water mark (the first of
    its arrivals it has not handed out yet, `note_low_water`), from which a process that left hands over.
    """

    def __init__(self, due: DueTimes, members: Sequence[str]) -> None:
        self.due = due
        self.assignment = Assignment.of(members)
        self._assigned = set(members)
        self._low_water: dict[str, int] = {}

    def note_low_water(self, process: str, index: int) -> None:
        """`process` reported the first arrival of its share it has not handed out yet."""
        self._low_water[process] = index

    def changed(self, members: Sequence[str], alive: set[str]) -> bool:
        """Whether the assignment must change: the sending processes are now `members` (sorted), and a process
        still assigned arrivals may be gone from `alive`."""
        return tuple(members) != self.assignment.members or bool(self._assigned - alive)

    def reassign(self, members: Sequence[str], alive: set[str], t_s: float) -> tuple[int, list[tuple[str, int]]]:
        """Arrivals from the first due at `t_s` (s from the sequence's origin; no process has sent it yet) on go to
        `members` in turn; each process gone from `alive` hands its arrivals over to them from its last low-water
        mark (or from that switch, whichever comes first). Returns the switch and each process gone with its mark."""
        switch = self.due.first_at(t_s)
        assignment = self.assignment
        gone = []
        for process in sorted(self._assigned - alive):
            mark = self._low_water.get(process, 0)
            assignment = assignment.without(process, min(mark, switch), members)
            self._assigned.discard(process)
            gone.append((process, mark))
        self.assignment = assignment.then(switch, members)
        self._assigned.update(members)
        return switch, gone


class Cursor:
    """One process's walk through a sequence's arrivals: the ones it handed out, holds or must still send.

    Arrivals before `position` were handed out, are held (given to a waiting user, not due yet), are queued to be
    caught up, or are not this process's. A new assignment that gives it arrivals it had walked past (another process
    left before sending them) queues those to be sent first, late; so does an arrival put back (its user stopped).
    """

    def __init__(self) -> None:
        self.position = 0
        self._held: set[int] = set()
        self._catch_up: list[int] = []  # heap

    def restart(self) -> None:
        """Walk a new sequence from its start."""
        self.position = 0
        self._held.clear()
        self._catch_up.clear()

    @property
    def low_water(self) -> int:
        """The first arrival of this process not handed out yet (every one before it was)."""
        return min((self.position, *self._held, *self._catch_up))

    def reassigned(self, old: Assignment, new: Assignment, me: str) -> None:
        """The assignment changed from `old` to `new`: catch up the arrivals walked past that are now `me`'s."""
        start = new.changed_from(old)
        if start is not None:
            self._catch_up += [i for i in range(start, self.position) if new.owner(i) == me != old.owner(i)]
            heapq.heapify(self._catch_up)

    def next_index(self, due: DueTimes, assignment: Assignment, me: str) -> int | None:
        """The next arrival `me` sends under `assignment` (None: none left for it): the earliest to catch up, else
        the next of its own ahead."""
        if self._catch_up:
            return heapq.heappop(self._catch_up)
        last = assignment.epochs[-1]
        index = self.position
        while due.due_s(index) is not None:
            if assignment.owner(index) == me:
                self.position = index + 1
                return index
            if index >= last.from_index and me not in assignment.members:
                break  # never this process's again under this assignment
            index += 1
        self.position = index
        return None

    def exhausted(self, due: DueTimes) -> bool:
        """Every arrival of `due` was walked past and none is held or to catch up: none is left for this process."""
        return due.due_s(self.position) is None and not self._held and not self._catch_up

    def hold(self, index: int) -> None:
        """Arrival `index` was given to a user that waits until it is due."""
        self._held.add(index)

    def release(self, index: int) -> None:
        """Arrival `index` is no longer held: sent, taken away by a new plan, or put back."""
        self._held.discard(index)

    def put_back(self, index: int) -> None:
        """Arrival `index` is still this process's to send (its user stopped, or the process is leaving)."""
        heapq.heappush(self._catch_up, index)
