// Issue 37: a 0-d constant reshaped to tile<1xf32> in a kernel asking for 2 CTAs a cluster (NVIDIA's
// tileiras compiles it): IndexError in tileaa/clusters.py on sm_90/100/120.
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>) optimization_hints=<default = {num_cta_in_cga = 2}> {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [%arg2] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview = make_partition_view %tview : partition_view<tile=(1), tensor_view<?xf32, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %c = constant <f32: 1.000000e+00> : tile<f32>
  %r = reshape %c : tile<f32> -> tile<1xf32>
  %6 = store_view_tko weak %r, %pview[%blockId_x] token = %0 : tile<1xf32>, partition_view<tile=(1), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
