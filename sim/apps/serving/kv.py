"""Paged KV cache: a block allocator with a prefix cache (LRU).  A replica's capacity is
``sim.apps.serving.simulator._kv_blocks``.

Blocks are counted, not placed: every block holds ``block_tokens`` tokens of K and V for
all layers, a sequence holds ``ceil(tokens / block_tokens)`` of them (vLLM's PagedAttention,
Kwon et al., SOSP 2023), and a block of a shared prefix is held once however many
sequences read it.  Conservation is checkable at any time: ``free + held by sequences +
held by the prefix cache == total``.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sim.errors import WorkloadError

#: vLLM's default KV block size in tokens (vLLM engine arguments, ``--block-size`` = 16)
DEFAULT_BLOCK_TOKENS = 16
#: share of device memory a vLLM engine may use for weights, activations and KV cache
#: (vLLM engine arguments, ``--gpu-memory-utilization`` = 0.9)
DEFAULT_MEMORY_UTILISATION = 0.9
#: blocks kept free when admitting a new request so that running ones can grow
#: (vLLM ``BlockSpaceManager`` watermark = 0.01 of the blocks)
WATERMARK = 0.01


@dataclass
class PrefixEntry:
    prefix_id: str
    tokens: int          # tokens covered (whole blocks only)
    blocks: int
    refs: int = 0


class KVCache:
    """Block accounting of one replica's KV cache, with an optional LRU prefix cache."""

    def __init__(self, blocks: int, block_tokens: int = DEFAULT_BLOCK_TOKENS, prefix_caching: bool = False):
        if block_tokens < 1:
            raise WorkloadError(f"block_tokens: must be >= 1, got {block_tokens}")
        if blocks < 1:
            raise WorkloadError(f"kv blocks: the KV budget holds no block of {block_tokens} tokens")
        self.total = int(blocks)
        self.block_tokens = int(block_tokens)
        self.free = int(blocks)
        self.prefix_caching = prefix_caching
        self.prefixes: "OrderedDict[str, PrefixEntry]" = OrderedDict()
        self.prefix_blocks = 0
        self.lookups = self.hits = 0
        self.lookup_tokens = self.hit_tokens = 0
        self.evictions = 0
        self.watermark = max(1, int(WATERMARK * blocks))

    def blocks_for(self, tokens: int) -> int:
        return -(-int(tokens) // self.block_tokens)

    @property
    def used(self) -> int:
        return self.total - self.free

    def _evict(self, need: int) -> None:
        """Evict unreferenced prefixes, least recently used first, until ``need`` blocks are free."""
        if self.free >= need or not self.prefixes:
            return
        for pid in [p for p, e in self.prefixes.items() if e.refs == 0]:
            if self.free >= need:
                break
            e = self.prefixes.pop(pid)
            self.free += e.blocks
            self.prefix_blocks -= e.blocks
            self.evictions += 1

    def can_allocate(self, n: int, reserve: int = 0) -> bool:
        if self.free >= n + reserve:
            return True
        evictable = sum(e.blocks for e in self.prefixes.values() if e.refs == 0)
        return self.free + evictable >= n + reserve

    def allocate(self, n: int, reserve: int = 0) -> bool:
        """Take ``n`` blocks (leaving ``reserve`` free), evicting cached prefixes if needed."""
        if n <= 0:
            return True
        if not self.can_allocate(n, reserve):
            return False
        self._evict(n + reserve)
        self.free -= n
        return True

    def release(self, n: int) -> None:
        if n < 0 or self.free + n > self.total:
            raise RuntimeError(f"KV accounting: releasing {n} blocks with {self.free} of {self.total} free")
        self.free += n

    # ----------------------------------------------------------------- prefix cache
    def lookup(self, prefix_id: str | None, prefix_tokens: int) -> PrefixEntry | None:
        """A cached prefix for a new request (counted in the hit rate), referenced on a hit."""
        if not self.prefix_caching or prefix_id is None or prefix_tokens < self.block_tokens:
            return None
        self.lookups += 1
        self.lookup_tokens += prefix_tokens
        e = self.prefixes.get(prefix_id)
        if e is None:
            return None
        self.hits += 1
        self.hit_tokens += e.tokens
        e.refs += 1
        self.prefixes.move_to_end(prefix_id)
        return e

    def insert(self, prefix_id: str, prefix_tokens: int) -> PrefixEntry | None:
        """After a request computed its prefix: its first whole blocks become the cached prefix
        (ownership moves from the request to the cache; the request keeps a reference)."""
        if not self.prefix_caching or prefix_id in self.prefixes:
            return None
        blocks = prefix_tokens // self.block_tokens
        if blocks < 1:
            return None
        e = PrefixEntry(prefix_id, blocks * self.block_tokens, blocks, refs=1)
        self.prefixes[prefix_id] = e
        self.prefix_blocks += blocks
        return e

    def unref(self, e: PrefixEntry) -> None:
        e.refs -= 1
        if e.refs < 0:
            raise RuntimeError(f"KV accounting: prefix {e.prefix_id} released more often than referenced")

    def clear_prefixes(self) -> None:
        """Drop every unreferenced cached prefix (end of a run: all blocks must come back)."""
        self._evict(self.total + 1)

    def stats(self) -> dict:
        return {"prefix_lookups": self.lookups, "prefix_hits": self.hits,
                "prefix_hit_rate": self.hits / self.lookups if self.lookups else 0.0,
                "prefix_token_hit_rate": self.hit_tokens / self.lookup_tokens if self.lookup_tokens else 0.0,
                "prefix_evictions": self.evictions}
