// RUN: %tileir opt %s --passes canonicalize-nv_tileaa | %FileCheck %s
// nv_tileaa folds: a true mask unmasks a load, a false mask erases a store (its token users get the
// token it was given), reshape chains collapse and a reshape to its own type is its source.

// CHECK-LABEL: entry @k
// CHECK: %[[P:.*]] = broadcast
// CHECK: load_ptr_tko weak %[[P]] token=%0 : tile<64xptr<f32>> -> tile<64xf32>, token
// CHECK-NOT: store_ptr_tko weak %[[P]]
// CHECK: %[[R:.*]] = reshape %arg1 : tile<f32> -> tile<1x1xf32>
// CHECK-NOT: = reshape
// CHECK: store_ptr_tko weak %{{.*}}, %[[R]] token=%0
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<f32>) {
  %0 = make_token : token
  %true = constant <i1: true> : tile<64xi1>
  %false = constant <i1: false> : tile<64xi1>
  %pad = constant <f32: 0.0> : tile<64xf32>
  %p1 = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %p = broadcast %p1 : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %q = reshape %arg0 : tile<ptr<f32>> -> tile<1x1xptr<f32>>
  %x, %t = load_ptr_tko weak %p, %true, %pad token=%0 : tile<64xptr<f32>>, tile<64xi1>, tile<64xf32> -> tile<64xf32>, token
  %t1 = store_ptr_tko weak %p, %x, %false token=%0 : tile<64xptr<f32>>, tile<64xf32>, tile<64xi1> -> token
  %r1 = reshape %arg1 : tile<f32> -> tile<1xf32>
  %r2 = reshape %r1 : tile<1xf32> -> tile<1x1xf32>
  %r3 = reshape %r2 : tile<1x1xf32> -> tile<1x1xf32>
  %t2 = store_ptr_tko weak %q, %r3 token=%t1 : tile<1x1xptr<f32>>, tile<1x1xf32> -> token
  return
}

// Atomic identities: an integer atomic whose argument changes nothing, relaxed or acquire, is an atomic
// load of that ordering and scope (a masked one pads with the argument); acq_rel, a non-identity argument
// and a float add stay atomics.
// CHECK-LABEL: entry @atomics
// CHECK: load_ptr_tko relaxed device %[[P:[a-z_0-9]+]] token=
// CHECK: load_ptr_tko acquire device %[[P]] token=
// CHECK: load_ptr_tko relaxed device %[[P]], %{{.*}}, %{{.*}} token=
// CHECK: atomic_rmw_tko acq_rel device %[[P]], or
// CHECK: atomic_rmw_tko relaxed device %[[P]], add, %{{.*}} token=
// CHECK: atomic_rmw_tko relaxed device %{{.*}}, addf
entry @atomics(%arg0: tile<ptr<i32>>, %arg1: tile<ptr<f32>>, %c: tile<i1>) {
  %0 = make_token : token
  %mask = reshape %c : tile<i1> -> tile<1xi1>
  %p = reshape %arg0 : tile<ptr<i32>> -> tile<1xptr<i32>>
  %f = reshape %arg1 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %z = constant <i32: 0> : tile<1xi32>
  %one = constant <i32: 1> : tile<1xi32>
  %least = constant <i32: -2147483648> : tile<1xi32>
  %ones = constant <i32: -1> : tile<1xi32>
  %fz = constant <f32: -0.0> : tile<1xf32>
  %r1, %t1 = atomic_rmw_tko relaxed device %p, add, %z token=%0 : tile<1xptr<i32>>, tile<1xi32> -> tile<1xi32>, token
  %r2, %t2 = atomic_rmw_tko acquire device %p, max, %least token=%t1 : tile<1xptr<i32>>, tile<1xi32> -> tile<1xi32>, token
  %r3, %t3 = atomic_rmw_tko relaxed device %p, and, %ones, %mask token=%t2 : tile<1xptr<i32>>, tile<1xi32>, tile<1xi1> -> tile<1xi32>, token
  %r4, %t4 = atomic_rmw_tko acq_rel device %p, or, %z token=%t3 : tile<1xptr<i32>>, tile<1xi32> -> tile<1xi32>, token
  %r5, %t5 = atomic_rmw_tko relaxed device %p, add, %one token=%t4 : tile<1xptr<i32>>, tile<1xi32> -> tile<1xi32>, token
  %r6, %t6 = atomic_rmw_tko relaxed device %f, addf, %fz token=%t5 : tile<1xptr<f32>>, tile<1xf32> -> tile<1xf32>, token
  %s1 = addi %r1, %r2 : tile<1xi32>
  %s2 = addi %s1, %r3 : tile<1xi32>
  %s3 = addi %s2, %r4 : tile<1xi32>
  %s4 = addi %s3, %r5 : tile<1xi32>
  %t7 = store_ptr_tko weak %p, %s4 token=%t6 : tile<1xptr<i32>>, tile<1xi32> -> token
  %t8 = store_ptr_tko weak %f, %r6 token=%t7 : tile<1xptr<f32>>, tile<1xf32> -> token
  return
}

// An elementwise assume of a broadcast scalar is the broadcast of the assumed scalar; one with a
// per-group divisibility (`every`) stays on the tile.
// CHECK-LABEL: entry @assumes
// CHECK: %[[A:.*]] = assume div_by<16>, %arg1 : tile<i32>
// CHECK: %[[R:.*]] = reshape %[[A]] : tile<i32> -> tile<1xi32>
// CHECK: broadcast %[[R]] : tile<1xi32> -> tile<64xi32>
// CHECK: assume div_by<4, every 2 along 0>, %{{.*}} : tile<64xi32>
entry @assumes(%arg0: tile<ptr<i32>>, %n: tile<i32>) {
  %0 = make_token : token
  %r = reshape %n : tile<i32> -> tile<1xi32>
  %b = broadcast %r : tile<1xi32> -> tile<64xi32>
  %a = assume div_by<16>, %b : tile<64xi32>
  %i = iota : tile<64xi32>
  %s = addi %a, %i : tile<64xi32>
  %e = assume div_by<4, every 2 along 0>, %s : tile<64xi32>
  %pr = reshape %arg0 : tile<ptr<i32>> -> tile<1xptr<i32>>
  %pb = broadcast %pr : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %p = offset %pb, %e : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %t = store_ptr_tko weak %p, %e token=%0 : tile<64xptr<i32>>, tile<64xi32> -> token
  return
}
