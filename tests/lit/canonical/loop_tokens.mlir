// RUN: %tileir opt %s --passes simplify-tokens,dce | %FileCheck %s
// A token a loop carries that gathers its loads' tokens, read after the loop only by an op computing with
// an accumulator the loop carries from its previous value and every load's tile, the loads read by mmas
// alone, orders nothing the data does not: it leaves the loop (a split-K GEMM's atomic add). Where the
// reader does not compute with such a value, the carried value is the last iteration's alone, or a tile
// is added in registers (a thread's sum says nothing of the other threads' loads), it stays.

// CHECK-LABEL: entry @split_k
// CHECK: for {{.*}} iter_values(%{{[^ ]*}} = %{{[^)]*}}) -> (tile<16x16xf32>)
// CHECK-NOT: join_tokens
// CHECK: continue %{{[^,]*}} : tile<16x16xf32>
// CHECK: atomic_rmw_tko {{.*}} token=%0 :
entry @split_k(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<ptr<f32>>, %arg3: tile<f32>, %arg4: tile<ptr<f32>>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %z = constant <f32: 0.0> : tile<16x16xf32>
  %tview = make_tensor_view %arg0, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf16, strides=[16,1]>
  %pview = make_partition_view %tview : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>
  %tf = make_tensor_view %arg4, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf32, strides=[16,1]>
  %pf = make_partition_view %tf : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf32, strides=[16,1]>>
  %for:2 = for %i in (%c0 to %arg1, step %c1) : tile<i32> iter_values(%acc = %z, %tok = %0) -> (tile<16x16xf32>, token) {
    %a, %at = load_view_tko weak %pview[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>, tile<i32> -> tile<16x16xf16>, token
    %b, %bt = load_view_tko weak %pview[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>, tile<i32> -> tile<16x16xf16>, token
    %s = mmaf %a, %b, %acc : tile<16x16xf16>, tile<16x16xf16>, tile<16x16xf32>
    %j = join_tokens %tok, %at, %bt : token
    continue %s, %j : tile<16x16xf32>, token
  }
  %r = reshape %arg2 : tile<ptr<f32>> -> tile<1x1xptr<f32>>
  %p = broadcast %r : tile<1x1xptr<f32>> -> tile<16x16xptr<f32>>
  %t = join_tokens %0, %for#1 : token
  %v, %vt = atomic_rmw_tko acq_rel device %p, addf, %for#0 token=%t : tile<16x16xptr<f32>>, tile<16x16xf32> -> tile<16x16xf32>, token
  return
}
// CHECK-LABEL: entry @reads_no_accumulator
// CHECK: iter_values({{.*}}) -> (tile<16x16xf32>, token)
// CHECK: join_tokens
entry @reads_no_accumulator(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<ptr<f32>>, %arg3: tile<f32>, %arg4: tile<ptr<f32>>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %z = constant <f32: 0.0> : tile<16x16xf32>
  %tview = make_tensor_view %arg0, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf16, strides=[16,1]>
  %pview = make_partition_view %tview : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>
  %tf = make_tensor_view %arg4, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf32, strides=[16,1]>
  %pf = make_partition_view %tf : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf32, strides=[16,1]>>
  %for:2 = for %i in (%c0 to %arg1, step %c1) : tile<i32> iter_values(%acc = %z, %tok = %0) -> (tile<16x16xf32>, token) {
    %a, %at = load_view_tko weak %pview[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>, tile<i32> -> tile<16x16xf16>, token
    %b, %bt = load_view_tko weak %pview[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>, tile<i32> -> tile<16x16xf16>, token
    %s = mmaf %a, %b, %acc : tile<16x16xf16>, tile<16x16xf16>, tile<16x16xf32>
    %j = join_tokens %tok, %at, %bt : token
    continue %s, %j : tile<16x16xf32>, token
  }
  %r = reshape %arg2 : tile<ptr<f32>> -> tile<1x1xptr<f32>>
  %p = broadcast %r : tile<1x1xptr<f32>> -> tile<16x16xptr<f32>>
  %t = store_ptr_tko weak %arg2, %arg3 token=%for#1 : tile<ptr<f32>>, tile<f32> -> token
  return
}
// CHECK-LABEL: entry @last_iteration_only
// CHECK: iter_values({{.*}}) -> (tile<16x16xf32>, token)
// CHECK: join_tokens
entry @last_iteration_only(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<ptr<f32>>, %arg3: tile<f32>, %arg4: tile<ptr<f32>>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %z = constant <f32: 0.0> : tile<16x16xf32>
  %tview = make_tensor_view %arg0, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf16, strides=[16,1]>
  %pview = make_partition_view %tview : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>
  %tf = make_tensor_view %arg4, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf32, strides=[16,1]>
  %pf = make_partition_view %tf : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf32, strides=[16,1]>>
  %for:2 = for %i in (%c0 to %arg1, step %c1) : tile<i32> iter_values(%acc = %z, %tok = %0) -> (tile<16x16xf32>, token) {
    %a, %at = load_view_tko weak %pview[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>, tile<i32> -> tile<16x16xf16>, token
    %b, %bt = load_view_tko weak %pview[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>, tile<i32> -> tile<16x16xf16>, token
    %acc2 = mmaf %a, %b, %z : tile<16x16xf16>, tile<16x16xf16>, tile<16x16xf32>
    %j = join_tokens %tok, %at, %bt : token
    continue %acc2, %j : tile<16x16xf32>, token
  }
  %r = reshape %arg2 : tile<ptr<f32>> -> tile<1x1xptr<f32>>
  %p = broadcast %r : tile<1x1xptr<f32>> -> tile<16x16xptr<f32>>
  %t = join_tokens %0, %for#1 : token
  %v, %vt = atomic_rmw_tko acq_rel device %p, addf, %for#0 token=%t : tile<16x16xptr<f32>>, tile<16x16xf32> -> tile<16x16xf32>, token
  return
}
// CHECK-LABEL: entry @added_in_registers
// CHECK: iter_values({{.*}}) -> (tile<16x16xf32>, token)
// CHECK: join_tokens
entry @added_in_registers(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<ptr<f32>>, %arg3: tile<f32>, %arg4: tile<ptr<f32>>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %z = constant <f32: 0.0> : tile<16x16xf32>
  %tview = make_tensor_view %arg0, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf16, strides=[16,1]>
  %pview = make_partition_view %tview : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf16, strides=[16,1]>>
  %tf = make_tensor_view %arg4, shape = [%arg1, 16], strides = [16, 1] : tile<i32> -> tensor_view<?x16xf32, strides=[16,1]>
  %pf = make_partition_view %tf : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf32, strides=[16,1]>>
  %for:2 = for %i in (%c0 to %arg1, step %c1) : tile<i32> iter_values(%acc = %z, %tok = %0) -> (tile<16x16xf32>, token) {
    %a, %at = load_view_tko weak %pf[%i, %c0] token = %0 : partition_view<tile=(16x16), padding_value = zero, tensor_view<?x16xf32, strides=[16,1]>>, tile<i32> -> tile<16x16xf32>, token
    %ae = negf %a : tile<16x16xf32>
    %s = addf %acc, %ae rounding<nearest_even> : tile<16x16xf32>
    %j = join_tokens %tok, %at : token
    continue %s, %j : tile<16x16xf32>, token
  }
  %r = reshape %arg2 : tile<ptr<f32>> -> tile<1x1xptr<f32>>
  %p = broadcast %r : tile<1x1xptr<f32>> -> tile<16x16xptr<f32>>
  %t = join_tokens %0, %for#1 : token
  %v, %vt = atomic_rmw_tko acq_rel device %p, addf, %for#0 token=%t : tile<16x16xptr<f32>>, tile<16x16xf32> -> tile<16x16xf32>, token
  return
}
