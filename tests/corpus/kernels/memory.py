"""Memory access: pointer gather/scatter with masks, raw offsets, gather/scatter views,
tiled and strided views, padding values on ragged shapes, memory ordering and hints."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Entry, Kernel, Scalar, case, randint, uniform


@ct.kernel
def gather_scatter(x, idx, o_gather, o_scatter):
    """1-D gather with a mask and padding value, scatter with a mask; bounds-checked, so
    out-of-range indices read the padding and write nothing."""
    i = ct.bid(0)
    ix = ct.load(idx, index=(i,), shape=(64,))
    g = ct.gather(x, ix, mask=(ix % 5) != 0, padding_value=-7.0)
    ct.store(o_gather, index=(i,), tile=g)
    ct.scatter(o_scatter, ix, g * 2.0, mask=ix >= 3)


@ct.kernel
def gather_2d(x, rows, cols, out):
    """2-D gather with broadcast index tiles: out[r, c] = x[rows[r], cols[c]]; no bounds
    check (indices are in range by construction)."""
    i = ct.bid(0)
    r = ct.load(rows, index=(i,), shape=(16,))
    c = ct.load(cols, index=(0,), shape=(32,))
    g = ct.gather(x, (ct.expand_dims(r, 1), ct.expand_dims(c, 0)), check_bounds=False)
    ct.store(out, index=(i, 0), tile=g)


@ct.kernel
def raw_offsets(x, out):
    """Raw element offsets from the base pointer (load_ptr/store_ptr on offset pointers):
    out[k] = x[n - 1 - k] + 1 for k < n, masked at the ragged end."""
    i = ct.bid(0)
    n = x.shape[0]
    k = ct.arange(64, dtype=ct.int32) + i * 64
    src = x.get_raw_memory()
    v = src.load_offset(n - 1 - k, mask=k < n, padding_value=0.0)
    dst = out.get_raw_memory()
    dst.store_offset(k, v + 1.0, mask=k < n)


@ct.kernel
def gather_view(x, rows, out, col_start):
    """load/store_advanced_indexing: a gather/scatter view over rows (13.3)."""
    i = ct.bid(0)
    r = ct.load(rows, index=(i,), shape=(8,))
    t = ct.load_advanced_indexing(x, (r, ct.Slice(col_start, 16)),
                                  padding_mode=ct.PaddingMode.ZERO)
    ct.store_advanced_indexing(out, (r, ct.Slice(col_start, 16)), t * 3.0)


@ct.kernel
def tiled_view(x, out, counts):
    """Tiled views with explicit padding, and the tile count along an axis
    (get_index_space_shape)."""
    i = ct.bid(0)
    tv = x.tiled_view((16,), padding_mode=ct.PaddingMode.POS_INF)
    t = tv.load((i,))
    ov = out.tiled_view((16,))
    ov.store((i,), ct.minimum(t, 100.0))
    n = tv.num_tiles(0)
    m = ct.num_tiles(x, 0, shape=(32,))
    ct.store(counts, index=(i,), tile=ct.full((2,), 0, ct.int32) + ct.astile((n, m), dtype=ct.int32))


@ct.kernel
def strided_view(x, out):
    """Overlapping tiles (traversal step 8 < tile 16): strided view, 13.3."""
    i = ct.bid(0)
    tv = x.tiled_view((16,), padding_mode=ct.PaddingMode.ZERO, traversal_steps=(8,))
    ct.store(out, index=(i,), tile=tv.load((i,)))


@ct.kernel
def padding(x, out):
    """Ragged 2-D loads with every padding value; out[k] gets the tile padded with mode k."""
    i = ct.bid(0)
    j = ct.bid(1)
    pm = ct.PaddingMode
    a = ct.load(x, index=(i, j), shape=(16, 16), padding_mode=pm.ZERO)
    b = ct.load(x, index=(i, j), shape=(16, 16), padding_mode=pm.NEG_ZERO)
    c = ct.load(x, index=(i, j), shape=(16, 16), padding_mode=pm.NAN)
    d = ct.load(x, index=(i, j), shape=(16, 16), padding_mode=pm.POS_INF)
    e = ct.load(x, index=(i, j), shape=(16, 16), padding_mode=pm.NEG_INF)
    ct.store(out, index=(0, i, j), tile=ct.expand_dims(a, 0))
    ct.store(out, index=(1, i, j), tile=ct.expand_dims(b, 0))
    ct.store(out, index=(2, i, j), tile=ct.expand_dims(c, 0))
    ct.store(out, index=(3, i, j), tile=ct.expand_dims(d, 0))
    ct.store(out, index=(4, i, j), tile=ct.expand_dims(e, 0))


@ct.kernel
def memory_order(x, out):
    """Loads and stores with ordering/scope and latency/TMA hints."""
    i = ct.bid(0)
    mo, ms = ct.MemoryOrder, ct.MemoryScope
    a = ct.load(x, index=(i,), shape=(64,), memory_order=mo.ACQUIRE, memory_scope=ms.DEVICE)
    b = ct.load(x, index=(i,), shape=(64,), memory_order=mo.RELAXED, memory_scope=ms.BLOCK,
                latency=2)
    c = ct.load(x, index=(i,), shape=(64,), allow_tma=False, latency=8)
    ct.store(out, index=(0, i), tile=ct.expand_dims(a + b, 0), memory_order=mo.RELEASE,
             memory_scope=ms.SYS)
    ct.store(out, index=(1, i), tile=ct.expand_dims(c, 0), memory_order=mo.RELAXED,
             memory_scope=ms.DEVICE, allow_tma=False)


@ct.kernel
def unchecked(x, out):
    """check_bounds=False loads/stores (13.4): in-bounds by construction."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(64,), check_bounds=False)
    ct.store(out, index=(i,), tile=t * t, check_bounds=False)


def _f32(*names):
    return {n: Arr("float32", 1) for n in names}


KERNELS = [
    Kernel("gather_scatter", gather_scatter,
           [Entry("gather_scatter",
                  {"x": Arr("float32", 1), "idx": Arr("int32", 1), "o_gather": Arr("float32", 1),
                   "o_scatter": Arr("float32", 1)},
                  [case((2,), x=((100,), uniform(-5, 5)), idx=((128,), ["permutation", 130]),
                        o_gather=((128,), ZEROS), o_scatter=((100,), ZEROS))],
                  "gather_scatter", ("o_gather", "o_scatter"))],
           "pointer gather/scatter (offset, load_ptr_tko, store_ptr_tko) with masks; indices "
           "are distinct so the scatter is deterministic"),
    Kernel("gather_2d", gather_2d,
           [Entry("gather_2d",
                  {"x": Arr("float32", 2), "rows": Arr("int32", 1), "cols": Arr("int32", 1),
                   "out": Arr("float32", 2)},
                  [case((2,), x=((40, 50), uniform(-5, 5)), rows=((32,), randint(0, 40)),
                        cols=((32,), randint(0, 50)), out=((32, 32), ZEROS))],
                  "gather_2d", ("out",))],
           "2-D gather from broadcast index tiles without bounds checks"),
    Kernel("raw_offsets", raw_offsets,
           [Entry("raw_offsets", _f32("x", "out"),
                  [case((2,), x=((128,), uniform(-5, 5)), out=((128,), ZEROS)),
                   case((2,), "ragged", x=((100,), uniform(-5, 5)), out=((100,), ZEROS))],
                  "raw_offsets", ("out",))],
           "raw pointer offsets (reversal) with masks"),
    Kernel("gather_view", gather_view,
           [Entry("gather_view",
                  {"x": Arr("float32", 2), "rows": Arr("int32", 1), "out": Arr("float32", 2),
                   "col_start": Scalar("int32")},
                  [case((2,), x=((20, 40), uniform(-5, 5)), rows=((16,), ["permutation", 20]),
                        out=((20, 40), ZEROS), scalars={"col_start": 20})],
                  "gather_view", ("out",))],
           "gather/scatter views (make_gather_scatter_view) with zero padding",
           skip={v: "load_advanced_indexing needs 13.3" for v in ("13.1", "13.2")}),
    Kernel("tiled_view", tiled_view,
           [Entry("tiled_view",
                  {"x": Arr("float32", 1), "out": Arr("float32", 1), "counts": Arr("int32", 1)},
                  [case((4,), x=((60,), uniform(-5, 5)), out=((60,), ZEROS), counts=((8,), ZEROS))],
                  "tiled_view", ("out", "counts"))],
           "tiled views with +inf padding, tile counts (get_index_space_shape)"),
    Kernel("strided_view", strided_view,
           [Entry("strided_view", _f32("x", "out"),
                  [case((4,), x=((40,), uniform(-5, 5)), out=((64,), ZEROS))],
                  "strided_view", ("out",))],
           "overlapping tiles through a strided view (traversal step < tile)",
           skip={v: "traversal_steps needs 13.3" for v in ("13.1", "13.2")}),
    Kernel("padding", padding,
           [Entry("padding", {"x": Arr("float32", 2), "out": Arr("float32", 3)},
                  [case((2, 2), x=((20, 25), uniform(-5, 5)), out=((5, 32, 32), ZEROS))],
                  "padding", ("out",))],
           "zero, -0, NaN, +inf and -inf padding of ragged 2-D tiles"),
    Kernel("memory_order", memory_order,
           [Entry("memory_order", {"x": Arr("float32", 1), "out": Arr("float32", 2)},
                  [case((2,), x=((128,), uniform(-5, 5)), out=((2, 128), ZEROS))],
                  "memory_order", ("out",))],
           "acquire/relaxed loads, release/relaxed stores, block/device/sys scopes, latency "
           "and allow_tma hints"),
    Kernel("unchecked", unchecked,
           [Entry("unchecked", _f32("x", "out"),
                  [case((2,), x=((128,), uniform(-5, 5)), out=((128,), ZEROS))],
                  "unchecked", ("out",))],
           "loads/stores without bounds checks",
           skip={v: "check_bounds=False needs 13.4" for v in ("13.1", "13.2", "13.3")}),
]
