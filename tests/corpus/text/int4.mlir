// description: the i4 element type: i8 -> i4 by trunci, back to i8 by exti signed and unsigned
// min-version: 13.3
// Hand-written in tileirdisasm syntax; text/builders.py builds the same module as bytecode.
entry @int4_roundtrip(%arg0: tile<ptr<i8>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<i8>>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<ptr<i8>>, %arg7: tile<i32>, %arg8: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xi8, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xi8, strides=[?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xi8, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(64), tensor_view<?xi8, strides=[?]>>
  %tview_2 = make_tensor_view %arg6, shape = [%arg7], strides = [%arg8] : tile<i32> -> tensor_view<?xi8, strides=[?]>
  %pview_3 = make_partition_view %tview_2 : partition_view<tile=(64), tensor_view<?xi8, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xi8, strides=[?]>>, tile<i32> -> tile<64xi8>, token
  %1 = trunci %tile : tile<64xi8> -> tile<64xi4>
  %2 = exti %1 signed : tile<64xi4> -> tile<64xi8>
  %3 = exti %1 unsigned : tile<64xi4> -> tile<64xi8>
  %4 = store_view_tko weak %2, %pview_1[%blockId_x] token = %result_token : tile<64xi8>, partition_view<tile=(64), tensor_view<?xi8, strides=[?]>>, tile<i32> -> token
  %5 = store_view_tko weak %3, %pview_3[%blockId_x] token = %result_token : tile<64xi8>, partition_view<tile=(64), tensor_view<?xi8, strides=[?]>>, tile<i32> -> token
  return
}
