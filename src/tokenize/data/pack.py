"""Pack a `.tiktoken` vocabulary into the compact form the engine embeds.

Usage: python pack.py cl100k_base.tiktoken cl100k_base.bin.z

The `.tiktoken` text (base64 token and rank per line) is 1.7 MB for cl100k_base and 3.6 MB
for o200k_base. The packed form stores each token's raw bytes behind a one-byte length, in
rank order (ranks must be 0..n with no gap), then deflates the lot: about a third of the
size, and expanding it on first use takes a few milliseconds.
"""

from __future__ import annotations

import base64
import sys
import zlib
from pathlib import Path


def pack(source: Path) -> bytes:
    tokens: dict[int, bytes] = {}
    for line in source.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            tokens[int(rank)] = base64.b64decode(token)
    if sorted(tokens) != list(range(len(tokens))):
        raise SystemExit(f"{source}: ranks are not 0..{len(tokens) - 1}")
    out = bytearray()
    for rank in range(len(tokens)):
        token = tokens[rank]
        if not 0 < len(token) < 256:
            raise SystemExit(f"{source}: token {rank} has {len(token)} bytes")
        out.append(len(token))
        out += token
    return zlib.compress(bytes(out), 9)


if __name__ == "__main__":
    Path(sys.argv[2]).write_bytes(pack(Path(sys.argv[1])))
