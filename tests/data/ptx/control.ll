; Per-thread control flow as LLVM lays it out: a non-inlined function with a data-dependent loop,
; a switch (jump table), a dynamically indexed local array, 128-bit arithmetic, a cmpxchg loop
; (atomic float max), atomicrmw and half-precision vector math. Thread t writes out[t*8 .. t*8+7].
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

define internal i32 @steps(i32 %x) noinline {
entry:
  br label %loop
loop:
  %v = phi i32 [ %x, %entry ], [ %next, %step ]
  %c = phi i32 [ 0, %entry ], [ %c1, %step ]
  %done = icmp ule i32 %v, 1
  br i1 %done, label %exit, label %step
step:
  %odd = and i32 %v, 1
  %isodd = icmp ne i32 %odd, 0
  %h = lshr i32 %v, 1
  %t3 = mul i32 %v, 3
  %t31 = add i32 %t3, 1
  %next = select i1 %isodd, i32 %t31, i32 %h
  %c1 = add i32 %c, 1
  br label %loop
exit:
  ret i32 %c
}

define ptx_kernel void @control(ptr addrspace(1) %out, ptr addrspace(1) %fmax, ptr addrspace(1) %cnt, i64 %k) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %base = mul i32 %tid, 8
  %o = getelementptr i32, ptr addrspace(1) %out, i32 %base
  %t1 = add i32 %tid, 1
  %st = call i32 @steps(i32 %t1)
  store i32 %st, ptr addrspace(1) %o
  %sel = urem i32 %tid, 7
  switch i32 %sel, label %sw.default [ i32 0, label %sw0
                                       i32 1, label %sw1
                                       i32 2, label %sw2
                                       i32 3, label %sw3
                                       i32 4, label %sw4 ]
sw0: br label %sw.end
sw1: br label %sw.end
sw2: br label %sw.end
sw3: br label %sw.end
sw4: br label %sw.end
sw.default: br label %sw.end
sw.end:
  %swv = phi i32 [ 100, %sw0 ], [ 101, %sw1 ], [ 102, %sw2 ], [ 103, %sw3 ], [ 104, %sw4 ], [ -1, %sw.default ]
  %o1 = getelementptr i32, ptr addrspace(1) %o, i32 1
  store i32 %swv, ptr addrspace(1) %o1
  ; a local array, filled and read back at a thread-dependent index
  %arr = alloca [16 x i32], align 4
  br label %fill
fill:
  %j = phi i32 [ 0, %sw.end ], [ %j1, %fill ]
  %pj = getelementptr [16 x i32], ptr %arr, i32 0, i32 %j
  %jv = mul i32 %j, %t1
  store volatile i32 %jv, ptr %pj
  %j1 = add i32 %j, 1
  %jm = icmp ult i32 %j1, 16
  br i1 %jm, label %fill, label %filled
filled:
  %idx = and i32 %tid, 15
  %pidx = getelementptr [16 x i32], ptr %arr, i32 0, i32 %idx
  %lv = load volatile i32, ptr %pidx
  %o2 = getelementptr i32, ptr addrspace(1) %o, i32 2
  store i32 %lv, ptr addrspace(1) %o2
  ; 128-bit: (k * (tid+1)) >> 64 and the low word
  %kw = zext i64 %k to i128
  %tw = zext i32 %t1 to i128
  %prod = mul i128 %kw, %tw
  %hi = lshr i128 %prod, 64
  %hi32 = trunc i128 %hi to i32
  %lo32 = trunc i128 %prod to i32
  %o3 = getelementptr i32, ptr addrspace(1) %o, i32 3
  store i32 %hi32, ptr addrspace(1) %o3
  %o4 = getelementptr i32, ptr addrspace(1) %o, i32 4
  store i32 %lo32, ptr addrspace(1) %o4
  ; atomic float max through a cmpxchg loop
  %f = uitofp i32 %sel to float
  %fv = fmul float %f, 1.5
  %fbits = bitcast float %fv to i32
  %old0 = load atomic i32, ptr addrspace(1) %fmax monotonic, align 4
  br label %cas
cas:
  %old = phi i32 [ %old0, %filled ], [ %seen, %cas ]
  %oldf = bitcast i32 %old to float
  %gt = fcmp ogt float %fv, %oldf
  %newf = select i1 %gt, float %fv, float %oldf
  %new = bitcast float %newf to i32
  %pair = cmpxchg ptr addrspace(1) %fmax, i32 %old, i32 %new monotonic monotonic
  %seen = extractvalue { i32, i1 } %pair, 0
  %ok = extractvalue { i32, i1 } %pair, 1
  br i1 %ok, label %cas.done, label %cas
cas.done:
  %prev = atomicrmw add ptr addrspace(1) %cnt, i32 %t1 monotonic
  %o5 = getelementptr i32, ptr addrspace(1) %o, i32 5
  store i32 %prev, ptr addrspace(1) %o5
  %mx = atomicrmw umax ptr addrspace(1) %cnt, i32 0 monotonic
  ; half2 math
  %h = uitofp i32 %tid to half
  %hv0 = insertelement <2 x half> undef, half %h, i32 0
  %hv1 = insertelement <2 x half> %hv0, half 0xH3C00, i32 1
  %hsq = fmul <2 x half> %hv1, %hv1
  %hadd = fadd <2 x half> %hsq, <half 0xH3800, half 0xH4000>
  %hb = bitcast <2 x half> %hadd to i32
  %o6 = getelementptr i32, ptr addrspace(1) %o, i32 6
  store i32 %hb, ptr addrspace(1) %o6
  %o7 = getelementptr i32, ptr addrspace(1) %o, i32 7
  store i32 %mx, ptr addrspace(1) %o7
  ret void
}
