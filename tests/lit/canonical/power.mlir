// RUN: %tileir opt %s --passes canonicalize,dce | %FileCheck %s
// Powers by 2 are squares and powers by 1 their source, whether written `fpowf` of a float 2.0
// (reshaped and broadcast from a scalar, as cuTile writes it up to 13.3) or `fpowi` of 2 (13.4); a
// power by 3 stays a power (x * x * x rounds twice).

// CHECK-LABEL: entry @k
// CHECK: %[[SQ:.*]] = mulf %[[X:.*]], %[[X]]
// CHECK: %[[SQI:.*]] = mulf %[[X]], %[[X]]
// CHECK: fpowf %[[X]], %{{.*}} : tile<64xf32>
// CHECK: store_ptr_tko weak %{{.*}}, %[[SQ]]
// CHECK: store_ptr_tko weak %{{.*}}, %[[SQI]]
// CHECK: store_ptr_tko weak %{{.*}}, %[[X]]
// CHECK-NOT: fpowi
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<f32>) {
  %0 = make_token : token
  %p1 = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %p = broadcast %p1 : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %x1 = reshape %arg1 : tile<f32> -> tile<1xf32>
  %x = broadcast %x1 : tile<1xf32> -> tile<64xf32>
  %two = constant <f32: 2.0> : tile<f32>
  %two1 = reshape %two : tile<f32> -> tile<1xf32>
  %twos = broadcast %two1 : tile<1xf32> -> tile<64xf32>
  %sq = fpowf %x, %twos : tile<64xf32>
  %itwo = constant <i32: 2> : tile<64xi32>
  %sqi = fpowi %x, %itwo : tile<64xf32>, tile<64xi32>
  %ione = constant <i32: 1> : tile<64xi32>
  %same = fpowi %x, %ione : tile<64xf32>, tile<64xi32>
  %three = constant <f32: 3.0> : tile<64xf32>
  %cube = fpowf %x, %three : tile<64xf32>
  %t1 = store_ptr_tko weak %p, %sq token=%0 : tile<64xptr<f32>>, tile<64xf32> -> token
  %t2 = store_ptr_tko weak %p, %sqi token=%t1 : tile<64xptr<f32>>, tile<64xf32> -> token
  %t3 = store_ptr_tko weak %p, %same token=%t2 : tile<64xptr<f32>>, tile<64xf32> -> token
  %t4 = store_ptr_tko weak %p, %cube token=%t3 : tile<64xptr<f32>>, tile<64xf32> -> token
  return
}
