// Found by tests/fuzz_text.py (issue 37): corpus attention_f16 with its tiles made 64 rows; on
// sm_100 the plan warp-specializes the K loop, whose 4 trips then run unpipelined: KeyError in
// warp_specialize_tcgen05.consume_attention_mma.
entry @attention_f16(%arg0: tile<ptr<f16>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<i32>, %arg4: tile<i32>, %arg5: tile<i32>, %arg6: tile<i32>, %arg7: tile<ptr<f16>>, %arg8: tile<i32>, %arg9: tile<i32>, %arg10: tile<i32>, %arg11: tile<i32>, %arg12: tile<i32>, %arg13: tile<i32>, %arg14: tile<ptr<f16>>, %arg15: tile<i32>, %arg16: tile<i32>, %arg17: tile<i32>, %arg18: tile<i32>, %arg19: tile<i32>, %arg20: tile<i32>, %arg21: tile<ptr<f16>>, %arg22: tile<i32>, %arg23: tile<i32>, %arg24: tile<i32>, %arg25: tile<i32>, %arg26: tile<i32>, %arg27: tile<i32>, %arg28: tile<f32>) optimization_hints=<sm_120 = {num_cta_in_cga = 0, num_worker_warps_per_cta = 1, occupancy = 4}> {
  %0 = make_token : token
  %assume = assume bounded<0, ?>, %arg1 : tile<i32>
  %assume_0 = assume bounded<0, ?>, %arg2 : tile<i32>
  %assume_1 = assume bounded<0, ?>, %arg3 : tile<i32>
  %assume_2 = assume bounded<0, ?>, %arg4 : tile<i32>
  %assume_3 = assume bounded<0, ?>, %arg5 : tile<i32>
  %assume_4 = assume bounded<0, ?>, %arg6 : tile<i32>
  %tview = make_tensor_view %arg0, shape = [%assume, %assume_0, %assume_1], strides = [%assume_2, %assume_3, %assume_4] : tile<i32> -> tensor_view<?x?x?xf16, strides=[?,?,?]>
  %assume_5 = assume bounded<0, ?>, %arg8 : tile<i32>
  %assume_6 = assume bounded<0, ?>, %arg9 : tile<i32>
  %assume_7 = assume bounded<0, ?>, %arg10 : tile<i32>
  %assume_8 = assume bounded<0, ?>, %arg11 : tile<i32>
  %assume_9 = assume bounded<0, ?>, %arg12 : tile<i32>
  %assume_10 = assume bounded<0, ?>, %arg13 : tile<i32>
  %tview_11 = make_tensor_view %arg7, shape = [%assume_5, %assume_6, %assume_7], strides = [%assume_8, %assume_9, %assume_10] : tile<i32> -> tensor_view<?x?x?xf16, strides=[?,?,?]>
  %assume_12 = assume bounded<0, ?>, %arg15 : tile<i32>
  %assume_13 = assume bounded<0, ?>, %arg16 : tile<i32>
  %assume_14 = assume bounded<0, ?>, %arg17 : tile<i32>
  %assume_15 = assume bounded<0, ?>, %arg18 : tile<i32>
  %assume_16 = assume bounded<0, ?>, %arg19 : tile<i32>
  %assume_17 = assume bounded<0, ?>, %arg20 : tile<i32>
  %tview_18 = make_tensor_view %arg14, shape = [%assume_12, %assume_13, %assume_14], strides = [%assume_15, %assume_16, %assume_17] : tile<i32> -> tensor_view<?x?x?xf16, strides=[?,?,?]>
  %assume_19 = assume bounded<0, ?>, %arg22 : tile<i32>
  %assume_20 = assume bounded<0, ?>, %arg23 : tile<i32>
  %assume_21 = assume bounded<0, ?>, %arg24 : tile<i32>
  %assume_22 = assume bounded<0, ?>, %arg25 : tile<i32>
  %assume_23 = assume bounded<0, ?>, %arg26 : tile<i32>
  %assume_24 = assume bounded<0, ?>, %arg27 : tile<i32>
  %tview_25 = make_tensor_view %arg21, shape = [%assume_19, %assume_20, %assume_21], strides = [%assume_22, %assume_23, %assume_24] : tile<i32> -> tensor_view<?x?x?xf16, strides=[?,?,?]>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %blockId_x_26, %blockId_y_27, %blockId_z_28 = get_tile_block_id : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %pview = make_partition_view %tview : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>
  %tile, %result_token = load_view_tko weak %pview[%blockId_y_27, %blockId_x, %cst_0_i32] token = %0 : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>, tile<i32> -> tile<1x64x32xf16>, token
  %reshape = reshape %tile : tile<1x64x32xf16> -> tile<64x32xf16>
  %cst_f32 = constant <f32: -1.000000e+30> : tile<64x1xf32>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<64x1xf32>
  %cst_0_f32_29 = constant <f32: 0.000000e+00> : tile<64x32xf32>
  %cst_4_i32 = constant <i32: 4> : tile<i32>
  %cst_0_i32_30 = constant <i32: 0> : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_0_i32_31 = constant <i32: 0> : tile<i32>
  %pview_32 = make_partition_view %tview_11 : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>
  %cst_0_i32_33 = constant <i32: 0> : tile<i32>
  %pview_34 = make_partition_view %tview_18 : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>
  %cst_0_f32_35 = constant <f32: 0.000000e+00> : tile<64x64xf32>
  %reshape_36 = reshape %arg28 : tile<f32> -> tile<1x1xf32>
  %bcast = broadcast %reshape_36 : tile<1x1xf32> -> tile<64x64xf32>
  %for:3 = for %loopIdx in (%cst_0_i32_30 to %cst_4_i32, step %cst_1_i32) : tile<i32> iter_values(%iterArg0 = %cst_0_f32_29, %iterArg1 = %cst_0_f32, %iterArg2 = %cst_f32) -> (tile<64x32xf32>, tile<64x1xf32>, tile<64x1xf32>) {
    %tile_41, %result_token_42 = load_view_tko weak %pview_32[%blockId_y_27, %loopIdx, %cst_0_i32_31] token = %0 : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>, tile<i32> -> tile<1x64x32xf16>, token
    %reshape_43 = reshape %tile_41 : tile<1x64x32xf16> -> tile<64x32xf16>
    %tile_44, %result_token_45 = load_view_tko weak %pview_34[%blockId_y_27, %loopIdx, %cst_0_i32_33] token = %0 : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>, tile<i32> -> tile<1x64x32xf16>, token
    %reshape_46 = reshape %tile_44 : tile<1x64x32xf16> -> tile<64x32xf16>
    %4 = permute %reshape_43 [1, 0] : tile<64x32xf16> -> tile<32x64xf16>
    %5 = mmaf %reshape, %4, %cst_0_f32_35 : tile<64x32xf16>, tile<32x64xf16>, tile<64x64xf32>
    %6 = mulf %5, %bcast  : tile<64x64xf32>
    %reduce = reduce %6 dim=1 identities=[0xFF800000 : f32] : tile<64x64xf32> -> tile<64xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %16 = maxf %reduce_lhs, %reduce_rhs : tile<f32>
      yield %16 : tile<f32>
    }
    %reshape_47 = reshape %reduce : tile<64xf32> -> tile<64x1xf32>
    %7 = maxf %iterArg2, %reshape_47 : tile<64x1xf32>
    %bcast_48 = broadcast %7 : tile<64x1xf32> -> tile<64x64xf32>
    %8 = subf %6, %bcast_48  : tile<64x64xf32>
    %9 = exp %8  : tile<64x64xf32>
    %10 = subf %iterArg2, %7  : tile<64x1xf32>
    %11 = exp %10  : tile<64x1xf32>
    %reduce_49 = reduce %9 dim=1 identities=[0.000000e+00 : f32] : tile<64x64xf32> -> tile<64xf32> 
    (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
      %16 = addf %reduce_lhs, %reduce_rhs  : tile<f32>
      yield %16 : tile<f32>
    }
    %reshape_50 = reshape %reduce_49 : tile<64xf32> -> tile<64x1xf32>
    %12 = fma %iterArg1, %11, %reshape_50  : tile<64x1xf32>
    %13 = ftof %9  : tile<64x64xf32> -> tile<64x64xf16>
    %bcast_51 = broadcast %11 : tile<64x1xf32> -> tile<64x32xf32>
    %14 = mulf %iterArg0, %bcast_51  : tile<64x32xf32>
    %15 = mmaf %13, %reshape_46, %14 : tile<64x64xf16>, tile<64x32xf16>, tile<64x32xf32>
    continue %15, %12, %7 : tile<64x32xf32>, tile<64x1xf32>, tile<64x1xf32>
  }
  %bcast_37 = broadcast %for#1 : tile<64x1xf32> -> tile<64x32xf32>
  %1 = divf %for#0, %bcast_37  : tile<64x32xf32>
  %cst_0_i32_38 = constant <i32: 0> : tile<i32>
  %2 = ftof %1  : tile<64x32xf32> -> tile<64x32xf16>
  %reshape_39 = reshape %2 : tile<64x32xf16> -> tile<1x64x32xf16>
  %pview_40 = make_partition_view %tview_25 : partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>
  %3 = store_view_tko weak %reshape_39, %pview_40[%blockId_y_27, %blockId_x, %cst_0_i32_38] token = %0 : tile<1x64x32xf16>, partition_view<tile=(1x64x32), tensor_view<?x?x?xf16, strides=[?,?,?]>>, tile<i32> -> token
  return
}
