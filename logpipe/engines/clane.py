"""What the engines' C fast lanes share on the Python side (``logpipe/engines/columns.h``
on the C side): columns built in C, wrapped as a polars frame without a copy.  The switch
that turns every lane off is :func:`logpipe.lanes.lane_enabled`.

A lane is optional: without a C compiler at install time its extension is missing and
its engine parses every line in Python and polars (the same rows, slower).
``LOGPIPE_FASTLANE=0`` turns every lane off.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

_TYPES = {"i64": pa.int64(), "i32": pa.int32(), "f64": pa.float64(), "u8": pa.uint8()}


def columns_frame(cols: dict[str, tuple[bytes, bytes, bytes | None]], kinds: dict[str, str]
                  ) -> pl.DataFrame:
    """A C scan's columns (``(values, validity, offsets)`` buffers by name, their types
    by name in ``kinds``) as Arrow arrays over its buffers (no copy; building them from
    numpy with ``pa.array`` would also import pandas, a third of a second per process)."""
    arrays = {}
    for name, (data, valid, offsets) in cols.items():
        ok = np.frombuffer(valid, dtype=np.uint8).astype(bool)
        n = len(ok)
        bitmap = None if ok.all() else pa.py_buffer(np.packbits(ok, bitorder="little"))
        if offsets is not None:
            arrays[name] = pa.LargeStringArray.from_buffers(
                n, pa.py_buffer(offsets), pa.py_buffer(data), bitmap)
        else:
            arrays[name] = pa.Array.from_buffers(_TYPES[kinds[name]], n,
                                                 [bitmap, pa.py_buffer(data)])
    return pl.from_arrow(pa.table(arrays))  # type: ignore[return-value]
