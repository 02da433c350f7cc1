// description: mulhii (unsigned high half of the product) and divi rounding toward zero, signed and unsigned
// min-version: 13.1
// Hand-written in tileirdisasm syntax; text/builders.py builds the same module as bytecode.
entry @mulhi_divi(%arg0: tile<ptr<i32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<i32>>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<ptr<i32>>, %arg7: tile<i32>, %arg8: tile<i32>, %arg9: tile<ptr<i32>>, %arg10: tile<i32>, %arg11: tile<i32>, %arg12: tile<ptr<i32>>, %arg13: tile<i32>, %arg14: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %tview_2 = make_tensor_view %arg6, shape = [%arg7], strides = [%arg8] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview_3 = make_partition_view %tview_2 : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %tview_4 = make_tensor_view %arg9, shape = [%arg10], strides = [%arg11] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview_5 = make_partition_view %tview_4 : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %tview_6 = make_tensor_view %arg12, shape = [%arg13], strides = [%arg14] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview_7 = make_partition_view %tview_6 : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<64xi32>, token
  %tile_8, %result_token_9 = load_view_tko weak %pview_1[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<64xi32>, token
  %1 = mulhii %tile, %tile_8 : tile<64xi32>
  %2 = divi %tile, %tile_8 signed : tile<64xi32>
  %3 = divi %tile, %tile_8 unsigned : tile<64xi32>
  %4 = store_view_tko weak %1, %pview_3[%blockId_x] token = %result_token : tile<64xi32>, partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  %5 = store_view_tko weak %2, %pview_5[%blockId_x] token = %result_token_9 : tile<64xi32>, partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  %6 = store_view_tko weak %3, %pview_7[%blockId_x] token = %result_token_9 : tile<64xi32>, partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  return
}
