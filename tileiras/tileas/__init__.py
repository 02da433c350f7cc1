"""nv_tileas: the assembler-near level, where every tile value has a distributed layout.

Below `cuda_tile` (and its alias/token analyses in `tileiras.transforms`), a kernel is rewritten
into this level before code emission:

* `materialize.py` (pass `materialize-layouts`): each tile value carries the layout that
  `tileas.assign_layouts` chose for it in its type (`TileType.encoding`, read as `Value.layout`), and every place where an op reads an
  operand in another layout becomes an explicit `nv_tileas.convert_layout` op;
* `fuse_conversions.py` (pass `fuse-conversions`): conversions of one value to one layout in one
  block become one;
* `plan.py` (passes `plan-pipelines`, `plan-warp-roles`): the kernel's schedule decided before
  any LLVM: the loops pipelined with their loads and modulo schedules (`uncopied_loads.py`: a load
  no copy engine can stage is left to the loop's body), the warp-specialized loop and its roles
  (`KernelPlan`, kept with the kernel's layouts);
* `buffers.py` (pass `shared-buffer-lifetimes`): shared buffers as sized, aligned, swizzled values
  with lifetimes, and their verifier;
* `verify.py`: the level's invariants (every tile value has a layout, every op reads its
  operands in the layout it was assigned to read them in, conversions change something);
* `ops.py`: the ops this level adds to `cuda_tile`.

The LLVM lowering (`tileiras.lowering`) reads layouts off the values and lowers each
`convert_layout` like any other op: it never converts on its own.
"""
