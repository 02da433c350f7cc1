"""The cuda_tile op set: one declaration per op (bytecode versions 13.1 to 13.5).

Facts (opcodes, argument names and order, versions, assembly formats) follow
NVIDIA's public dialect definition; see registry.define() for the syntax:

  ins/outs  `name[?|*]:constraint[@since]`   (? optional, * variadic)
  attrs     `name[?]:kind[=default][@since]` (kind: enum.<Enum>, unit, bool,
            i32, i64, str, symref, type, dense, i32array, boolarray, hints,
            predicate, array, dictarray)
  fmt       the MLIR declarative assembly format, or None for the ops whose
            printer/parser is hand written (text/custom_ops.py)

Attribute order is declaration order: it is the order bytecode stores them.
"""

from __future__ import annotations

from .registry import define

_UNARY_F = "$source attr-dict `:` custom<CudaTileType>(type($result))"
_BINARY = "$lhs `,` $rhs attr-dict `:` custom<CudaTileType>(type($result))"
_BINARY_XY = "$x `,` $y attr-dict `:` custom<CudaTileType>(type($result))"
_OVERFLOW_BIN = "$lhs `,` $rhs (`overflow` `` $overflow^)? attr-dict `:` custom<CudaTileType>(type($result))"
_SIGNED_BIN = "$lhs `,` $rhs custom<Signedness>($signedness) attr-dict `:` custom<CudaTileType>(type($result))"
_FLOAT_BIN = ("$lhs `,` $rhs custom<IEEERoundingMode>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? "
              "attr-dict `:` custom<CudaTileType>(type($result))")
_MINMAX_F = ("$lhs `,` $rhs oilist(`flush_to_zero` $flush_to_zero | `propagate_nan` $propagate_nan) "
             "attr-dict `:` custom<CudaTileType>(type($result))")
_CAST = "$source attr-dict `:` custom<CudaTileType>(type($source)) `->` custom<CudaTileType>(type($result))"
_TERMINATOR = "attr-dict ($operands^ `:` custom<CudaTileType>(type($operands)))?"

# -- elementwise floating point ---------------------------------------------
for _name, _opc in (("absf", 0x00), ("ceil", 0x0D), ("cos", 0x12), ("cosh", 0x13), ("floor", 0x27),
                    ("log", 0x3F), ("log2", 0x40), ("negf", 0x4F), ("sin", 0x62), ("sinh", 0x63),
                    ("tan", 0x69)):
    define(_name, _opc, "13.1", ins="source:float_tile", outs="result:float_tile", traits="Pure",
           fmt=_UNARY_F)

for _name, _opc in (("addf", 0x02), ("mulf", 0x4C), ("subf", 0x67)):
    define(_name, _opc, "13.1", ins="lhs:float_tile rhs:float_tile", outs="result:float_tile",
           attrs="rounding_mode:enum.RoundingMode flush_to_zero:unit", traits="Pure", fmt=_FLOAT_BIN)

define("divf", 0x14, "13.1", ins="lhs:float_tile rhs:float_tile", outs="result:float_tile",
       attrs="rounding_mode:enum.RoundingMode flush_to_zero:unit", traits="Pure",
       fmt="$lhs `,` $rhs custom<DivFOpRoundingMode>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? "
           "attr-dict `:` custom<CudaTileType>(type($result))")
define("remf", 0x59, "13.1", ins="lhs:float_tile rhs:float_tile", outs="result:float_tile", traits="Pure",
       fmt=_BINARY)
define("atan2", 0x6E, "13.2", ins="x:float_tile@13.2 y:float_tile@13.2", outs="result:float_tile@13.2",
       traits="Pure", fmt=_BINARY_XY)
define("fpowf", 0x54, "13.1", ins="source:float_tile exponent:float_tile", outs="result:float_tile",
       traits="Pure", fmt="$source `,` $exponent attr-dict `:` custom<CudaTileType>(type($result))")
define("fpowi", 0x79, "13.4", ins="source:float_tile@13.4 exponent:int_tile@13.4", outs="result:float_tile@13.4",
       traits="Pure",
       fmt="$source `,` $exponent attr-dict `:` custom<CudaTileType>(type($source)) `,` "
           "custom<CudaTileType>(type($exponent))")
define("fma", 0x28, "13.1", ins="lhs:float_tile rhs:float_tile acc:float_tile", outs="result:float_tile",
       attrs="rounding_mode:enum.RoundingMode flush_to_zero:unit", traits="Pure",
       fmt="$lhs `,` $rhs `,` $acc custom<IEEERoundingMode>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? "
           "attr-dict `:` custom<CudaTileType>(type($result))")
define("exp", 0x17, "13.1", ins="source:float_tile", outs="result:float_tile",
       attrs="rounding_mode:enum.RoundingMode=full@13.3", traits="Pure",
       fmt="$source custom<ExpOpRoundingMode>($rounding_mode) attr-dict `:` custom<CudaTileType>(type($result))")
define("exp2", 0x18, "13.1", ins="source:float_tile", outs="result:float_tile", attrs="flush_to_zero:unit",
       traits="Pure",
       fmt="$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` custom<CudaTileType>(type($result))")
define("rsqrt", 0x5D, "13.1", ins="source:float_tile", outs="result:float_tile", attrs="flush_to_zero:unit",
       traits="Pure",
       fmt="$source (`flush_to_zero` $flush_to_zero^)? attr-dict `:` custom<CudaTileType>(type($result))")
define("sqrt", 0x64, "13.1", ins="source:float_tile", outs="result:float_tile",
       attrs="rounding_mode:enum.RoundingMode flush_to_zero:unit", traits="Pure",
       fmt="$source custom<SqrtOpRoundingMode>($rounding_mode) (`flush_to_zero` $flush_to_zero^)? "
           "attr-dict `:` custom<CudaTileType>(type($result))")
define("tanh", 0x6A, "13.1", ins="source:float_tile", outs="result:float_tile",
       attrs="rounding_mode:enum.RoundingMode=full@13.2", traits="Pure",
       fmt="$source custom<TanHOpRoundingMode>($rounding_mode) attr-dict `:` custom<CudaTileType>(type($result))")
for _name, _opc in (("maxf", 0x45), ("minf", 0x47)):
    define(_name, _opc, "13.1", ins="lhs:float_tile rhs:float_tile", outs="result:float_tile",
           attrs="propagate_nan:unit flush_to_zero:unit", traits="Pure", fmt=_MINMAX_F)
define("cmpf", 0x0E, "13.1", ins="lhs:float_tile rhs:float_tile", outs="result:i1_tile",
       attrs="comparison_predicate:enum.ComparisonPredicate comparison_ordering:enum.ComparisonOrdering",
       traits="Pure",
       fmt="custom<ComparisonPredicate>($comparison_predicate) custom<ComparisonOrdering>($comparison_ordering) "
           "$lhs `,` $rhs attr-dict `:` custom<CudaTileType>(type($lhs)) `->` custom<CudaTileType>(type($result))")

# -- integer ---------------------------------------------------------------
define("absi", 0x01, "13.1", ins="source:int_tile", outs="result:int_tile", traits="Pure", fmt=_UNARY_F)
for _name, _opc in (("addi", 0x03), ("muli", 0x4E), ("subi", 0x68), ("shli", 0x60)):
    define(_name, _opc, "13.1", ins="lhs:int_tile rhs:int_tile", outs="result:int_tile",
           attrs="overflow:enum.IntegerOverflow=none", traits="Pure", fmt=_OVERFLOW_BIN)
for _name, _opc in (("andi", 0x04), ("ori", 0x52), ("xori", 0x6C)):
    define(_name, _opc, "13.1", ins="lhs:int_tile rhs:int_tile", outs="result:int_tile", traits="Pure",
           fmt=_BINARY)
define("mulhii", 0x4D, "13.1", ins="x:int_tile y:int_tile", outs="result:int_tile", traits="Pure", fmt=_BINARY_XY)
for _name, _opc in (("maxi", 0x46), ("mini", 0x48), ("remi", 0x5A), ("shri", 0x61)):
    define(_name, _opc, "13.1", ins="lhs:int_tile rhs:int_tile", outs="result:int_tile",
           attrs="signedness:enum.Signedness", traits="Pure", fmt=_SIGNED_BIN)
define("divi", 0x15, "13.1", ins="lhs:int_tile rhs:int_tile", outs="result:int_tile",
       attrs="signedness:enum.Signedness rounding:enum.RoundingMode=zero",
       fmt="$lhs `,` $rhs custom<Signedness>($signedness) (`rounding` `` $rounding^)? attr-dict `:` "
           "custom<CudaTileType>(type($result))")
define("negi", 0x50, "13.1", ins="source:int_tile", outs="result:int_tile",
       attrs="overflow:enum.IntegerOverflow=none@13.2", traits="Pure",
       fmt="$source (`overflow` `` $overflow^)? attr-dict `:` custom<CudaTileType>(type($result))")
define("cmpi", 0x0F, "13.1", ins="lhs:int_tile rhs:int_tile", outs="result:i1_tile",
       attrs="comparison_predicate:enum.ComparisonPredicate signedness:enum.Signedness", traits="Pure",
       fmt="custom<ComparisonPredicate>($comparison_predicate) $lhs `,` $rhs `,` custom<Signedness>($signedness) "
           "attr-dict `:` custom<CudaTileType>(type($lhs)) `->` custom<CudaTileType>(type($result))")

# -- conversions ------------------------------------------------------------
define("bitcast", 0x09, "13.1", ins="source:number_tile", outs="result:number_tile", traits="Pure", fmt=_CAST)
define("int_to_ptr", 0x33, "13.1", ins="source:i64_tile", outs="result:ptr_tile", traits="Pure", fmt=_CAST)
define("ptr_to_int", 0x56, "13.1", ins="source:ptr_tile", outs="result:i64_tile", traits="Pure", fmt=_CAST)
define("ptr_to_ptr", 0x57, "13.1", ins="source:ptr_tile", outs="result:ptr_tile", traits="Pure", fmt=_CAST)
define("exti", 0x25, "13.1", ins="from:int4_tile", outs="to:int4_tile", attrs="signedness:enum.Signedness",
       traits="Pure",
       fmt="$from custom<Signedness>($signedness) attr-dict `:` custom<CudaTileType>(type($from)) `->` "
           "custom<CudaTileType>(type($to))")
define("trunci", 0x6B, "13.1", ins="from:int4_tile", outs="to:int4_tile", attrs="overflow:enum.IntegerOverflow=none",
       traits="Pure",
       fmt="$from (`overflow` `` $overflow^)? attr-dict `:` custom<CudaTileType>(type($from)) `->` "
           "custom<CudaTileType>(type($to))")
define("ftof", 0x2A, "13.1", ins="from:anyfloat_tile", outs="to:anyfloat_tile",
       attrs="rounding_mode:enum.RoundingMode=nearest_even", traits="Pure",
       fmt="$from custom<FToFRoundingMode>($rounding_mode) attr-dict `:` custom<CudaTileType>(type($from)) `->` "
           "custom<CudaTileType>(type($to))")
define("ftoi", 0x2B, "13.1", ins="from:anyfloat_tile", outs="to:int_tile",
       attrs="signedness:enum.Signedness rounding_mode:enum.RoundingMode saturating:unit@13.4", traits="Pure",
       fmt="$from custom<Signedness>($signedness) custom<IntegerRoundingMode>($rounding_mode) "
           "(`saturating` $saturating^)? attr-dict `:` custom<CudaTileType>(type($from)) `->` "
           "custom<CudaTileType>(type($to))")
define("itof", 0x3B, "13.1", ins="from:int_tile", outs="to:anyfloat_tile",
       attrs="signedness:enum.Signedness rounding_mode:enum.RoundingMode", traits="Pure",
       fmt="$from custom<Signedness>($signedness) custom<IEEERoundingMode>($rounding_mode) attr-dict `:` "
           "custom<CudaTileType>(type($from)) `->` custom<CudaTileType>(type($to))")

# -- shape, constants, selection ---------------------------------------------
define("broadcast", 0x0B, "13.1", ins="source:tile", outs="result:tile", traits="Pure", fmt=_CAST)
define("reshape", 0x5B, "13.1", ins="source:tile", outs="result:tile", traits="Pure", fmt=_CAST)
define("pack", 0x6F, "13.3", ins="source:unpacked_tile@13.3", outs="result:i8_tile@13.3", traits="Pure", fmt=_CAST)
define("unpack", 0x70, "13.3", ins="source:i8_tile@13.3", outs="result:unpacked_tile@13.3", traits="Pure",
       fmt=_CAST)
define("cat", 0x0C, "13.1", ins="lhs:tile rhs:tile", outs="result:tile", attrs="dim:i64", traits="Pure",
       fmt="$lhs `,` $rhs `dim` `=` $dim attr-dict `:` custom<CudaTileType>(type($lhs)) `,` "
           "custom<CudaTileType>(type($rhs)) `->` custom<CudaTileType>(type($result))")
define("extract", 0x26, "13.1", ins="source:tile indices*:scalar_i32", outs="result:tile", traits="Pure",
       fmt="$source `[` $indices `]` attr-dict `:` custom<CudaTileType>(type($source)) `->` "
           "custom<CudaTileType>(type($result))")
define("insert", 0x76, "13.4", ins="source:tile@13.4 destination:tile@13.4 indices*:scalar_i32@13.4",
       outs="result:tile@13.4", traits="Pure",
       fmt="$source `,` $destination `[` $indices `]` attr-dict `:` custom<CudaTileType>(type($source)) `,` "
           "custom<CudaTileType>(type($destination))")
define("permute", 0x53, "13.1", ins="source:tile", outs="result:tile", attrs="permutation:i32array", traits="Pure",
       fmt="$source $permutation attr-dict `:` custom<CudaTileType>(type($source)) `->` "
           "custom<CudaTileType>(type($result))")
define("iota", 0x3A, "13.1", outs="result:int_tile", traits="Pure",
       fmt="attr-dict `:` custom<CudaTileType>(type($result))")
define("constant", 0x10, "13.1", outs="result:number_tile", attrs="value:dense", traits="Pure ConstantLike",
       fmt="custom<DenseTypedElementsAttr>($value, type($result)) attr-dict")
define("select", 0x5F, "13.1", ins="cond:i1_tile val_if_true:tile val_if_false:tile", outs="result:tile",
       traits="Pure",
       fmt="$cond `,` $val_if_true `,` $val_if_false attr-dict `:` custom<CudaTileType>(type($cond)) `,` "
           "custom<CudaTileType>(type($result))")
define("offset", 0x51, "13.1", ins="ptr:ptr_tile offset:int_tile", outs="result:ptr_tile", traits="Pure",
       fmt="$ptr `,` $offset attr-dict `:` custom<CudaTileType>(type($ptr)) `,` "
           "custom<CudaTileType>(type($offset)) `->` custom<CudaTileType>(type($result))")
define("get_tile_block_id", 0x30, "13.1", outs="blockId_x:scalar_i32 blockId_y:scalar_i32 blockId_z:scalar_i32",
       traits="Pure", fmt="attr-dict `:` custom<CudaTileType>(type($blockId_x))")
define("get_num_tile_blocks", 0x2E, "13.1",
       outs="gridSize_x:scalar_i32 gridSize_y:scalar_i32 gridSize_z:scalar_i32", traits="Pure",
       fmt="attr-dict `:` custom<CudaTileType>(type($gridSize_x))")

# -- matrix multiply-accumulate ---------------------------------------------
define("mmaf", 0x49, "13.1", ins="lhs:mmaf_operand rhs:mmaf_operand acc:mmaf_acc", outs="result:mmaf_acc", attrs="fast_acc:unit@13.3",
       traits="Pure",
       fmt="$lhs `,` $rhs `,` $acc (`fast_acc` $fast_acc^)? attr-dict `:` custom<CudaTileType>(type($lhs)) `,` "
           "custom<CudaTileType>(type($rhs)) `,` custom<CudaTileType>(type($acc))")
define("mmai", 0x4A, "13.1", ins="lhs:mmai_operand rhs:mmai_operand acc:mmai_acc", outs="result:mmai_result",
       attrs="signedness_lhs:enum.Signedness signedness_rhs:enum.Signedness", traits="Pure",
       fmt="$lhs `,` $rhs `,` $acc custom<Signedness>($signedness_lhs) custom<Signedness>($signedness_rhs) "
           "attr-dict `:` custom<CudaTileType>(type($lhs)) `,` custom<CudaTileType>(type($rhs)) `,` "
           "custom<CudaTileType>(type($acc))")
define("mmaf_scaled", 0x72, "13.3",
       ins="lhs:mmaf_scaled_operand@13.3 rhs:mmaf_scaled_operand@13.3 acc:mmaf_scaled_result@13.3 "
           "lhs_scale:mmaf_scaled_scale@13.3 rhs_scale:mmaf_scaled_scale@13.3",
       outs="result:mmaf_scaled_result@13.3", traits="Pure",
       fmt="$lhs `,` $rhs `,` $acc `,` $lhs_scale `,` $rhs_scale attr-dict `:` custom<CudaTileType>(type($lhs)) "
           "`,` custom<CudaTileType>(type($rhs)) `,` custom<CudaTileType>(type($acc)) `,` "
           "custom<CudaTileType>(type($lhs_scale)) `,` custom<CudaTileType>(type($rhs_scale))")

# -- reductions --------------------------------------------------------------
define("reduce", 0x58, "13.1", ins="operands*:tile", outs="results*:tile", attrs="dim:i32 identities:array",
       regions="body", traits="SingleBlock",
       fmt="$operands attr-dict ` ` `dim` `` `=` `` $dim `identities` `` `=` `` $identities `:` "
           "custom<CudaTileType>(type($operands)) `->` custom<CudaTileType>(type($results)) "
           "custom<ArgumentRegion>($body)")
define("scan", 0x5E, "13.1", ins="operands*:tile", outs="results*:tile",
       attrs="dim:i32 reverse:bool identities:array", regions="body", traits="SingleBlock",
       fmt="$operands attr-dict ` ` `dim` `` `=` `` $dim `reverse` `` `=` `` $reverse `identities` `` `=` `` "
           "$identities `:` custom<CudaTileType>(type($operands)) `->` custom<CudaTileType>(type($results)) "
           "custom<ArgumentRegion>($body)")

# -- control flow -------------------------------------------------------------
define("module", 0x4B, "13.1", attrs="sym_name:str producer?:str@13.3", regions="body",
       traits="IsolatedFromAbove SymbolTable SingleBlock NoTerminator",
       fmt="$sym_name attr-dict-with-keyword $body")
define("entry", 0x16, "13.1",
       attrs="sym_name:str function_type:type arg_attrs?:dictarray res_attrs?:dictarray optimization_hints?:hints",
       regions="body", traits="IsolatedFromAbove SingleBlock Symbol")
define("global", 0x31, "13.1",
       attrs="sym_name:str value:dense alignment:i64=0 constant:unit@13.3 "
             "symbol_visibility:enum.SymbolVisibility=public@13.3",
       traits="Symbol",
       fmt="custom<SymbolVisibility>($symbol_visibility) (`constant` $constant^)? $sym_name "
           "(`alignment` `=` $alignment^)? attr-dict custom<DenseTypedElementsAttrNoResult>($value)")
define("get_global", 0x2C, "13.1", outs="result:scalar_ptr", attrs="name:symref", traits="Pure",
       fmt="$name attr-dict `:` custom<CudaTileType>(type($result))")
define("if", 0x32, "13.1", ins="condition:scalar_i1", outs="results*:any", regions="thenRegion elseRegion",
       fmt="$condition (`->` `(` custom<CudaTileType>(type($results))^ `)`)? custom<IfOpRegion>($thenRegion) "
           "(`else` custom<IfOpRegion>($elseRegion)^)? attr-dict")
define("for", 0x29, "13.1",
       ins="lowerBound:scalar_int upperBound:scalar_int step:scalar_int initValues*:any",
       outs="resultValues*:any", attrs="unsignedCmp:unit@13.2", regions="region", traits="SingleBlock")
define("loop", 0x41, "13.1", ins="initValues*:any", outs="resultValues*:any", regions="region",
       traits="SingleBlock")
define("yield", 0x6D, "13.1", ins="operands*:any", traits="Pure Terminator ReturnLike", fmt=_TERMINATOR)
define("break", 0x0A, "13.1", ins="operands*:any", traits="Terminator ReturnLike", fmt=_TERMINATOR)
define("continue", 0x11, "13.1", ins="operands*:any", traits="Terminator", fmt=_TERMINATOR)
define("return", 0x5C, "13.1", ins="operands*:any", traits="Terminator ReturnLike", fmt=_TERMINATOR)
define("assert", 0x05, "13.1", ins="condition:i1_tile", attrs="message:str",
       fmt="$condition `,` $message attr-dict `:` custom<CudaTileType>(type($condition))")
define("assume", 0x06, "13.1", ins="value:any", outs="result:any", attrs="predicate:predicate",
       fmt="custom<AssumePredicate>($predicate) `,` $value attr-dict `:` custom<CudaTileType>(type($value))")
define("print_tko", 0x55, "13.1", ins="args*:tile token?:token@13.2", outs="result_token:token@13.2",
       attrs="str:str", traits="AttrSizedOperandSegments",
       fmt="$str (`,` $args^)? (`token` `` `=` `` $token^)? attr-dict (`:` custom<CudaTileType>(type($args))^)? "
           "`->` custom<CudaTileType>(type($result_token))")

# -- memory: tokens, pointers, views -----------------------------------------
define("make_token", 0x44, "13.1", outs="result:token", traits="Pure",
       fmt="attr-dict `:` custom<CudaTileType>(type($result))")
define("join_tokens", 0x3C, "13.1", ins="tokens*:token", outs="result:token", traits="Pure",
       fmt="$tokens attr-dict `:` custom<CudaTileType>(type($result))")
define("alloca", 0x71, "13.3", outs="result:scalar_ptr@13.3",
       attrs="num_elem:i64@13.3 alignment:i64@13.3 global:unit@13.3",
       fmt="`num_elem` `=` $num_elem `,` `alignment` `=` $alignment (`global` $global^)? attr-dict `:` "
           "custom<CudaTileType>(type($result))")
define("load_ptr_tko", 0x3D, "13.1", ins="source:ptr_tile mask?:i1_tile paddingValue?:number_tile token?:token",
       outs="result:tile result_token:token",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics memory_scope?:enum.MemoryScope "
             "optimization_hints?:hints",
       traits="AttrSizedOperandSegments",
       fmt="$memory_ordering_semantics ($memory_scope^)? $source (`,` $mask^)? (`,` $paddingValue^)? "
           "(`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? attr-dict `:` "
           "custom<CudaTileType>(type($source)) (`,` custom<CudaTileType>(type($mask))^)? "
           "(`,` custom<CudaTileType>(type($paddingValue))^)? `->` custom<CudaTileType>(type($result)) `,` "
           "custom<CudaTileType>(type($result_token))")
define("store_ptr_tko", 0x65, "13.1", ins="destination:ptr_tile value:tile mask?:i1_tile token?:token",
       outs="result_token:token",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics memory_scope?:enum.MemoryScope "
             "optimization_hints?:hints",
       traits="AttrSizedOperandSegments",
       fmt="$memory_ordering_semantics ($memory_scope^)? $destination `,` $value (`,` $mask^)? "
           "(`token` `` `=` `` $token^)? (`optimization_hints` `=` $optimization_hints^)? attr-dict `:` "
           "custom<CudaTileType>(type($destination)) `,` custom<CudaTileType>(type($value)) "
           "(`,` custom<CudaTileType>(type($mask))^)? `->` custom<CudaTileType>(type($result_token))")
define("atomic_cas_tko", 0x07, "13.1", ins="pointers:ptr_tile cmp:tile val:tile mask?:i1_tile token?:token",
       outs="result:tile result_token:token",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics memory_scope:enum.MemoryScope",
       traits="AttrSizedOperandSegments",
       fmt="$memory_ordering_semantics $memory_scope $pointers `,` $cmp `,` $val (`,` $mask^)? "
           "(`token` `` `=` `` $token^)? attr-dict `:` custom<CudaTileType>(type($pointers)) `,` "
           "custom<CudaTileType>(type($val)) (`,` custom<CudaTileType>(type($mask))^)? `->` "
           "custom<CudaTileType>(type($result)) `,` custom<CudaTileType>(type($result_token))")
define("atomic_rmw_tko", 0x08, "13.1", ins="pointers:ptr_tile arg:tile mask?:i1_tile token?:token",
       outs="result:tile result_token:token",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics memory_scope:enum.MemoryScope "
             "mode:enum.AtomicRMWMode",
       traits="AttrSizedOperandSegments",
       fmt="$memory_ordering_semantics $memory_scope $pointers `,` $mode `,` $arg (`,` $mask^)? "
           "(`token` `` `=` `` $token^)? attr-dict `:` custom<CudaTileType>(type($pointers)) `,` "
           "custom<CudaTileType>(type($arg)) (`,` custom<CudaTileType>(type($mask))^)? `->` "
           "custom<CudaTileType>(type($result)) `,` custom<CudaTileType>(type($result_token))")
define("make_tensor_view", 0x43, "13.1",
       ins="base:scalar_ptr dynamicShape*:scalar_int dynamicStrides*:scalar_int", outs="result:tensor_view",
       traits="AttrSizedOperandSegments Pure")
define("make_partition_view", 0x42, "13.1", ins="tensor_view:tensor_view", outs="result:partition_view",
       traits="Pure")
define("make_strided_view", 0x74, "13.3", ins="tensor_view:tensor_view@13.3", outs="result:strided_view@13.3",
       traits="Pure")
define("make_gather_scatter_view", 0x73, "13.3", ins="tensor_view:tensor_view",
       outs="result:gather_view@13.3", traits="Pure")
define("get_tensor_shape", 0x2F, "13.1", ins="src:tensor_view", outs="result*:scalar_int", traits="Pure")
define("get_index_space_shape", 0x2D, "13.1", ins="src:tile_view", outs="result*:scalar_int", traits="Pure")
define("load_view_tko", 0x3E, "13.1", ins="view:tile_view index*:int_tile token?:token",
       outs="tile:tile result_token:token",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics memory_scope?:enum.MemoryScope "
             "optimization_hints?:hints inbounds:boolarray=empty@13.4",
       traits="AttrSizedOperandSegments")
define("store_view_tko", 0x66, "13.1", ins="tile:tile view:tile_view index*:int_tile token?:token",
       outs="result_token:token",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics memory_scope?:enum.MemoryScope "
             "optimization_hints?:hints inbounds:boolarray=empty@13.4",
       traits="AttrSizedOperandSegments")
define("atomic_red_view_tko", 0x75, "13.3",
       ins="view:tile_view@13.3 index*:int_tile@13.3 value:tile@13.3 token?:token@13.3",
       outs="result_token:token@13.3",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics@13.3 memory_scope:enum.MemoryScope@13.3 "
             "mode:enum.AtomicRMWMode@13.3 inbounds:boolarray=empty@13.5",
       traits="AttrSizedOperandSegments")
define("memory_fence_alias_tko", 0x7A, "13.4", ins="token:token@13.4", outs="result_token:token@13.4",
       fmt="$token attr-dict")
define("gdc_launch_dependents_tko", 0x77, "13.4", ins="token?:token@13.4", outs="result_token:token@13.4",
       fmt="(`token` `=` $token^)? attr-dict `->` custom<CudaTileType>(type($result_token))")
define("gdc_wait_tko", 0x78, "13.4", ins="token?:token@13.4", outs="result_token:token@13.4",
       fmt="(`token` `=` $token^)? attr-dict `->` custom<CudaTileType>(type($result_token))")

# -- 13.5 (dev) multimem views ------------------------------------------------
define("multimem_load_reduce_view_tko", 0x7B, "13.5",
       ins="view:tile_view@13.5 index*:int_tile@13.5 token?:token@13.5",
       outs="reduced_values:tile@13.5 result_token:token@13.5",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics@13.5 memory_scope?:enum.MemoryScope@13.5 "
             "reduction:enum.MultimemReductionKind=add@13.5 inbounds:boolarray=empty@13.5",
       traits="AttrSizedOperandSegments")
define("multimem_reduce_view_tko", 0x7C, "13.5",
       ins="view:tile_view@13.5 tile:tile@13.5 index*:int_tile@13.5 token?:token@13.5",
       outs="result_token:token@13.5",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics@13.5 memory_scope:enum.MemoryScope@13.5 "
             "reduction:enum.MultimemReductionKind=add@13.5 inbounds:boolarray=empty@13.5",
       traits="AttrSizedOperandSegments")
define("multimem_store_view_tko", 0x7D, "13.5",
       ins="view:tile_view@13.5 tile:tile@13.5 index*:int_tile@13.5 token?:token@13.5",
       outs="result_token:token@13.5",
       attrs="memory_ordering_semantics:enum.MemoryOrderingSemantics@13.5 memory_scope?:enum.MemoryScope@13.5 "
             "inbounds:boolarray=empty@13.5",
       traits="AttrSizedOperandSegments")

# Mnemonics the text parser also accepts (older spellings).
ALIASES: dict[str, str] = {"cuda_tile.pow": "cuda_tile.fpowf"}
