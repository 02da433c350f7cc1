// RUN: %tileir opt %s --passes canonical-form,nv_tileas --gpu-name sm_90 | %FileCheck %s --check-prefix=SM90
// RUN: %tileir opt %s --passes canonical-form,nv_tileas --gpu-name sm_100 | %FileCheck %s --check-prefix=SM100
// RUN: %tileir opt %s --passes canonical-form,nv_tileas --gpu-name sm_80 > %t.mlir
// RUN: %tileir opt %t.mlir --passes "" | diff %t.mlir -
// nv_tileas' tile types carry their layouts: the accumulator of a K loop's mma is in the target's
// fragment layout (wgmma's warpgroup rows on sm_90, tensor memory's lane quarters on sm_100, mma.sync's
// on sm_80), named once at the top; the zero it starts from is converted by an op. The printed text
// reads back as it was printed (the last two lines: parsed, verified, printed again, unchanged).

// SM90: #blocked = #nv_tileas.blocked<threads=128, vec=8>
// SM90: #mma = #nv_tileas.mma<warps=1x4x1, per_warp=1x2x16 blocks, warpgroup rows>
// SM90: %[[Z:.*]] = constant <f32: 0.000000e+00> : tile<128x128xf32, #blocked>
// SM90: %[[ACC:.*]] = nv_tileas.convert_layout %[[Z]] {{.*}} : tile<128x128xf32, #blocked> -> tile<128x128xf32, #mma>
// SM90: iter_values(%[[ARG:.*]] = %[[ACC]]) -> (tile<128x128xf32, #mma>)
// SM90: mmaf {{.*}}, %[[ARG]] : tile<128x64xf16, #blocked>, tile<64x128xf16, #blocked>, tile<128x128xf32, #mma>
// SM90: ftof {{.*}} : tile<128x128xf32, #mma> -> tile<128x128xf16, #mma>

// SM100: #tmem_acc = #nv_tileas.tmem_acc<warps=1x4x1, per_warp=1x2x16 blocks>
// SM100: mmaf {{.*}} : tile<128x64xf16, #blocked>, tile<64x128xf16, #blocked>, tile<128x128xf32, #tmem_acc>

entry @mm(%a: tile<ptr<f16>>, %b: tile<ptr<f16>>, %c: tile<ptr<f16>>, %k: tile<i32>) {
  %ka = assume div_by<64>, %k : tile<i32>
  %kb = assume bounded<64, ?>, %ka : tile<i32>
  %ap = assume div_by<16>, %a : tile<ptr<f16>>
  %bp = assume div_by<16>, %b : tile<ptr<f16>>
  %cp = assume div_by<16>, %c : tile<ptr<f16>>
  %av = make_tensor_view %ap, shape = [128, %kb], strides = [%kb, 1] : tile<i32> -> tensor_view<128x?xf16, strides=[?,1]>
  %bv = make_tensor_view %bp, shape = [%kb, 128], strides = [128, 1] : tile<i32> -> tensor_view<?x128xf16, strides=[128,1]>
  %cv = make_tensor_view %cp, shape = [128, 128], strides = [128, 1] : tensor_view<128x128xf16, strides=[128,1]>
  %ap2 = make_partition_view %av : partition_view<tile=(128x64), tensor_view<128x?xf16, strides=[?,1]>>
  %bp2 = make_partition_view %bv : partition_view<tile=(64x128), tensor_view<?x128xf16, strides=[128,1]>>
  %cp2 = make_partition_view %cv : partition_view<tile=(128x128), tensor_view<128x128xf16, strides=[128,1]>>
  %zero = constant <f32: 0.0> : tile<128x128xf32>
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c64 = constant <i32: 64> : tile<i32>
  %n = divi %kb, %c64 signed : tile<i32>
  %t = make_token : token
  %acc = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%x = %zero) -> (tile<128x128xf32>) {
    %at, %t1 = load_view_tko weak %ap2[%c0, %i] token = %t : partition_view<tile=(128x64), tensor_view<128x?xf16, strides=[?,1]>>, tile<i32> -> tile<128x64xf16>, token
    %bt, %t2 = load_view_tko weak %bp2[%i, %c0] token = %t : partition_view<tile=(64x128), tensor_view<?x128xf16, strides=[128,1]>>, tile<i32> -> tile<64x128xf16>, token
    %y = mmaf %at, %bt, %x : tile<128x64xf16>, tile<64x128xf16>, tile<128x128xf32>
    continue %y : tile<128x128xf32>
  }
  %h = ftof %acc : tile<128x128xf32> -> tile<128x128xf16>
  %t3 = store_view_tko weak %h, %cp2[%c0, %c0] token = %t : tile<128x128xf16>, partition_view<tile=(128x128), tensor_view<128x128xf16, strides=[128,1]>>, tile<i32> -> token
  return
}
