// RUN: %tileir opt %s --passes canonicalize,dce | %FileCheck %s
// MoveTerminatorToParent: a branch that returns, where only the kernel's exit follows the `if`'s block,
// ends in a yield instead, and the ops after the `if` move into the other branch (whose yields stand for
// the `if`'s results there). One exit per kernel. Two guards in a row nest. (A `return` inside a loop
// is not cuda_tile.)

// CHECK-LABEL: entry @guard
// CHECK: if %arg1 {
// CHECK-NEXT: } else {
// CHECK: store_ptr_tko
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: return
entry @guard(%arg0: tile<ptr<f32>>, %c: tile<i1>, %x: tile<f32>) {
  %0 = make_token : token
  if %c {
    return
  }
  %p = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %v = reshape %x : tile<f32> -> tile<1xf32>
  %t = store_ptr_tko weak %p, %v token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
  return
}

// The else returns; the then branch's yield replaces the `if`'s result after it.
// CHECK-LABEL: entry @result
// CHECK: if %arg1 {
// CHECK-NEXT: %[[S:.*]] = addf %arg2, %arg2
// CHECK: reshape %[[S]]
// CHECK: store_ptr_tko
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: return
entry @result(%arg0: tile<ptr<f32>>, %c: tile<i1>, %x: tile<f32>) {
  %0 = make_token : token
  %s = if %c -> (tile<f32>) {
    %y = addf %x, %x : tile<f32>
    yield %y : tile<f32>
  } else {
    return
  }
  %p = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %v = reshape %s : tile<f32> -> tile<1xf32>
  %t = store_ptr_tko weak %p, %v token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
  return
}

// Two guards: the second moves into the first's else, then its own rest into its else.
// CHECK-LABEL: entry @two
// CHECK: if %arg1 {
// CHECK-NEXT: } else {
// CHECK-NEXT: if %arg2 {
// CHECK-NEXT: } else {
// CHECK: store_ptr_tko
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: return
entry @two(%arg0: tile<ptr<f32>>, %a: tile<i1>, %b: tile<i1>, %x: tile<f32>) {
  %0 = make_token : token
  if %a {
    return
  }
  if %b {
    return
  }
  %p = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %v = reshape %x : tile<f32> -> tile<1xf32>
  %t = store_ptr_tko weak %p, %v token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
  return
}

// Both branches return: what follows never runs.
// CHECK-LABEL: entry @both
// CHECK: if %arg1 {
// CHECK-NEXT: store_ptr_tko
// CHECK-NEXT: }
// CHECK-NEXT: return
// CHECK-NOT: store_ptr_tko
entry @both(%arg0: tile<ptr<f32>>, %c: tile<i1>, %x: tile<f32>) {
  %0 = make_token : token
  %p = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %v = reshape %x : tile<f32> -> tile<1xf32>
  if %c {
    %t1 = store_ptr_tko weak %p, %v token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
    return
  } else {
    return
  }
  %t = store_ptr_tko weak %p, %v token=%0 : tile<1xptr<f32>>, tile<1xf32> -> token
  return
}
