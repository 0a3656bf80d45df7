"""`--frank-shard I/N`: a CI matrix's share of the fleet. An endpoint's shard is a hash of its
name, so it stays in the same shard whatever else the fleet file adds, drops or reorders; the
merge job (`frank merge`) puts the shards' records back together."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


class ShardError(ValueError):
    """A shard spec that is not I/N with 1 <= I <= N; the message says which part is wrong."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based, as CI matrices count (GitLab's CI_NODE_INDEX, a 1..N matrix)
    total: int

    @classmethod
    def parse(cls, spec: str) -> Shard:
        index, slash, total = spec.partition("/")
        if not slash or not index.strip().isdigit() or not total.strip().isdigit():
            raise ShardError(f"{spec!r} is not I/N (this runner's shard, 1 to N, of N), "
                             "e.g. 2/3")
        shard = cls(int(index), int(total))
        if shard.total < 1 or not 1 <= shard.index <= shard.total:
            raise ShardError(f"{spec!r}: the shard must be 1 to N and N at least 1")
        return shard

    def holds(self, endpoint: str) -> bool:
        return shard_of(endpoint, self.total) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.total}"


def shard_of(endpoint: str, total: int) -> int:
    """The 1-based shard of N that runs this endpoint: its name's hash, not its place."""
    digest = hashlib.sha256(endpoint.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % total + 1
