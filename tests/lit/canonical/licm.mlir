// RUN: %tileir opt %s --passes licm | %FileCheck %s
// Views, scalar arithmetic on invariants and splat constants leave the loop (13.1's form of a matmul
// becomes 13.4's); a tile of many elements and anything the induction variable reaches stay.

// CHECK-LABEL: entry @k
// CHECK: %[[PV:.*]] = make_partition_view %tview
// CHECK-NEXT: addi %arg1, %arg1
// CHECK-NEXT: constant <f32: 1.000000e+00> : tile<64xf32>
// CHECK-NEXT: for %loopIdx
// CHECK-NEXT: iota : tile<64xi32>
// CHECK-NEXT: addi %loopIdx, %arg1
// CHECK-NEXT: load_view_tko weak %[[PV]]
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%c1] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %for = for %loopIdx in (%c0 to %arg1, step %c1) : tile<i32> iter_values(%acc = %c0) -> (tile<i32>) {
    %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
    %i = iota : tile<64xi32>
    %n = addi %arg1, %arg1 : tile<i32>
    %j = addi %loopIdx, %arg1 : tile<i32>
    %one = constant <f32: 1.0> : tile<64xf32>
    %tile, %tok = load_view_tko weak %pview[%j] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
    %s = addf %tile, %one : tile<64xf32>
    %t = store_view_tko weak %s, %pview[%loopIdx] token = %tok : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
    %r = addi %acc, %n : tile<i32>
    continue %r : tile<i32>
  }
  return
}
