// RUN: %tileir opt %s --passes unroll-windows | %FileCheck %s
// A loop of two iterations storing the column halves of a tile made before it (a sub-tiled epilogue) is
// unrolled: each half's extract gets a constant index, the token carried from one store to the next. A
// loop whose extracts take a window of a tile it makes itself, or of 9 iterations, is kept.

// CHECK-LABEL: entry @k
// CHECK: %[[ACC:.*]] = constant <f32: 1.000000e+00> : tile<64x128xf32>
// CHECK: %[[PV:.*]] = make_partition_view
// CHECK-NEXT: %[[C0:.*]] = constant <i32: 0> : tile<i32>
// CHECK-NEXT: %[[E0:.*]] = extract %[[ACC]][%{{.*}}, %[[C0]]] : tile<64x128xf32> -> tile<64x64xf32>
// CHECK-NEXT: %[[T0:.*]] = store_view_tko weak %[[E0]], %[[PV]][%{{.*}}, %[[C0]]] token = %0
// CHECK-NEXT: %[[C1:.*]] = constant <i32: 1> : tile<i32>
// CHECK-NEXT: %[[E1:.*]] = extract %[[ACC]][%{{.*}}, %[[C1]]]
// CHECK-NEXT: %[[T1:.*]] = store_view_tko weak %[[E1]], %[[PV]][%{{.*}}, %[[C1]]] token = %[[T0]]
// CHECK-NEXT: for %loopIdx in ({{.*}} to %cst_9_i32, step {{.*}}) : tile<i32> iter_values(%iterArg0 = %[[T1]])
// CHECK: for %loopIdx in ({{.*}} to %cst_2_i32, step
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c2 = constant <i32: 2> : tile<i32>
  %c9 = constant <i32: 9> : tile<i32>
  %acc = constant <f32: 1.0> : tile<64x128xf32>
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg1, %c1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %pview = make_partition_view %tview : partition_view<tile=(64x64), tensor_view<?x?xf32, strides=[?,?]>>
  %for = for %loopIdx in (%c0 to %c2, step %c1) : tile<i32> iter_values(%tok = %0) -> (token) {
    %half = extract %acc[%c0, %loopIdx] : tile<64x128xf32> -> tile<64x64xf32>
    %t = store_view_tko weak %half, %pview[%c0, %loopIdx] token = %tok : tile<64x64xf32>, partition_view<tile=(64x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
    continue %t : token
  }
  %long = for %loopIdx in (%c0 to %c9, step %c1) : tile<i32> iter_values(%tok = %for) -> (token) {
    %half = extract %acc[%c0, %c0] : tile<64x128xf32> -> tile<64x64xf32>
    %i = extract %acc[%c0, %loopIdx] : tile<64x128xf32> -> tile<64x64xf32>
    %t = store_view_tko weak %i, %pview[%c0, %loopIdx] token = %tok : tile<64x64xf32>, partition_view<tile=(64x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
    continue %t : token
  }
  %own = for %loopIdx in (%c0 to %c2, step %c1) : tile<i32> iter_values(%tok = %long) -> (token) {
    %made = constant <f32: 2.0> : tile<64x128xf32>
    %half = extract %made[%c0, %loopIdx] : tile<64x128xf32> -> tile<64x64xf32>
    %t = store_view_tko weak %half, %pview[%c0, %loopIdx] token = %tok : tile<64x64xf32>, partition_view<tile=(64x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
    continue %t : token
  }
  return
}
