// description: ptr_to_ptr, ptr_to_int, int_to_ptr and get_tensor_shape: read f32 bits through an i32 pointer
// min-version: 13.1
// Hand-written in tileirdisasm syntax; text/builders.py builds the same module as bytecode.
entry @ptr_casts(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<i32>>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<ptr<i32>>, %arg7: tile<i32>, %arg8: tile<i32>) {
  %0 = make_token : token
  %1 = ptr_to_ptr %arg0 : tile<ptr<f32>> -> tile<ptr<i32>>
  %2 = ptr_to_int %1 : tile<ptr<i32>> -> tile<i64>
  %cst_0_i64 = constant <i64: 0> : tile<i64>
  %3 = addi %2, %cst_0_i64 : tile<i64>
  %4 = int_to_ptr %3 : tile<i64> -> tile<ptr<i32>>
  %tview = make_tensor_view %4, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(32), tensor_view<?xi32, strides=[?]>>
  %5 = get_tensor_shape %tview : tensor_view<?xi32, strides=[?]> -> tile<i32>
  %tview_0 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(32), tensor_view<?xi32, strides=[?]>>
  %tview_2 = make_tensor_view %arg6, shape = [%arg7], strides = [%arg8] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pview_3 = make_partition_view %tview_2 : partition_view<tile=(1), tensor_view<?xi32, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(32), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<32xi32>, token
  %6 = store_view_tko weak %tile, %pview_1[%blockId_x] token = %result_token : tile<32xi32>, partition_view<tile=(32), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  %reshape = reshape %5 : tile<i32> -> tile<1xi32>
  %7 = store_view_tko weak %reshape, %pview_3[%blockId_x] token = %0 : tile<1xi32>, partition_view<tile=(1), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  return
}
