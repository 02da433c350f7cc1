#blocked = #nv_tileas.blocked<threads=128, vec=8>
#mma = #nv_tileas.mma<warps=1x2x2, per_warp=1x4x8 blocks>
entry @mm(%arg0: tile<ptr<f16>>, %arg1: tile<ptr<f16>>, %arg2: tile<ptr<f16>>, %arg3: tile<i32>) {
  %assume = assume div_by<64>, %arg3 : tile<i32>
  %assume_assume = assume bounded<64, ?>, %assume : tile<i32>
  %cst_64_i32 = constant <i32: 64> : tile<i32>
  %0 = divi %assume_assume, %cst_64_i32 signed : tile<i32>
  %cst_0_i32 = constant <i32: 0> : tile<i32>
  %cst_1_i32 = constant <i32: 1> : tile<i32>
  %cst_0_f32 = constant <f32: 0.000000e+00> : tile<128x128xf32, #blocked>
  %assume_0 = assume div_by<16>, %arg0 : tile<ptr<f16>>
  %tview = make_tensor_view %assume_0, shape = [128, %assume_assume], strides = [%assume_assume, 1] : tile<i32> -> tensor_view<128x?xf16, strides=[?,1]>
  %pview = make_partition_view %tview : partition_view<tile=(128x64), tensor_view<128x?xf16, strides=[?,1]>>
  %1 = make_token : token
  %assume_1 = assume div_by<16>, %arg1 : tile<ptr<f16>>
  %tview_2 = make_tensor_view %assume_1, shape = [%assume_assume, 128], strides = [128, 1] : tile<i32> -> tensor_view<?x128xf16, strides=[128,1]>
  %pview_3 = make_partition_view %tview_2 : partition_view<tile=(64x128), tensor_view<?x128xf16, strides=[128,1]>>
  %2 = nv_tileas.convert_layout %cst_0_f32 {to = "#mma<warps=1x2x2, per_warp=1x4x8 blocks>", rematerialize} : tile<128x128xf32, #blocked> -> tile<128x128xf32, #mma>
  %for = for %loopIdx in (%cst_0_i32 to %0, step %cst_1_i32) : tile<i32> iter_values(%iterArg0 = %2) -> (tile<128x128xf32, #mma>) {
    %tile, %result_token = load_view_tko weak %pview[%cst_0_i32, %loopIdx] token = %1 : partition_view<tile=(128x64), tensor_view<128x?xf16, strides=[?,1]>>, tile<i32> -> tile<128x64xf16, #blocked>, token
    %tile_7, %result_token_8 = load_view_tko weak %pview_3[%loopIdx, %cst_0_i32] token = %1 : partition_view<tile=(64x128), tensor_view<?x128xf16, strides=[128,1]>>, tile<i32> -> tile<64x128xf16, #blocked>, token
    %5 = mmaf %tile, %tile_7, %iterArg0 : tile<128x64xf16, #blocked>, tile<64x128xf16, #blocked>, tile<128x128xf32, #mma>
    continue %5 : tile<128x128xf32, #mma>
  }
  %3 = ftof %for  : tile<128x128xf32, #mma> -> tile<128x128xf16, #mma>
  %assume_4 = assume div_by<16>, %arg2 : tile<ptr<f16>>
  %tview_5 = make_tensor_view %assume_4, shape = [128, 128], strides = [128, 1] : tensor_view<128x128xf16, strides=[128,1]>
  %pview_6 = make_partition_view %tview_5 : partition_view<tile=(128x128), tensor_view<128x128xf16, strides=[128,1]>>
  %4 = store_view_tko weak %3, %pview_6[%cst_0_i32, %cst_0_i32] token = %1 : tile<128x128xf16, #mma>, partition_view<tile=(128x128), tensor_view<128x128xf16, strides=[128,1]>>, tile<i32> -> token
  return
}
