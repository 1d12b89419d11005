"""Tool output of a listing's shape that is the same on every machine.

The scripted conversations had the model run ``ls /usr/bin | head -60`` (and ``ls -la``): what
that prints depends on what the machine has installed (Debian's chromium adds names early in the
alphabet, and ``ls -la`` adds owners, sizes and dates), so the context's size, and with it where
the swaps fall, changed from one machine to the next. These print what the test makes itself,
about the same size as before.
"""

from __future__ import annotations

# 60 names, 480 bytes (ls /usr/bin | head -60 printed about 500 here).
LISTING = "seq -f 'tool-%02g' 1 60"
LISTING_END = "\ntool-59\ntool-60\n"  # its last lines: an output kept whole ends so
# 80 lines of ls -la's shape, 4,320 bytes (about 4,900 here).
LONG_LISTING = "seq -f '-rwxr-xr-x 1 root root 14328 Jan  1  2026 program-%03g' 1 80"
