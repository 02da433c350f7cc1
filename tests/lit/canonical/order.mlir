// RUN: %tileir opt %s --passes canonical-order | %FileCheck %s
// Loads, stores, loops and terminators keep their order; an effect-free op reading one of them (or
// what one of them gave) sits as early as it can, the others just before their first user. Both kernels below are one kernel written in two orders
// of their independent ops, and print in one order.

// CHECK-LABEL: entry @written_first
// CHECK: %[[C1:.*]] = constant <i32: 1>
// CHECK-NEXT: make_tensor_view %arg0, shape = [%arg1], strides = [%[[C1]]]
// CHECK-NEXT: make_partition_view
// CHECK-NEXT: %[[T:.*]] = make_token
// CHECK-NEXT: load_view_tko weak {{.*}}[%arg1] token = %[[T]]
// CHECK-NEXT: constant <f32: 2.000000e+00>
// CHECK-NEXT: mulf
// CHECK-NEXT: constant <f32: 1.000000e+00>
// CHECK-NEXT: addf
// CHECK-NEXT: store_view_tko
// CHECK-NEXT: addi %arg1, %arg1
// CHECK-NEXT: for
// CHECK: return
entry @written_first(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) {
  %0 = make_token : token
  %one = constant <f32: 1.0> : tile<64xf32>
  %two = constant <f32: 2.0> : tile<64xf32>
  %n = addi %arg1, %arg1 : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%c1] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tile, %tok = load_view_tko weak %pview[%arg1] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %m = mulf %tile, %two : tile<64xf32>
  %s = addf %m, %one : tile<64xf32>
  %t = store_view_tko weak %s, %pview[%arg1] token = %tok : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  for %i in (%arg1 to %n, step %c1) : tile<i32> {
    %u = store_view_tko weak %s, %pview[%i] token = %t : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
    continue
  }
  return
}

// CHECK-LABEL: entry @written_late
// CHECK: %[[C1:.*]] = constant <i32: 1>
// CHECK-NEXT: make_tensor_view %arg0, shape = [%arg1], strides = [%[[C1]]]
// CHECK-NEXT: make_partition_view
// CHECK-NEXT: %[[T:.*]] = make_token
// CHECK-NEXT: load_view_tko weak {{.*}}[%arg1] token = %[[T]]
// CHECK-NEXT: constant <f32: 2.000000e+00>
// CHECK-NEXT: mulf
// CHECK-NEXT: constant <f32: 1.000000e+00>
// CHECK-NEXT: addf
// CHECK-NEXT: store_view_tko
// CHECK-NEXT: addi %arg1, %arg1
// CHECK-NEXT: for
// CHECK: return
entry @written_late(%arg0: tile<ptr<f32>>, %arg1: tile<i32>) {
  %c1 = constant <i32: 1> : tile<i32>
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%c1] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %0 = make_token : token
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tile, %tok = load_view_tko weak %pview[%arg1] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %two = constant <f32: 2.0> : tile<64xf32>
  %n = addi %arg1, %arg1 : tile<i32>
  %m = mulf %tile, %two : tile<64xf32>
  %one = constant <f32: 1.0> : tile<64xf32>
  %s = addf %m, %one : tile<64xf32>
  %t = store_view_tko weak %s, %pview[%arg1] token = %tok : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  for %i in (%arg1 to %n, step %c1) : tile<i32> {
    %u = store_view_tko weak %s, %pview[%i] token = %t : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
    continue
  }
  return
}
