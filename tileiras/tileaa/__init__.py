"""nv_tileaa: the alias-aware level, where integers, pointers and views carry what is known of them.

Between the cuda_tile module as read and the nv_tileas level (`tileiras.tileas`):

* `view_order.py` (pass `order-views`, first): a tensor-core operand loaded through a
  transposing view (`ct.load(order=...)`) is loaded in tensor order and transposed by a
  `permute` that shared-memory operands pass through (vector copies instead of one element a load);
* `facts.py` (pass `infer-facts`): every integer and pointer value gets `Value.facts`, a
  divisor (for a pointer, an alignment in bytes) proved from constants, `assume` predicates and
  arithmetic; every tensor view gets its base alignment and the divisors of its extents and
  strides. Vector widths, asynchronous copies and tensor-core staging read these facts;
* `tile_loops.py` (pass `loop-tiles`, once the warps are chosen): a tile too big for the CTA's
  registers is computed in a `for` over register-sized chunks (one loop per phase of its
  reductions: `tile_phases.py`; which reductions the loops carry: `carried.py`), so code does not
  grow with tiles; `row_chunks.py` (pass `chunk-rows`) then unrolls long element-wise rows into a
  few chunks;
* `verify.py`: the level's invariants (every such value has facts, and they agree with the
  constants and assumptions they were proved from);
* pointer roots and memory-token ordering: `tileiras.transforms.alias` and `token_order`.
"""
