"""Floating-point formats of cuda_tile element types, without numpy.

Exact conversions between bit patterns and values (as `Fraction` or
`float`), round-to-nearest-even encoding of any rational, and MLIR's
float spelling (APFloat::toString with the printer's settings).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Union


@dataclass(frozen=True)
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

Special = str  # "inf", "-inf", "nan"


def decode(bits: int, name: str) -> Union[Fraction, Special]:
    """The exact value of `bits` in format `name`: a Fraction, or 'inf'/'-inf'/'nan'.

    Negative zero is returned as the string '-0'.
    """
    f = FORMATS[name]
    signed = f.kind != "fnu"
    man_mask = (1 << f.man_bits) - 1
    exp_mask = (1 << f.exp_bits) - 1
    man = bits & man_mask
    exp = (bits >> f.man_bits) & exp_mask
    neg = signed and bool(bits >> (f.exp_bits + f.man_bits) & 1)
    if f.kind == "ieee" and exp == exp_mask:
        if man:
            return "nan"
        return "-inf" if neg else "inf"
    if f.kind == "fn" and exp == exp_mask and man == man_mask:
        return "nan"
    if f.kind == "fnu" and exp == exp_mask and man == man_mask:
        return "nan"
    if f.kind == "fnu" and f.man_bits == 0:
        value = Fraction(2) ** (exp - f.bias)
    elif exp == 0:
        value = Fraction(man, 1 << f.man_bits) * Fraction(2) ** (1 - f.bias)
    else:
        value = (1 + Fraction(man, 1 << f.man_bits)) * Fraction(2) ** (exp - f.bias)
    if neg:
        if value == 0:
            return "-0"
        value = -value
    return value


def bits_to_float(bits: int, name: str) -> float:
    v = decode(bits, name)
    if v == "nan":
        return float("nan")
    if v == "inf":
        return float("inf")
    if v == "-inf":
        return float("-inf")
    if v == "-0":
        return -0.0
    return float(v)  # type: ignore[arg-type]


def encode(value: Union[Fraction, float, int, str], name: str) -> int:
    """Round `value` to the nearest representable value of `name` (ties to even)."""
    f = FORMATS[name]
    sign_shift = f.exp_bits + f.man_bits
    exp_mask = (1 << f.exp_bits) - 1
    man_mask = (1 << f.man_bits) - 1
    if isinstance(value, str):
        value = {"inf": float("inf"), "-inf": float("-inf"), "nan": float("nan"), "-0": -0.0}.get(value, value)
        if isinstance(value, str):
            value = Fraction(value)
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
        value = Fraction(value)
    q = Fraction(value)
    neg = q < 0
    if neg and f.kind == "fnu":
        return _nan_bits(f)
    q = abs(q)
    sign = (int(neg) << sign_shift) if f.kind != "fnu" else 0
    if q == 0:
        return sign
    if f.kind == "fnu" and f.man_bits == 0:
        # powers of two only; round in log space to the nearest even exponent-ish
        e = q.numerator.bit_length() - q.denominator.bit_length()
        lo = Fraction(2) ** e
        if lo > q:
            e -= 1
            lo /= 2
        hi = lo * 2
        e_sel = e + 1 if (q - lo) > (hi - q) or ((q - lo) == (hi - q) and (e + f.bias) % 2) else e
        biased = max(0, min(exp_mask - 1, e_sel + f.bias))
        return biased
    # Find exponent e with 2^e <= q < 2^(e+1).
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    min_exp = 1 - f.bias
    e = max(e, min_exp)
    scale = Fraction(2) ** (f.man_bits - e)
    scaled = q * scale  # significand in units of the last place
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1):
        n += 1
    if n >= (2 << f.man_bits):  # carried into the next binade
        n >>= 1
        e += 1
    if n < (1 << f.man_bits):  # subnormal
        biased = 0
        man = n
    else:
        biased = e + f.bias
        man = n - (1 << f.man_bits)
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
def _digits(q: Fraction) -> tuple[str, int]:
    """Exact decimal digits of positive q (most significant first) and base-10 exponent."""
    num, den = q.numerator, q.denominator
    # q = num / den with den a power of two (binary floats): multiply by 5^k
    k = den.bit_length() - 1
    if den != 1 << k:
        raise ValueError("not a binary fraction")
    n = num * 5 ** k
    exp = -k
    s = str(n)
    stripped = s.rstrip("0")
    exp += len(s) - len(stripped)
    return stripped, exp


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


def apfloat_to_string(q: Fraction, precision: int, max_padding: int, truncate_zero: bool,
                      semantics_precision: int) -> str:
    """llvm::APFloat::toString for a finite nonzero value q."""
    neg = q < 0
    q = abs(q)
    if precision == 0:
        precision = 2 + semantics_precision * 59 // 196
    buf, exp = _digits(q)
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


def mlir_float(bits: int, name: str) -> str:
    """How MLIR prints a float attribute value of type `name` with bit pattern `bits`."""
    v = decode(bits, name)
    f = FORMATS[name]
    if v == "-0":
        return "-0.000000e+00"
    if isinstance(v, Fraction):
        if v == 0:
            return "0.000000e+00"
        s = apfloat_to_string(v, 6, 0, False, f.precision)
        if encode(Fraction(s.replace("e", "E")), name) == bits:
            return s
        s = apfloat_to_string(v, 0, 3, True, f.precision)
        if "." in s:
            return s
    return "0x" + format(bits, "X")
