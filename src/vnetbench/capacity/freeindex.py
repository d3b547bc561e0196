"""Hosts indexed by free capacity, so a placement decision never scans every host.

The planner asks, once per flow or VM, "the first host (in a fixed order) with at least
c free cores and m free MB". Scanning a list answers it in O(hosts), which over 8,192
flows and 1,024 hosts that differ in memory was minutes. A segment tree over the hosts
in that order keeps the largest free cores and the largest free memory of every range;
a query descends only into ranges that could hold a fitting host and an update (a host
filled) costs O(log hosts). The two maxima of a range may come from different hosts, so
a descent can be wasted, but only into a range that has a host with the cores and one
with the memory: on any realistic data centre it is logarithmic.
"""

from __future__ import annotations


class FreeIndex:
    def __init__(self, names: list[str], free: list[tuple[int, int]]):
        self.names = list(names)
        self.at = {name: i for i, name in enumerate(self.names)}
        self.size = 1
        while self.size < max(1, len(self.names)):
            self.size *= 2
        self.cores = [-1] * (2 * self.size)
        self.memory = [-1] * (2 * self.size)
        for i, (c, m) in enumerate(free):
            self.cores[self.size + i], self.memory[self.size + i] = c, m
        for node in range(self.size - 1, 0, -1):
            self._pull(node)

    def _pull(self, node: int) -> None:
        a, b = 2 * node, 2 * node + 1
        self.cores[node] = max(self.cores[a], self.cores[b])
        self.memory[node] = max(self.memory[a], self.memory[b])

    def set(self, name: str, cores: int, memory_mb: int) -> None:
        """``name`` now has this much free (-1, -1: never a candidate again)."""
        node = self.size + self.at[name]
        self.cores[node], self.memory[node] = cores, memory_mb
        node //= 2
        while node:
            self._pull(node)
            node //= 2

    def first(self, cores: int, memory_mb: int, skip: str | None = None) -> str | None:
        """The first host in order with at least ``cores`` and ``memory_mb`` free, other
        than ``skip``."""
        start = 0
        while True:
            i = self._first(1, 0, self.size, start, cores, memory_mb)
            if i < 0:
                return None
            if self.names[i] != skip:
                return self.names[i]
            start = i + 1

    def _first(self, node: int, lo: int, hi: int, start: int, cores: int, memory_mb: int) -> int:
        if hi <= start or self.cores[node] < cores or self.memory[node] < memory_mb:
            return -1
        if node >= self.size:
            return node - self.size
        mid = (lo + hi) // 2
        found = self._first(2 * node, lo, mid, start, cores, memory_mb)
        return found if found >= 0 else self._first(2 * node + 1, mid, hi, start, cores, memory_mb)
