import numpy as np
def ew_float(c): pass
def ew_int(c): pass
def ew_int_unary(c): pass
def ew_bitwise(c): pass
def ew_scalar(c): pass
def ew_int_floordiv(c): pass
