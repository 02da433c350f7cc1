// description: per-block scratch memory from alloca, written and read back through offset pointers
// min-version: 13.3
// Hand-written in tileirdisasm syntax; text/builders.py builds the same module as bytecode.
entry @alloca_scratch(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>, %arg5: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg4], strides = [%arg5] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x] token = %0 : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> tile<64xf32>, token
  %1 = alloca num_elem = 64, alignment = 16 : tile<ptr<f32>>
  %2 = iota : tile<64xi32>
  %reshape = reshape %1 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %bcast = broadcast %reshape : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %3 = offset %bcast, %2 : tile<64xptr<f32>>, tile<64xi32> -> tile<64xptr<f32>>
  %4 = store_ptr_tko weak %3, %tile token=%result_token : tile<64xptr<f32>>, tile<64xf32> -> token
  %result, %result_token_2 = load_ptr_tko weak %3 token=%4 : tile<64xptr<f32>> -> tile<64xf32>, token
  %cst_1_f32 = constant <f32: 1.000000e+00> : tile<64xf32>
  %5 = addf %result, %cst_1_f32  : tile<64xf32>
  %6 = store_view_tko weak %5, %pview_1[%blockId_x] token = %result_token_2 : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
