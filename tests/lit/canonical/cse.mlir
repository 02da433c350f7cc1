// RUN: %tileir opt %s --passes cse,dce | %FileCheck %s
// Equal effect-free ops merge when one dominates the other (views, assumes, constants, index
// arithmetic); not across sibling branches, and loads never merge.

// CHECK-LABEL: entry @k
// CHECK: assume div_by<16>, %arg0
// CHECK-NOT: = assume
// CHECK: make_partition_view
// CHECK-NOT: make_partition_view
// CHECK: load_view_tko
// CHECK: load_view_tko
// CHECK: if
// CHECK: constant <i32: 7>
// CHECK: else
// CHECK: constant <i32: 7>
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i1>) {
  %0 = make_token : token
  %c1 = constant <i32: 1> : tile<i32>
  %c1b = constant <i32: 1> : tile<i32>
  %a = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %b = assume div_by<16>, %arg0 : tile<ptr<f32>>
  %tview = make_tensor_view %a, shape = [%arg1], strides = [%c1] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %tview2 = make_tensor_view %b, shape = [%arg1], strides = [%c1b] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %p1 = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %p2 = make_partition_view %tview2 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %x, %t1 = load_view_tko weak %p1[%arg1] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %y, %t2 = load_view_tko weak %p2[%arg1] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %s = addf %x, %y : tile<64xf32>
  %r = if %arg2 -> (tile<i32>) {
    %c7 = constant <i32: 7> : tile<i32>
    yield %c7 : tile<i32>
  } else {
    %c7b = constant <i32: 7> : tile<i32>
    yield %c7b : tile<i32>
  }
  %t3 = store_view_tko weak %s, %p2[%r] token = %t2 : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
