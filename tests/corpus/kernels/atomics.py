"""Atomics: histogram with atomic add, compare-and-swap, exchange, min/max/and/or/xor,
float add, and atomic reductions into tiled views."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Const, Entry, Kernel, case, randint


@ct.kernel
def histogram(data, bins, NB: ct.Constant[int]):
    """bins[v % NB] += 1 for every element (atomic_rmw add, relaxed device scope)."""
    i = ct.bid(0)
    v = ct.load(data, index=(i,), shape=(128,), padding_mode=ct.PaddingMode.ZERO)
    k = ct.arange(128, dtype=ct.int32) + i * 128
    ct.atomic_add(bins, v % NB, ct.where(k < data.shape[0], 1, 0),
                  memory_order=ct.MemoryOrder.RELAXED)


@ct.kernel
def atomics_int(acc, slots, x, old_cas, old_xchg):
    """acc[0..5] fold every element of x with add/max/min/and/or/xor; slots get a per-lane
    compare-and-swap and exchange (each lane owns its slot, so old values are exact)."""
    i = ct.bid(0)
    v = ct.load(x, index=(i,), shape=(64,))
    zero = ct.zeros((64,), ct.int32)
    ct.atomic_add(acc, zero, v)
    ct.atomic_max(acc, zero + 1, v, memory_order=ct.MemoryOrder.ACQUIRE)
    ct.atomic_min(acc, zero + 2, v, memory_order=ct.MemoryOrder.RELEASE,
                  memory_scope=ct.MemoryScope.BLOCK)
    ct.atomic_and(acc, zero + 3, v)
    ct.atomic_or(acc, zero + 4, v, memory_scope=ct.MemoryScope.SYS)
    ct.atomic_xor(acc, zero + 5, v)
    lane = ct.arange(64, dtype=ct.int32) + i * 64
    prev = ct.atomic_cas(slots, lane, v % 2, v)
    ct.store(old_cas, index=(i,), tile=prev)
    ct.store(old_xchg, index=(i,), tile=ct.atomic_xchg(slots, lane + 128, v))


@ct.kernel
def atomics_float(acc, x, old):
    """Float atomic add (addf) and exchange on f32."""
    i = ct.bid(0)
    v = ct.load(x, index=(i,), shape=(64,))
    lane = ct.arange(64, dtype=ct.int32) % 4
    ct.atomic_add(acc, lane, v)
    mine = ct.arange(64, dtype=ct.int32) + i * 64 + 4
    ct.store(old, index=(i,), tile=ct.atomic_xchg(acc, mine, v))


@ct.kernel
def atomic_views(acc_f, acc_i, x, y):
    """Atomic reductions into tiled views (atomic_red_view_tko, 13.3)."""
    i = ct.bid(0)
    v = ct.load(x, index=(i,), shape=(32,))
    w = ct.load(y, index=(i,), shape=(32,))
    fv = acc_f.tiled_view((32,))
    fv.atomic_store_add((0,), v)
    iv = acc_i.tiled_view((32,))
    iv.atomic_store_max((0,), w)
    iv.atomic_store_min((1,), w)
    iv.atomic_store_and((2,), w)
    iv.atomic_store_or((3,), w)
    iv.atomic_store_xor((4,), w)
    iv.atomic_store_add((5,), w)


KERNELS = [
    Kernel("histogram", histogram,
           [Entry("histogram", {"data": Arr("int32", 1), "bins": Arr("int32", 1),
                                "NB": Const(16)},
                  [case((4,), data=((512,), randint(0, 1000)), bins=((16,), ZEROS)),
                   case((4,), "ragged", data=((450,), randint(0, 1000)), bins=((16,), ZEROS))],
                  "histogram", ("bins",))],
           "histogram with relaxed atomic adds, masked-off padding lanes add zero"),
    Kernel("atomics_int", atomics_int,
           [Entry(f"atomics_{d}",
                  {"acc": Arr(d, 1), "slots": Arr(d, 1), "x": Arr(d, 1), "old_cas": Arr(d, 1),
                   "old_xchg": Arr(d, 1)},
                  [case((2,), acc=((6,), ["values", init]),
                        slots=((256,), randint(0, 2)), x=((128,), randint(-50, 50)),
                        old_cas=((128,), ZEROS), old_xchg=((128,), ZEROS))],
                  "atomics_int", ("acc", "slots", "old_cas", "old_xchg"))
            for d, init in (("int32", [0, -1000, 1000, -1, 0, 0]),
                            ("int64", [0, -1000, 1000, -1, 0, 0]))] +
           [Entry("atomics_uint32",
                  {"acc": Arr("uint32", 1), "slots": Arr("uint32", 1), "x": Arr("uint32", 1),
                   "old_cas": Arr("uint32", 1), "old_xchg": Arr("uint32", 1)},
                  [case((2,), acc=((6,), ["values", [0, 0, 4294967295, 4294967295, 0, 0]]),
                        slots=((256,), randint(0, 2)), x=((128,), ["bits"]),
                        old_cas=((128,), ZEROS), old_xchg=((128,), ZEROS))],
                  "atomics_int", ("acc", "slots", "old_cas", "old_xchg"))],
           "atomic add/max/min/and/or/xor (signed and unsigned), cas and xchg, with "
           "acquire/release/relaxed orderings and block/device/sys scopes"),
    Kernel("atomics_float", atomics_float,
           [Entry("atomics_float32",
                  {"acc": Arr("float32", 1), "x": Arr("float32", 1), "old": Arr("float32", 1)},
                  [case((2,), acc=((132,), ZEROS), x=((128,), ["choice", [0.5, 1.0, 2.0, -0.25]]),
                        old=((128,), ZEROS))],
                  "atomics_float", ("acc", "old"))],
           "float atomic add (exact: inputs are small dyadic rationals) and exchange"),
    Kernel("atomic_views", atomic_views,
           [Entry("atomic_views",
                  {"acc_f": Arr("float32", 1), "acc_i": Arr("int32", 1), "x": Arr("float32", 1),
                   "y": Arr("int32", 1)},
                  [case((4,), acc_f=((32,), ZEROS),
                        acc_i=((192,), ["values", [0] * 32 + [10 ** 6] * 32 + [-1] * 32 +
                                        [0] * 96]),
                        x=((128,), ["choice", [0.5, 1.0, -2.0]]), y=((128,), randint(-100, 100)))],
                  "atomic_views", ("acc_f", "acc_i"))],
           "atomic add/max/min/and/or/xor into tiled views (atomic_red_view_tko)",
           skip={v: "tiled-view atomics need 13.3" for v in ("13.1", "13.2")}),
]
