// RUN: %tileir opt %s --passes simplify-tokens,dce | %FileCheck %s
// Joins flatten, lose repeats and fresh tokens; a join of one token is that token; unused tokens,
// views and constants go.

// CHECK-LABEL: entry @k
// CHECK: %[[T1:.*]] = store_ptr_tko
// CHECK-NOT: join_tokens
// CHECK: store_ptr_tko weak %arg0, %arg1 token=%[[T1]]
// CHECK-NOT: make_partition_view
// CHECK-NOT: constant
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<f32>, %arg2: tile<i32>) {
  %0 = make_token : token
  %extra = make_token : token
  %c9 = constant <i32: 9> : tile<i32>
  %tview = make_tensor_view %arg0, shape = [%arg2], strides = [%c9] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pv = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %t1 = store_ptr_tko weak %arg0, %arg1 token=%0 : tile<ptr<f32>>, tile<f32> -> token
  %j1 = join_tokens %t1, %extra : token
  %j2 = join_tokens %j1, %t1, %0 : token
  %t2 = store_ptr_tko weak %arg0, %arg1 token=%j2 : tile<ptr<f32>>, tile<f32> -> token
  return
}
