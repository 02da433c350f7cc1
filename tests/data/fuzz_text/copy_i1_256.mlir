// Issue 37: a copy of tile<256xi1> through views (NVIDIA's tileiras compiles it): its padded load
// merged an i8 with `false` (invalid LLVM IR) on every target.
entry @k(%arg0: tile<ptr<i1>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<i1>>, %arg4: tile<i32>, %arg5: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xi1, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(256), tensor_view<?xi1, strides=[?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xi1, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(256), tensor_view<?xi1, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(256), tensor_view<?xi1, strides=[?]>>, tile<i32> -> tile<256xi1>, token
  %6 = store_view_tko weak %tile, %pview_1[%blockId_x] token = %result_token : tile<256xi1>, partition_view<tile=(256), tensor_view<?xi1, strides=[?]>>, tile<i32> -> token
  return
}
