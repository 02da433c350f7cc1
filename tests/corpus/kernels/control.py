"""Control flow and kernel plumbing: for loops with carried values, while loops with
break/continue, if/else with yields, print and assert, 2-D/3-D grids, assumptions and
hints, grid dependency control, lists of arrays."""

import cuda.tile as ct

from corpus_spec import (ZEROS, Arr, ArrList, Const, Entry, Kernel, Scalar, case, randint, tol,
                         uniform)


@ct.kernel
def loop_carried(x, o_sum, o_max, o_count, TILES: ct.Constant[int]):
    """Row block i: sum and max over TILES column tiles (for with two carried tiles and a
    carried scalar), plus a nested loop with a runtime trip count and step 2."""
    i = ct.bid(0)
    acc = ct.zeros((8, 32), ct.float32)
    best = ct.full((8, 32), -1e30, ct.float32)
    count = 0
    for j in range(TILES):
        t = ct.load(x, index=(i, j), shape=(8, 32))
        acc = acc + t
        best = ct.maximum(best, t)
        for r in range(0, j, 2):
            count += r + 1
    ct.store(o_sum, index=(i, 0), tile=acc)
    ct.store(o_max, index=(i, 0), tile=best)
    ct.store(o_count, index=(i,), tile=ct.full((1,), count, ct.int32))


@ct.kernel
def while_break(x, out, limit):
    """Per block: walk tiles of x while the running total stays below `limit`; skip tiles
    whose first element is negative (continue); stop at a tile that contains a zero
    (break).  out[i] = [tiles consumed, running total]."""
    i = ct.bid(0)
    n = ct.num_tiles(x, 0, shape=(16,))
    k = i
    total = 0.0
    used = 0
    while k < n:
        t = ct.load(x, index=(k,), shape=(16,))
        k += ct.num_blocks(0)
        if ct.min(ct.abs(t)) == 0.0:
            break
        if ct.sum(ct.extract(t, (0,), (1,))) < 0.0:
            continue
        total += ct.sum(t)
        used += 1
        if total >= limit:
            break
    ct.store(out, index=(i, 0), tile=ct.astile(((ct.astype(used, ct.float32), total),),
                                               dtype=ct.float32))


@ct.kernel
def if_else(x, out, mode):
    """Scalar and data-dependent conditions, nested ifs, values yielded out of branches."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(64,))
    s = ct.sum(t)
    if s > 0.0:
        if mode == 1:
            r = t * 2.0
        else:
            r = t + 1.0
    elif s < -10.0:
        r = -t
    else:
        r = ct.zeros((64,), ct.float32)
    if i % 2 == 1:
        r = r + 100.0
    ct.store(out, index=(i,), tile=r)


@ct.kernel
def print_assert(x, out):
    """print and printf (print_tko; in 13.1 cuTile guards them with a global mutex, a
    spin loop and atomics), and assert on scalars and tiles."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(8,))
    ct.assert_(i >= 0, "block id is negative")
    ct.assert_(t < 1000, "value too large")
    print("block", i, "sum", ct.sum(t))
    ct.printf("block %d first %d\n", i, ct.sum(ct.extract(t, (0,), (1,))))
    ct.store(out, index=(i,), tile=t + 1)


@ct.kernel
def grid3d(out):
    """Block ids and grid size along all three axes: out[z, y, x, :] = (x, y, z, nx, ny, nz,
    linear id, 0)."""
    bx = ct.bid(0)
    by = ct.bid(1)
    bz = ct.bid(2)
    nx = ct.num_blocks(0)
    ny = ct.num_blocks(1)
    nz = ct.num_blocks(2)
    lin = (bz * ny + by) * nx + bx
    v = ct.astile((bx, by, bz, nx, ny, nz, lin, 0), dtype=ct.int32)
    ct.store(out, index=(bz, by, bx, 0), tile=ct.reshape(v, (1, 1, 1, 8)))


@ct.kernel(occupancy=2, opt_level=2)
def hints(x, y, out, n):
    """Assumptions from array constraints (static unit stride, divisibility, base
    alignment, int64 indices), assume_divisible_by, and entry optimization hints."""
    i = ct.bid(0)
    m = ct.assume_divisible_by(n, 64)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    scale = ct.astype(m // 64, ct.float32)
    ct.store(out, index=(i,), tile=a * scale + b)


@ct.kernel
def gdc(x, out):
    """Programmatic dependent launch: wait for the previous grid, signal the next (13.4)."""
    ct.grid_dependency_control_wait()
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(64,))
    ct.store(out, index=(i,), tile=t * 3.0)
    ct.grid_dependency_control_launch_dependents()


@ct.kernel
def list_sum(arrs, out):
    """Sum of a runtime-length list of 1-D arrays (descriptors read from memory,
    int_to_ptr)."""
    i = ct.bid(0)
    acc = ct.zeros((32,), ct.float32)
    for j in range(len(arrs)):
        acc = acc + ct.load(arrs[j], index=(i,), shape=(32,))
    ct.store(out, index=(i,), tile=acc)


KERNELS = [
    Kernel("loop_carried", loop_carried,
           [Entry("loop_carried",
                  {"x": Arr("float32", 2), "o_sum": Arr("float32", 2), "o_max": Arr("float32", 2),
                   "o_count": Arr("int32", 1), "TILES": Const(4)},
                  [case((2,), x=((16, 128), uniform(-3, 3)), o_sum=((16, 32), ZEROS),
                        o_max=((16, 32), ZEROS), o_count=((2,), ZEROS))],
                  "loop_carried", ("o_sum", "o_max", "o_count"), tolerance=tol(1e-5))],
           "for loops carrying tiles and scalars, nested loop with step"),
    Kernel("while_break", while_break,
           [Entry("while_break",
                  {"x": Arr("float32", 1), "out": Arr("float32", 2), "limit": Scalar("float32")},
                  [case((2,), x=((256,), ["choice", [-1.0, 0.5, 1.0, 2.0, 3.0]]),
                        out=((2, 2), ZEROS), scalars={"limit": 60.0}),
                   case((3,), "zeros", x=((208,), ["choice", [0.0, 1.0, 1.0, 1.0, 2.0, -3.0]]),
                        out=((3, 2), ZEROS), scalars={"limit": 1000.0})],
                  "while_break", ("out",), tolerance=tol(1e-5))],
           "while loop (loop op) with break and continue, carried values"),
    Kernel("if_else", if_else,
           [Entry("if_else",
                  {"x": Arr("float32", 1), "out": Arr("float32", 1), "mode": Scalar("int32")},
                  [case((4,), x=((256,), uniform(-1, 1.2)), out=((256,), ZEROS),
                        scalars={"mode": 1}),
                   case((4,), "mode0", x=((256,), uniform(-1.5, 1.0)), out=((256,), ZEROS),
                        scalars={"mode": 0})],
                  "if_else", ("out",), tolerance=tol(1e-6))],
           "if/elif/else yielding tiles, nested and scalar conditions"),
    Kernel("print_assert", print_assert,
           [Entry("print_assert", {"x": Arr("int32", 1), "out": Arr("int32", 1)},
                  [case((2,), x=((16,), randint(-20, 20)), out=((16,), ZEROS))],
                  "print_assert", ("out",))],
           "print/printf and assert (13.1 form uses global, get_global, loop, break, "
           "continue and atomics)", prints=True),
    Kernel("grid3d", grid3d,
           [Entry("grid3d", {"out": Arr("int32", 4)},
                  [case((3, 2, 2), out=((2, 2, 3, 8), ZEROS))],
                  "grid3d", ("out",))],
           "bid(0..2) and num_blocks(0..2) on a 3-D grid"),
    Kernel("hints", hints,
           [Entry("hints_contiguous",
                  {"x": Arr("float32", 1, stride_constant=(1,), base_addr_divisible_by=16,
                            shape_divisible_by=64),
                   "y": Arr("float32", 1, stride_divisible_by=1, base_addr_divisible_by=128),
                   "out": Arr("float32", 1, stride_constant=(1,), shape_divisible_by=64),
                   "n": Scalar("int32")},
                  [case((2,), x=((128,), uniform(-1, 1)), y=((128,), uniform(-1, 1)),
                        out=((128,), ZEROS), scalars={"n": 192})],
                  "hints", ("out",), tolerance=tol(1e-6)),
            Entry("hints_int64",
                  {"x": Arr("float32", 1, index_dtype="int64"),
                   "y": Arr("float32", 1, index_dtype="int64"),
                   "out": Arr("float32", 1, index_dtype="int64"), "n": Scalar("int64")},
                  [case((2,), x=((128,), uniform(-1, 1)), y=((128,), uniform(-1, 1)),
                        out=((128,), ZEROS), scalars={"n": 128})],
                  "hints", ("out",), tolerance=tol(1e-6))],
           "assume predicates from array constraints (div_by, bounded, static strides), "
           "int64 index parameters, assume_divisible_by, occupancy hint"),
    Kernel("gdc", gdc,
           [Entry("gdc", {"x": Arr("float32", 1), "out": Arr("float32", 1)},
                  [case((2,), x=((128,), uniform(-1, 1)), out=((128,), ZEROS))],
                  "gdc", ("out",), tolerance=tol(1e-6))],
           "grid dependency control (gdc_wait_tko, gdc_launch_dependents_tko)",
           skip={v: "grid dependency control needs 13.4" for v in ("13.1", "13.2", "13.3")}),
    Kernel("list_sum", list_sum,
           [Entry("list_sum", {"arrs": ArrList(Arr("float32", 1)), "out": Arr("float32", 1)},
                  [case((2,), arrs=[((64,), uniform(-1, 1)), ((64,), uniform(-1, 1)),
                                    ((80,), uniform(-1, 1))],
                        out=((64,), ZEROS))],
                  "list_sum", ("out",), tolerance=tol(1e-6))],
           "a list-of-arrays parameter: descriptors loaded from memory, int_to_ptr"),
]
