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
