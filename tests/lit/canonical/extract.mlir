// RUN: %tileir opt %s --passes canonicalize,dce | %FileCheck %s
// Extract motion: an extract of an elementwise op only it reads is the op of its operands' extracts, down
// to the leaves; an extract of a splat (constant, or broadcast of a scalar) is the smaller splat. An
// elementwise op read elsewhere too is kept whole.

// CHECK-LABEL: entry @k
// CHECK: %[[B:.*]] = broadcast %{{.*}} : tile<1xf32> -> tile<16xf32>
// CHECK: %[[I:.*]] = extract %{{.*}} : tile<64xi32> -> tile<16xi32>
// CHECK: %[[F:.*]] = itof %[[I]] signed : tile<16xi32> -> tile<16xf32>
// CHECK: %[[S:.*]] = addf %[[B]], %[[F]] : tile<16xf32>
// CHECK: %[[E:.*]] = exp %[[S]] : tile<16xf32>
// CHECK: %[[C:.*]] = constant <f32: 2.000000e+00> : tile<16xf32>
// CHECK: mulf %[[E]], %[[C]]
// CHECK-NOT: tile<64xf32>
entry @k(%arg0: tile<ptr<f32>>, %x: tile<f32>) {
  %0 = make_token : token
  %r = reshape %x : tile<f32> -> tile<1xf32>
  %a = broadcast %r : tile<1xf32> -> tile<64xf32>
  %i = iota : tile<64xi32>
  %f = itof %i signed : tile<64xi32> -> tile<64xf32>
  %s = addf %a, %f : tile<64xf32>
  %e = exp %s : tile<64xf32>
  %one = constant <i32: 1> : tile<i32>
  %c = constant <f32: 2.0> : tile<64xf32>
  %p = extract %e[%one] : tile<64xf32> -> tile<16xf32>
  %q = extract %c[%one] : tile<64xf32> -> tile<16xf32>
  %m = mulf %p, %q : tile<16xf32>
  %pr = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %pb = broadcast %pr : tile<1xptr<f32>> -> tile<16xptr<f32>>
  %t = store_ptr_tko weak %pb, %m token=%0 : tile<16xptr<f32>>, tile<16xf32> -> token
  return
}

// CHECK-LABEL: entry @shared
// CHECK: %[[E:.*]] = exp %{{.*}} : tile<64xf32>
// CHECK: extract %[[E]]
entry @shared(%arg0: tile<ptr<f32>>, %x: tile<f32>) {
  %0 = make_token : token
  %i = iota : tile<64xi32>
  %f = itof %i signed : tile<64xi32> -> tile<64xf32>
  %e = exp %f : tile<64xf32>
  %one = constant <i32: 1> : tile<i32>
  %p = extract %e[%one] : tile<64xf32> -> tile<16xf32>
  %pr = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %pb = broadcast %pr : tile<1xptr<f32>> -> tile<16xptr<f32>>
  %t = store_ptr_tko weak %pb, %p token=%0 : tile<16xptr<f32>>, tile<16xf32> -> token
  %qb = broadcast %pr : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %t2 = store_ptr_tko weak %qb, %e token=%t : tile<64xptr<f32>>, tile<64xf32> -> token
  return
}

// An integer mma with a zero multiplicand is its accumulator.
// CHECK-LABEL: entry @dot
// CHECK-NOT: mmai
// CHECK: store_ptr_tko weak %{{.*}}, %[[ACC:.*]] token
entry @dot(%arg0: tile<ptr<i32>>, %x: tile<i8>) {
  %0 = make_token : token
  %xr = reshape %x : tile<i8> -> tile<1x1xi8>
  %a = broadcast %xr : tile<1x1xi8> -> tile<16x32xi8>
  %z = constant <i8: 0> : tile<32x16xi8>
  %i = iota : tile<16xi32>
  %ir = reshape %i : tile<16xi32> -> tile<16x1xi32>
  %acc = broadcast %ir : tile<16x1xi32> -> tile<16x16xi32>
  %d = mmai %a, %z, %acc signed signed : tile<16x32xi8>, tile<32x16xi8>, tile<16x16xi32>
  %pr = reshape %arg0 : tile<ptr<i32>> -> tile<1x1xptr<i32>>
  %pb = broadcast %pr : tile<1x1xptr<i32>> -> tile<16x16xptr<i32>>
  %t = store_ptr_tko weak %pb, %d token=%0 : tile<16x16xptr<i32>>, tile<16x16xi32> -> token
  return
}
