"""Constants, iota, broadcast, reshape, permute, transpose, extract, cat, insert."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Entry, Kernel, case, randint, uniform


@ct.kernel
def shape_const(o_iota, o_step, o_full, o_ones, o_dense, o_bool):
    """Tiles made from nothing: iota (arange), full/ones/zeros, dense constants."""
    i = ct.bid(0)
    ct.store(o_iota, index=(i,), tile=ct.arange(64, dtype=ct.int32) + i * 64)
    ct.store(o_step, index=(i,), tile=ct.arange(64, dtype=ct.int64, start=100, step=-3))
    ct.store(o_full, index=(i,), tile=ct.full((64,), 2.5, ct.float32) + ct.zeros((64,), ct.float32))
    ct.store(o_ones, index=(i,), tile=ct.ones((64,), ct.float16))
    dense = ct.astile(((1.5, -2.0, 3.25, 0.0), (4.0, -0.5, 6.0, 7.75)), dtype=ct.float32)
    ct.store(o_dense, index=(i, 0), tile=dense)
    ct.store(o_bool, index=(i,), tile=ct.astype(ct.arange(64, dtype=ct.int32) % 3 == 0, ct.int8))


@ct.kernel
def shape_reshape(x, o_t, o_perm, o_bcast, o_flat, o_expand):
    """2-D tile games on a 16x16 tile of a 2-D array; grid over row tiles."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 16))
    ct.store(o_t, index=(0, i), tile=ct.transpose(t))
    p = ct.permute(ct.reshape(t, (4, 4, 16)), (2, 0, 1))           # (16, 4, 4)
    ct.store(o_perm, index=(i, 0), tile=ct.reshape(p, (16, 16)))
    row = ct.load(x, index=(i, 0), shape=(1, 16))
    ct.store(o_bcast, index=(i, 0), tile=ct.broadcast_to(row, (16, 16)) * t)
    ct.store(o_flat, index=(i,), tile=ct.reshape(t, (256,)))
    col = ct.sum(t, axis=1)                                         # (16,)
    ct.store(o_expand, index=(i, 0), tile=ct.expand_dims(col, 1) + t)


@ct.kernel
def shape_extract_cat(x, o_cat0, o_cat1, o_ext):
    """extract sub-tiles and cat them back along both axes."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 32))
    left = ct.extract(t, (0, 0), (16, 16))
    right = ct.extract(t, (0, 1), (16, 16))
    ct.store(o_cat0, index=(i, 0), tile=ct.cat((right, left), 0))     # (32, 16)
    ct.store(o_cat1, index=(i, 0), tile=ct.cat((right, left), 1))     # (16, 32)
    top = ct.extract(t, (1, 0), (8, 32))
    ct.store(o_ext, index=(i, 0), tile=top)


@ct.kernel
def shape_insert(x, out):
    """insert (13.4): write a 16-wide tile into the second quarter of a zero 64-wide tile."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(16,))
    z = ct.insert(ct.full((64,), -1.0, ct.float32), (1,), t)
    ct.store(out, index=(i,), tile=z)


@ct.kernel
def transpose(x, y):
    """The classic: tile (i, j) of x goes to tile (j, i) of y, 32x32 tiles."""
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(32, 32))
    ct.store(y, index=(j, i), tile=ct.transpose(t))


@ct.kernel
def transpose_order(x, y):
    """Transpose through the load's axis order ("F") instead of a transpose op."""
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(j, i), shape=(32, 32), order="F")
    ct.store(y, index=(j, i), tile=t)


def _f32(*names, ndim=2):
    return {n: Arr("float32", ndim) for n in names}


KERNELS = [
    Kernel("shape_const", shape_const,
           [Entry("shape_const",
                  {"o_iota": Arr("int32", 1), "o_step": Arr("int64", 1),
                   "o_full": Arr("float32", 1), "o_ones": Arr("float16", 1),
                   "o_dense": Arr("float32", 2), "o_bool": Arr("int8", 1)},
                  [case((2,), o_iota=((128,), ZEROS), o_step=((128,), ZEROS),
                        o_full=((128,), ZEROS), o_ones=((128,), ZEROS), o_dense=((4, 4), ZEROS),
                        o_bool=((128,), ZEROS))],
                  "shape_const", ("o_iota", "o_step", "o_full", "o_ones", "o_dense", "o_bool"))],
           "iota, arange with start/step, full/zeros/ones, dense constant tiles"),
    Kernel("shape_reshape", shape_reshape,
           [Entry("shape_reshape",
                  {"x": Arr("float32", 2), "o_t": Arr("float32", 2), "o_perm": Arr("float32", 2),
                   "o_bcast": Arr("float32", 2), "o_flat": Arr("float32", 1),
                   "o_expand": Arr("float32", 2)},
                  [case((2,), x=((32, 16), uniform(-2, 2)), o_t=((16, 32), ZEROS),
                        o_perm=((32, 16), ZEROS), o_bcast=((32, 16), ZEROS),
                        o_flat=((512,), ZEROS), o_expand=((32, 16), ZEROS))],
                  "shape_reshape", ("o_t", "o_perm", "o_bcast", "o_flat", "o_expand"),
                  tolerance={"rtol": 1e-5, "atol": 1e-5})],
           "transpose, reshape, permute, broadcast, expand_dims"),
    Kernel("shape_extract_cat", shape_extract_cat,
           [Entry("shape_extract_cat",
                  {"x": Arr("int32", 2), "o_cat0": Arr("int32", 2), "o_cat1": Arr("int32", 2),
                   "o_ext": Arr("int32", 2)},
                  [case((2,), x=((32, 32), randint(-1000, 1000)), o_cat0=((64, 16), ZEROS),
                        o_cat1=((32, 32), ZEROS), o_ext=((16, 32), ZEROS))],
                  "shape_extract_cat", ("o_cat0", "o_cat1", "o_ext"))],
           "extract and cat along both axes"),
    Kernel("shape_insert", shape_insert,
           [Entry("shape_insert", {"x": Arr("float32", 1), "out": Arr("float32", 1)},
                  [case((2,), x=((32,), uniform(-2, 2)), out=((128,), ZEROS))],
                  "shape_insert", ("out",))],
           "insert a tile into a larger one (13.4)",
           skip={v: "insert needs 13.4" for v in ("13.1", "13.2", "13.3")}),
    Kernel("transpose", transpose,
           [Entry("transpose_f32", _f32("x", "y"),
                  [case((2, 3), x=((64, 96), uniform(-5, 5)), y=((96, 64), ZEROS)),
                   case((2, 3), "ragged", x=((50, 70), uniform(-5, 5)), y=((70, 50), ZEROS))],
                  "transpose", ("y",)),
            Entry("transpose_f16", {"x": Arr("float16", 2), "y": Arr("float16", 2)},
                  [case((2, 2), x=((64, 64), uniform(-5, 5)), y=((64, 64), ZEROS))],
                  "transpose", ("y",))],
           "32x32 tile transpose over a 2-D grid (f32 and f16 entries)"),
    Kernel("transpose_order", transpose_order,
           [Entry("transpose_order", _f32("x", "y"),
                  [case((2, 3), x=((64, 96), uniform(-5, 5)), y=((96, 64), ZEROS))],
                  "transpose", ("y",))],
           "transpose through a column-major partition view (load order='F')"),
]
