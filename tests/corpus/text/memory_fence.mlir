// description: memory_fence_alias_tko orders a store before a reload of the same array through another view
// min-version: 13.4
// Hand-written in tileirdisasm syntax; text/builders.py builds the same module as bytecode.
entry @memory_fence(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<ptr<f32>>, %arg7: tile<i32>, %arg8: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tview_2 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_3 = make_partition_view %tview_2 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tview_4 = make_tensor_view %arg6, shape = [%arg7], strides = [%arg8] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_5 = make_partition_view %tview_4 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %1 = store_view_tko weak %tile, %pview_1[%blockId_x] token = %result_token : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  %2 = memory_fence_alias_tko %1
  %tile_6, %result_token_7 = load_view_tko weak %pview_3[%blockId_x] token = %2 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %3 = addf %tile_6, %tile_6  : tile<64xf32>
  %4 = store_view_tko weak %3, %pview_5[%blockId_x] token = %result_token_7 : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
