"""Floating-point formats of cuda_tile element types, without numpy.

Exact conversions between bit patterns and values (as `Fraction` or
`float`), round-to-nearest-even encoding of any rational, and MLIR's
float spelling (APFloat::toString with the printer's settings).
"""

from __future__ import annotations

from .record import record


@record
class FloatFormat:
    name: str
    exp_bits: int
    man_bits: int
    # "ieee": inf + NaN; "fn": no inf, NaN = all ones; "fnu": unsigned, no inf/zero-free E8M0;
    # "finite": no inf, no NaN (f4E2M1FN)
    kind: str = "ieee"

    @property
    def width(self) -> int:
        signed = 0 if self.kind == "fnu" else 1
        return signed + self.exp_bits + self.man_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def precision(self) -> int:
        return self.man_bits + 1


FORMATS: dict[str, FloatFormat] = {
    "f16": FloatFormat("f16", 5, 10),
    "bf16": FloatFormat("bf16", 8, 7),
    "f32": FloatFormat("f32", 8, 23),
    "tf32": FloatFormat("tf32", 8, 10),
    "f64": FloatFormat("f64", 11, 52),
    "f8E4M3FN": FloatFormat("f8E4M3FN", 4, 3, "fn"),
    "f8E5M2": FloatFormat("f8E5M2", 5, 2),
    "f8E8M0FNU": FloatFormat("f8E8M0FNU", 8, 0, "fnu"),
    "f4E2M1FN": FloatFormat("f4E2M1FN", 2, 1, "finite"),
    "fnv8E5M3FNU": FloatFormat("fnv8E5M3FNU", 5, 3, "fnu"),
}

Special = str  # "inf", "-inf", "nan", "-0"


def decode_parts(bits: int, name: str) -> tuple:
    """(special, negative, num, exp2): value = +-num * 2**exp2, or special in
    ("inf", "-inf", "nan", "-0") (then the numbers are meaningless)."""
    f = FORMATS[name]
    signed = f.kind != "fnu"
    man_mask = (1 << f.man_bits) - 1
    exp_mask = (1 << f.exp_bits) - 1
    man = bits & man_mask
    exp = (bits >> f.man_bits) & exp_mask
    neg = signed and bool(bits >> (f.exp_bits + f.man_bits) & 1)
    if f.kind == "ieee" and exp == exp_mask:
        if man:
            return "nan", neg, 0, 0
        return ("-inf" if neg else "inf"), neg, 0, 0
    if f.kind in ("fn", "fnu") and exp == exp_mask and man == man_mask:
        return "nan", neg, 0, 0
    if f.kind == "fnu" and f.man_bits == 0:
        return None, False, 1, exp - f.bias
    if exp == 0:
        num, e2 = man, 1 - f.bias - f.man_bits
    else:
        num, e2 = (1 << f.man_bits) | man, exp - f.bias - f.man_bits
    if num == 0 and neg:
        return "-0", True, 0, 0
    return None, neg, num, e2


def decode(bits: int, name: str):
    """The exact value of `bits`: a Fraction, or 'inf'/'-inf'/'nan'/'-0'."""
    special, neg, num, e2 = decode_parts(bits, name)
    if special is not None:
        return special
    from fractions import Fraction

    v = Fraction(num * (1 << e2)) if e2 >= 0 else Fraction(num, 1 << -e2)
    return -v if neg else v


def bits_to_float(bits: int, name: str) -> float:
    special, neg, num, e2 = decode_parts(bits, name)
    if special is not None:
        return {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"), "-0": -0.0}[special]
    v = float(num * (1 << e2)) if e2 >= 0 else num / (1 << -e2) if -e2 < 1000 else 0.0
    return -v if neg else v


def integer_value(bits: int, name: str):
    """The value as a Python int when it is a non-negative integer below 2**64, else None."""
    special, neg, num, e2 = decode_parts(bits, name)
    if special is not None or neg:
        return None
    if e2 >= 0:
        v = num << e2
    elif num % (1 << -e2) == 0:
        v = num >> -e2
    else:
        return None
    return v if v < 1 << 64 else None


def encode(value, name: str) -> int:
    """Round `value` (Fraction, float, int, str or (num, den)) to the nearest value of `name` (ties to even)."""
    f = FORMATS[name]
    sign_shift = f.exp_bits + f.man_bits
    exp_mask = (1 << f.exp_bits) - 1
    man_mask = (1 << f.man_bits) - 1
    if isinstance(value, str):
        special = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan"), "-0": -0.0}.get(value)
        if special is None:
            from fractions import Fraction

            value = Fraction(value)
        else:
            value = special
    if isinstance(value, float):
        if value != value:
            return _nan_bits(f)
        if value in (float("inf"), float("-inf")):
            neg = value < 0
            if f.kind == "ieee":
                return (int(neg) << sign_shift) | (exp_mask << f.man_bits)
            return _max_finite(f, neg)  # saturate: no infinity in this format
        if value == 0.0:
            neg = str(value).startswith("-")
            return (int(neg) << sign_shift) if f.kind != "fnu" else 0
        p, q = value.as_integer_ratio()
    elif isinstance(value, tuple):
        p, q = value
    elif isinstance(value, int):
        p, q = value, 1
    else:
        p, q = value.numerator, value.denominator
    neg = (p < 0) != (q < 0)
    p, q = abs(p), abs(q)
    if neg and f.kind == "fnu":
        return _nan_bits(f)
    sign = (int(neg) << sign_shift) if f.kind != "fnu" else 0
    if p == 0:
        return sign
    # e with 2**e <= p/q < 2**(e+1)
    e = p.bit_length() - q.bit_length()
    if (p << -e if e < 0 else p) < (q << e if e > 0 else q):
        e -= 1
    if f.kind == "fnu" and f.man_bits == 0:
        # powers of two only: choose 2**e or 2**(e+1), ties to the even exponent field
        lo_p, lo_q = (1 << e, 1) if e >= 0 else (1, 1 << -e)
        # compare p/q - lo with 2*lo - p/q  <=> 2*p/q vs 3*lo
        lhs, rhs = 2 * p * lo_q, 3 * lo_p * q
        e_sel = e + 1 if lhs > rhs or (lhs == rhs and (e + f.bias) % 2) else e
        return max(0, min(exp_mask - 1, e_sel + f.bias))
    e = max(e, 1 - f.bias)
    shift = f.man_bits - e  # significand = p/q * 2**shift
    if shift >= 0:
        n, rem = divmod(p << shift, q)
    else:
        n, rem = divmod(p, q << -shift)
        q = q << -shift
    if 2 * rem > q or (2 * rem == q and n & 1):
        n += 1
    if n >= (2 << f.man_bits):  # carried into the next binade
        n >>= 1
        e += 1
    if n < (1 << f.man_bits):  # subnormal
        biased, man = 0, n
    else:
        biased, man = e + f.bias, n - (1 << f.man_bits)
    max_biased = exp_mask - 1 if f.kind == "ieee" else exp_mask
    if biased > max_biased or (f.kind in ("fn", "fnu") and biased == exp_mask and man == man_mask):
        if f.kind == "ieee":
            return sign | (exp_mask << f.man_bits)
        if f.kind == "finite":
            return sign | _max_finite(f, False)
        return _nan_bits(f) | sign
    return sign | (biased << f.man_bits) | man


def _nan_bits(f: FloatFormat) -> int:
    if f.kind == "ieee":
        return ((1 << f.exp_bits) - 1) << f.man_bits | (1 << (f.man_bits - 1) if f.man_bits else 1)
    if f.kind == "finite":
        return 0
    return (1 << (f.exp_bits + f.man_bits)) - 1


def _max_finite(f: FloatFormat, neg: bool) -> int:
    sign = (int(neg) << (f.exp_bits + f.man_bits)) if f.kind != "fnu" else 0
    exp_mask = (1 << f.exp_bits) - 1
    man_mask = (1 << f.man_bits) - 1
    if f.kind == "ieee":
        return sign | ((exp_mask - 1) << f.man_bits) | man_mask
    if f.kind in ("fn", "fnu"):
        return sign | (exp_mask << f.man_bits) | (man_mask - 1)
    return sign | (exp_mask << f.man_bits) | man_mask


def float_to_bits(value: float, name: str) -> int:
    return encode(value, name)


# -- MLIR spelling ---------------------------------------------------------------
def _digits(num: int, e2: int) -> tuple[str, int]:
    """Exact decimal digits of num * 2**e2 (most significant first, no trailing zeros) and the power of ten."""
    if e2 >= 0:
        n, exp = num << e2, 0
    else:
        n, exp = num * 5 ** (-e2), e2
    s = str(n)
    stripped = s.rstrip("0")
    return stripped, exp + len(s) - len(stripped)


def _adjust(buffer: str, exp: int, precision: int) -> tuple[str, int]:
    """LLVM's AdjustToPrecision (round half up on the decimal digits)."""
    n = len(buffer)
    if n <= precision:
        return buffer, exp
    keep = buffer[:precision]
    dropped = buffer[precision]
    exp += n - precision
    if dropped < "5":
        stripped = keep.rstrip("0")
        exp += len(keep) - len(stripped)
        return stripped, exp
    digits = list(keep)
    i = len(digits) - 1
    while i >= 0 and digits[i] == "9":
        i -= 1
    if i < 0:
        return "1", exp + len(digits)
    digits[i] = chr(ord(digits[i]) + 1)
    out = "".join(digits[:i + 1])
    exp += len(digits) - (i + 1)
    return out, exp


def apfloat_to_string(neg: bool, num: int, e2: int, precision: int, max_padding: int, truncate_zero: bool,
                      semantics_precision: int) -> str:
    """llvm::APFloat::toString for the finite nonzero value +-num * 2**e2."""
    if precision == 0:
        precision = 2 + semantics_precision * 59 // 196
    buf, exp = _digits(num, e2)
    buf, exp = _adjust(buf, exp, precision)
    nd = len(buf)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or nd + exp > precision
    else:
        msd = exp + nd - 1
        scientific = False if msd >= 0 else (-msd) > max_padding
    out = "-" if neg else ""
    if scientific:
        exp += nd - 1
        out += buf[0] + "."
        if nd == 1 and truncate_zero:
            out += "0"
        else:
            out += buf[1:]
        if not truncate_zero and precision > nd - 1:
            out += "0" * (precision - nd + 1)
        out += "E" if truncate_zero else "e"
        out += "+" if exp >= 0 else "-"
        e = str(abs(exp))
        if not truncate_zero and len(e) < 2:
            e = "0" + e
        return out + e
    if exp >= 0:
        return out + buf + "0" * exp
    whole = exp + nd
    if whole > 0:
        return out + buf[:whole] + "." + buf[whole:]
    return out + "0." + "0" * (-whole) + buf


def _decimal_ratio(s: str) -> tuple[int, int]:
    """An exact (num, den) for a decimal literal such as '-1.234500e-01'."""
    mant, _, exp = s.lower().partition("e")
    neg = mant.startswith("-")
    mant = mant.lstrip("+-")
    whole, _, frac = mant.partition(".")
    digits = int((whole + frac) or "0")
    e10 = (int(exp) if exp else 0) - len(frac)
    if neg:
        digits = -digits
    return (digits * 10 ** e10, 1) if e10 >= 0 else (digits, 10 ** -e10)


def mlir_float(bits: int, name: str) -> str:
    """How MLIR prints a float attribute value of type `name` with bit pattern `bits`."""
    special, neg, num, e2 = decode_parts(bits, name)
    f = FORMATS[name]
    if special == "-0":
        return "-0.000000e+00"
    if special is None:
        if num == 0:
            return "0.000000e+00"
        s = apfloat_to_string(neg, num, e2, 6, 0, False, f.precision)
        if encode(_decimal_ratio(s), name) == bits:
            return s
        s = apfloat_to_string(neg, num, e2, 0, 3, True, f.precision)
        if "." in s:
            return s
    return "0x" + format(bits, "X")
