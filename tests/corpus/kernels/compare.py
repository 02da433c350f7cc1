"""Comparisons (ordered/unordered floats, signed/unsigned integers), isnan and select."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Entry, Kernel, case, choice


@ct.kernel
def cmp_float(x, y, flags, sel):
    """flags[k] = comparison k as 0/1 bytes; sel[0] = where(x > y, x, y), sel[1] = nan -> 0."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    ct.store(flags, index=(0, i), tile=ct.expand_dims(ct.astype((a < b), ct.int8), 0))
    ct.store(flags, index=(1, i), tile=ct.expand_dims(ct.astype((a <= b), ct.int8), 0))
    ct.store(flags, index=(2, i), tile=ct.expand_dims(ct.astype((a > b), ct.int8), 0))
    ct.store(flags, index=(3, i), tile=ct.expand_dims(ct.astype((a >= b), ct.int8), 0))
    ct.store(flags, index=(4, i), tile=ct.expand_dims(ct.astype((a == b), ct.int8), 0))
    ct.store(flags, index=(5, i), tile=ct.expand_dims(ct.astype((a != b), ct.int8), 0))
    ct.store(flags, index=(6, i), tile=ct.expand_dims(ct.astype(ct.isnan(a), ct.int8), 0))
    ct.store(flags, index=(7, i), tile=ct.expand_dims(ct.astype(((a < b) | ct.isnan(b)), ct.int8), 0))
    ct.store(sel, index=(0, i), tile=ct.expand_dims(ct.where(a > b, a, b), 0))
    ct.store(sel, index=(1, i), tile=ct.expand_dims(ct.where(ct.isnan(a), 0.0, a), 0))


def _float_entry(dtype: str) -> Entry:
    params = {"x": Arr(dtype, 1), "y": Arr(dtype, 1), "flags": Arr("int8", 2),
              "sel": Arr(dtype, 2)}
    values = choice([-2.0, -0.5, 0.0, 0.5, 1.0, 3.0, "inf", "-inf", "nan"])
    return Entry(symbol=f"cmp_float_{dtype}", params=params, reference="cmp_float",
                 outputs=("flags", "sel"),
                 cases=[case((2,), x=((128,), values), y=((128,), values),
                             flags=((8, 128), ZEROS), sel=((2, 128), ZEROS)),
                        case((2,), "ragged", x=((90,), values), y=((90,), values),
                             flags=((8, 90), ZEROS), sel=((2, 90), ZEROS))])


@ct.kernel
def cmp_int(x, y, flags, sel):
    """Signedness comes from the array dtype: cmpi signed/unsigned."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    ct.store(flags, index=(0, i), tile=ct.expand_dims(ct.astype((a < b), ct.int8), 0))
    ct.store(flags, index=(1, i), tile=ct.expand_dims(ct.astype((a <= b), ct.int8), 0))
    ct.store(flags, index=(2, i), tile=ct.expand_dims(ct.astype((a > b), ct.int8), 0))
    ct.store(flags, index=(3, i), tile=ct.expand_dims(ct.astype((a >= b), ct.int8), 0))
    ct.store(flags, index=(4, i), tile=ct.expand_dims(ct.astype((a == b), ct.int8), 0))
    ct.store(flags, index=(5, i), tile=ct.expand_dims(ct.astype((a != b), ct.int8), 0))
    ct.store(sel, index=(0, i), tile=ct.expand_dims(ct.where(a < b, b - a, a - b), 0))
    ct.store(sel, index=(1, i), tile=ct.expand_dims(ct.where(a == b, a, 0), 0))


def _int_entry(dtype: str) -> Entry:
    params = {"x": Arr(dtype, 1), "y": Arr(dtype, 1), "flags": Arr("int8", 2),
              "sel": Arr(dtype, 2)}
    # A few shared values make equality common; "bits" covers sign-bit patterns.
    values = choice([0, 1, 2, 100, 127]) if dtype.startswith("u") else choice([-128, -1, 0, 1, 2, 127])
    return Entry(symbol=f"cmp_int_{dtype}", params=params, reference="cmp_int",
                 outputs=("flags", "sel"),
                 cases=[case((2,), x=((128,), ["bits"]), y=((128,), ["bits"]),
                             flags=((6, 128), ZEROS), sel=((2, 128), ZEROS)),
                        case((2,), "small", x=((128,), values), y=((128,), values),
                             flags=((6, 128), ZEROS), sel=((2, 128), ZEROS))])


KERNELS = [
    Kernel("cmp_float", cmp_float,
           [_float_entry(d) for d in ("float32", "float16", "float64")],
           "ordered and unordered float comparisons with NaN/inf inputs, isnan, select"),
    Kernel("cmp_int", cmp_int,
           [_int_entry(d) for d in ("int32", "uint32", "int64", "uint8", "int16")],
           "signed and unsigned integer comparisons and select"),
]
