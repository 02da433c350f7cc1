// RUN: %tileir opt %s --passes canonicalize,dce | %FileCheck %s
// The folds and `if` patterns: a constant condition inlines its branch, `xori(c, true)` swaps the
// branches, select and integer identities fold, addf folds finite constants.

// CHECK-LABEL: entry @k
// CHECK-NOT: if %cst
// CHECK: %[[SUM:.*]] = constant <f32: 3.500000e+00> : tile<f32>
// CHECK: if %arg2
// CHECK-NEXT: subf
// CHECK: else
// CHECK-NEXT: addf
// CHECK: store_ptr_tko weak %arg0, %[[SUM]]
entry @k(%arg0: tile<ptr<f32>>, %arg1: tile<f32>, %arg2: tile<i1>, %arg3: tile<i32>) {
  %0 = make_token : token
  %true = constant <i1: true> : tile<i1>
  %c0 = constant <i32: 0> : tile<i32>
  %one = constant <f32: 1.0> : tile<f32>
  %two = constant <f32: 2.5> : tile<f32>
  %r = if %true -> (tile<f32>) {
    %s = addf %one, %two : tile<f32>
    yield %s : tile<f32>
  } else {
    yield %one : tile<f32>
  }
  %n = xori %arg2, %true : tile<i1>
  %q = if %n -> (tile<f32>) {
    %a = addf %arg1, %one : tile<f32>
    yield %a : tile<f32>
  } else {
    %b = subf %arg1, %one : tile<f32>
    yield %b : tile<f32>
  }
  %i = addi %arg3, %c0 : tile<i32>
  %sel = select %arg2, %r, %r : tile<i1>, tile<f32>
  %t = store_ptr_tko weak %arg0, %sel token=%0 : tile<ptr<f32>>, tile<f32> -> token
  %t2 = store_ptr_tko weak %arg0, %q token=%t : tile<ptr<f32>>, tile<f32> -> token
  return
}

// An `if` whose branch leaves the loop (break) is kept, even with nothing else in it.
// CHECK-LABEL: entry @keeps_break
// CHECK: loop
// CHECK: if %{{.*}} {
// CHECK: break
entry @keeps_break(%arg0: tile<i32>) {
  %c1 = constant <i32: 1> : tile<i32>
  %r = loop iter_values(%i = %arg0) : tile<i32> -> tile<i32> {
    %done = cmpi less_than %i, %c1, signed : tile<i32> -> tile<i1>
    if %done {
    } else {
      break %i : tile<i32>
    }
    %n = addi %i, %c1 : tile<i32>
    continue %n : tile<i32>
  }
  return
}

// Two adjacent ifs on one condition become one; select(not c, a, b) swaps its arms; a select nested
// in an arm on the same condition is that arm's value.
// CHECK-LABEL: entry @combine
// CHECK: %[[IF:.*]]:2 = if %arg1 -> (tile<f32>, tile<f32>) {
// CHECK: addf
// CHECK: mulf
// CHECK: yield
// CHECK-NOT: if %arg1
// CHECK: select %arg1, %arg0, %[[IF]]#1
// CHECK: select %arg1, %[[IF]]#0, %arg0
entry @combine(%arg0: tile<f32>, %arg1: tile<i1>, %arg2: tile<ptr<f32>>) {
  %0 = make_token : token
  %true = constant <i1: true> : tile<i1>
  %a = if %arg1 -> (tile<f32>) {
    %x = addf %arg0, %arg0 : tile<f32>
    yield %x : tile<f32>
  } else {
    yield %arg0 : tile<f32>
  }
  %b = if %arg1 -> (tile<f32>) {
    %y = mulf %arg0, %arg0 : tile<f32>
    yield %y : tile<f32>
  } else {
    yield %arg0 : tile<f32>
  }
  %n = xori %arg1, %true : tile<i1>
  %s1 = select %n, %b, %arg0 : tile<i1>, tile<f32>
  %inner = select %arg1, %a, %b : tile<i1>, tile<f32>
  %s2 = select %arg1, %inner, %arg0 : tile<i1>, tile<f32>
  %t1 = store_ptr_tko weak %arg2, %s1 token=%0 : tile<ptr<f32>>, tile<f32> -> token
  %t2 = store_ptr_tko weak %arg2, %s2 token=%t1 : tile<ptr<f32>>, tile<f32> -> token
  return
}
