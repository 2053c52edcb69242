"""The prefix KV cache of ``LocalQwenVL`` (content-addressed, under a byte budget).

After a request, its KV (prompt + generated tokens but the last) is kept, addressable by several
"marks": every message boundary of the prompt (the
offset right after each message's ``<|im_end|>\\n``), the prompt's length, the full length, and
the prefix it reused. So a later request that shares only the first messages of an earlier
one (the same system prompt and context, another question) starts from the last message
boundary they have in common, and a request that extends an earlier prompt (or prompt +
reply) starts from all of it; a common prefix that ends inside a message is only reused up to
the boundary before it. A mark's key hashes the token ids up to its length and the content
digests of the images inside that prefix (``Image.digest()``), so the same pixels hit whether
they came from a path or an array, and different pixels of the same size do not. A mark keeps
the M-RoPE position offset (``rope_delta``) at its end (for a boundary: the position of the
token after it, from the positions computed over the whole prompt, minus its offset), and,
except at a boundary, the logits for the next token (so an exact repeat needs no prefill at
all; a boundary mark only serves a prompt with tokens left to prefill). Lookup tries only the
lengths present in the cache, longest first, skipping lengths that end inside an image's
tokens (a boundary never does). A hit copies the cached KV (the entry is never written), and
only the remaining tokens are prefilled, with pixels only for images in that remainder and
their 3D positions sliced from positions computed over the whole sequence. The new entry takes
over the reused prefix's mark and any boundary it shares with older entries (a key lives in its
newest entry; an entry whose longest mark moved on is cut down to what its remaining marks
reach, and one left without marks is freed). Entries are evicted least-recently-used (a hit
counts as a use) to stay within ``kv_cache_bytes``, logits included (0 disables the cache).
"""
from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


@dataclass
class Prompt:
    """A rendered request: token ids and the images behind its ``<|image_pad|>`` runs."""
    ids: list                 # of int
    arrays: list = field(default_factory=list)   # H x W x 3 uint8, one per image, in order
    digests: list = field(default_factory=list)  # Image.digest() of each image
    spans: list = field(default_factory=list)    # [start, end) of each image's pad run
    grids: list = field(default_factory=list)    # (t, h, w) patch grid of each image
    bounds: list = field(default_factory=list)   # offset after each message's <|im_end|>\n
    _arr: object = None                          # ids as int64 (for keys), built on first use

    def array(self):
        if self._arr is None or len(self._arr) != len(self.ids):
            self._arr = np.asarray(self.ids, dtype=np.int64)
        return self._arr


@dataclass
class Mark:
    """One addressable prefix of a cache entry."""
    length: int
    rope_delta: int     # M-RoPE position of token i (text) is i + rope_delta after this prefix
    logits: object      # torch.Tensor (vocab,): logits for the token after the prefix; None for
                        # a message boundary (usable only with tokens left to prefill)

    @property
    def nbytes(self) -> int:
        return 0 if self.logits is None else self.logits.nbytes


@dataclass
class Entry:
    kv: list            # of (keys, values), each (1, kv_heads, T, head_dim)
    marks: dict         # key (bytes) -> Mark
    nbytes: int


class PrefixCache:
    """KV entries under a byte budget, least recently used first out. Several keys (marks) may
    point into one entry; registering a key again moves it to the newer entry, and an entry
    left without keys is freed (its prefixes live on in a newer entry)."""

    def __init__(self, budget: int):
        self.budget = budget
        self.nbytes = 0
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._index: dict[bytes, int] = {}   # key -> entry id
        self._lengths: Counter = Counter()    # mark length -> how many marks have it
        self._next_id = 0

    def __len__(self):
        return len(self._entries)

    @property
    def marks(self) -> int:
        """How many prefixes (keys) are addressable, over all entries."""
        return len(self._index)

    def lengths(self) -> list:
        return sorted(self._lengths, reverse=True)

    def get(self, key: bytes):
        """(entry, mark) under ``key`` or None; does not count as a use (see ``touch``)."""
        eid = self._index.get(key)
        if eid is None:
            return None
        entry = self._entries[eid]
        return entry, entry.marks[key]

    def touch(self, key: bytes):
        """A hit on ``key`` makes its entry the most recently used."""
        eid = self._index.get(key)
        if eid is not None:
            self._entries.move_to_end(eid)

    def put(self, kv: list, marks: dict) -> bool:
        nbytes = sum(k.nbytes + v.nbytes for k, v in kv) + sum(m.nbytes for m in marks.values())
        if not marks or nbytes > self.budget:
            return False
        for key in marks:
            if key in self._index:
                self._drop_mark(self._index[key], key)
        eid = self._next_id
        self._next_id += 1
        self._entries[eid] = Entry(kv=kv, marks=dict(marks), nbytes=nbytes)
        for key, mark in marks.items():
            self._index[key] = eid
            self._lengths[mark.length] += 1
        self.nbytes += nbytes
        while self.nbytes > self.budget:
            self._evict(next(iter(self._entries)))  # the new entry fits alone, so it stays
        return True

    def clear(self):
        for eid in list(self._entries):
            self._evict(eid)

    def _forget(self, key: bytes, mark: Mark):
        del self._index[key]
        self._lengths[mark.length] -= 1
        if not self._lengths[mark.length]:
            del self._lengths[mark.length]

    def _drop_mark(self, eid: int, key: bytes):
        entry = self._entries[eid]
        mark = entry.marks.pop(key)
        self._forget(key, mark)
        entry.nbytes -= mark.nbytes
        self.nbytes -= mark.nbytes
        if not entry.marks:
            self._evict(eid)
            return
        # Keep only the KV the remaining marks can reach (a copy, so the tail's memory is freed).
        keep = max(m.length for m in entry.marks.values())
        if keep < entry.kv[0][0].shape[2]:
            before = sum(k.nbytes + v.nbytes for k, v in entry.kv)
            entry.kv = [(k[:, :, :keep].clone(), v[:, :, :keep].clone()) for k, v in entry.kv]
            freed = before - sum(k.nbytes + v.nbytes for k, v in entry.kv)
            entry.nbytes -= freed
            self.nbytes -= freed

    def _evict(self, eid: int):
        entry = self._entries.pop(eid)
        for key, mark in entry.marks.items():
            self._forget(key, mark)
        self.nbytes -= entry.nbytes


def prefix_key(p: Prompt, length: int, gen: Sequence[int] = ()) -> bytes:
    """Content address of the first ``length`` tokens of ``p.ids + gen``: the token ids and
    the digests of the images inside (a prefix never ends inside an image)."""
    ids = p.array()
    if length > len(ids):
        ids = np.concatenate([ids, np.asarray(list(gen), dtype=np.int64)])
    h = hashlib.blake2b(ids[:length].tobytes(), digest_size=16)
    for (start, end), digest in zip(p.spans, p.digests):
        if end <= length:
            h.update(digest.encode())
    return h.digest()

def prefix_keys(p: Prompt, lengths) -> dict:
    """``{length: prefix_key(p, length)}`` for several prefixes of ``p``'s prompt, in one pass over
    the ids (the hash is streamed: each key is a copy of it at that length, plus digests)."""
    ids = p.array()
    h = hashlib.blake2b(digest_size=16)
    out, done = {}, 0
    for length in sorted(set(lengths)):
        h.update(ids[done:length].tobytes())
        done = length
        k = h.copy()
        for (start, end), digest in zip(p.spans, p.digests):
            if end <= length:
                k.update(digest.encode())
        out[length] = k.digest()
    return out
