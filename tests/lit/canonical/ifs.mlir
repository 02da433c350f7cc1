// RUN: %tileir opt %s --passes canonicalize,dce | %FileCheck %s
// The `if` patterns beyond the folds: nested ifs with nothing else to do combine on `a and b`
// (CombineNestedIfs), branches that only yield values of the condition's shape become a select
// (ConvertToSelect), an else that only yields nothing is dropped (RemoveEmptyElseBranch). An inner if
// with an else that does something, or results of another shape, are kept.

// CHECK-LABEL: entry @k
// CHECK: %[[AB:.*]] = andi %arg1, %arg2 : tile<i1>
// CHECK-NEXT: if %[[AB]] {
// CHECK-NEXT: store_ptr_tko
// CHECK-NEXT: }
// CHECK: select %arg1, %arg3, %arg4 : tile<i1>, tile<f32>
// CHECK: if %arg2 {
// CHECK-NEXT: store_ptr_tko
// CHECK-NEXT: }
// CHECK-NOT: else
// CHECK: return
entry @k(%arg0: tile<ptr<f32>>, %a: tile<i1>, %b: tile<i1>, %x: tile<f32>, %y: tile<f32>) {
  %0 = make_token : token
  %p = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %v = reshape %x : tile<f32> -> tile<1xf32>
  if %a {
    if %b {
      %t = store_ptr_tko weak %p, %v token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
    }
  }
  %s = if %a -> (tile<f32>) {
    yield %x : tile<f32>
  } else {
    yield %y : tile<f32>
  }
  %w = reshape %s : tile<f32> -> tile<1xf32>
  if %b {
    %t2 = store_ptr_tko weak %p, %w token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
  } else {
    yield
  }
  return
}

// CHECK-LABEL: entry @kept
// CHECK: if %arg1 {
// CHECK-NEXT: if %arg2 {
// CHECK: } else {
// CHECK: if %arg1 -> (tile<1xf32>)
// CHECK-NOT: select
// CHECK: return
entry @kept(%arg0: tile<ptr<f32>>, %a: tile<i1>, %b: tile<i1>, %x0: tile<f32>, %y0: tile<f32>) {
  %0 = make_token : token
  %p = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %x = reshape %x0 : tile<f32> -> tile<1xf32>
  %y = reshape %y0 : tile<f32> -> tile<1xf32>
  if %a {
    if %b {
      %t = store_ptr_tko weak %p, %x token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
    } else {
      %u = store_ptr_tko weak %p, %y token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
    }
  }
  %s = if %a -> (tile<1xf32>) {
    yield %x : tile<1xf32>
  } else {
    yield %y : tile<1xf32>
  }
  %t3 = store_ptr_tko weak %p, %s token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
  return
}
