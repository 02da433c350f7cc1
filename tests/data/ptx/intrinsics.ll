; A grab bag of operations LLVM lowers to distinct PTX instructions; each thread writes
; 32 result words to out[tid*32 .. tid*32+31] (checked against numpy in test_emulator_llvm.py).
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.ctpop.i32(i32)
declare i32 @llvm.ctlz.i32(i32, i1)
declare i32 @llvm.cttz.i32(i32, i1)
declare i32 @llvm.bitreverse.i32(i32)
declare i32 @llvm.bswap.i32(i32)
declare i32 @llvm.fshl.i32(i32, i32, i32)
declare i32 @llvm.fshr.i32(i32, i32, i32)
declare i32 @llvm.smax.i32(i32, i32)
declare i32 @llvm.umin.i32(i32, i32)
declare i32 @llvm.abs.i32(i32, i1)
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.sqrt.f32(float)
declare float @llvm.fabs.f32(float)
declare float @llvm.minnum.f32(float, float)
declare float @llvm.maxnum.f32(float, float)
declare float @llvm.floor.f32(float)
declare float @llvm.ceil.f32(float)
declare float @llvm.trunc.f32(float)
declare float @llvm.rint.f32(float)
declare float @llvm.copysign.f32(float, float)
declare double @llvm.sqrt.f64(double)
declare i64 @llvm.umul.with.overflow.i64(i64, i64)

define ptx_kernel void @grab(ptr addrspace(1) %out, ptr addrspace(1) %xs, ptr addrspace(1) %fs, ptr addrspace(1) %ds) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %px = getelementptr i32, ptr addrspace(1) %xs, i32 %tid
  %x = load i32, ptr addrspace(1) %px
  %t1 = add i32 %tid, 1
  %py = getelementptr i32, ptr addrspace(1) %xs, i32 %t1
  %y = load i32, ptr addrspace(1) %py
  %pf = getelementptr float, ptr addrspace(1) %fs, i32 %tid
  %f = load float, ptr addrspace(1) %pf
  %pg = getelementptr float, ptr addrspace(1) %fs, i32 %t1
  %g = load float, ptr addrspace(1) %pg
  %pd = getelementptr double, ptr addrspace(1) %ds, i32 %tid
  %d = load double, ptr addrspace(1) %pd
  %base = mul i32 %tid, 32
  %o = getelementptr i32, ptr addrspace(1) %out, i32 %base

  %r0 = call i32 @llvm.ctpop.i32(i32 %x)
  %r1 = call i32 @llvm.ctlz.i32(i32 %x, i1 false)
  %r2 = call i32 @llvm.cttz.i32(i32 %x, i1 false)
  %r3 = call i32 @llvm.bitreverse.i32(i32 %x)
  %r4 = call i32 @llvm.bswap.i32(i32 %x)
  %sh = and i32 %y, 31
  %r5 = call i32 @llvm.fshl.i32(i32 %x, i32 %y, i32 %sh)
  %r6 = call i32 @llvm.fshr.i32(i32 %x, i32 %y, i32 %sh)
  %r7 = call i32 @llvm.smax.i32(i32 %x, i32 %y)
  %r8 = call i32 @llvm.umin.i32(i32 %x, i32 %y)
  %r9 = call i32 @llvm.abs.i32(i32 %x, i1 false)
  %ynz = or i32 %y, 1
  %r10 = sdiv i32 %x, %ynz
  %r11 = srem i32 %x, %ynz
  %r12 = udiv i32 %x, %ynz
  %r13 = urem i32 %x, %ynz
  %r14 = ashr i32 %x, %sh
  %r15 = lshr i32 %x, %sh
  %r16 = shl i32 %x, %sh
  %xl = sext i32 %x to i64
  %yl = zext i32 %y to i64
  %ml = mul i64 %xl, %yl
  %mh = lshr i64 %ml, 32
  %r17 = trunc i64 %mh to i32
  %ff = call float @llvm.fma.f32(float %f, float %g, float 1.5)
  %r18 = bitcast float %ff to i32
  %fa = call float @llvm.fabs.f32(float %f)
  %fq = call float @llvm.sqrt.f32(float %fa)
  %r19 = bitcast float %fq to i32
  %fm = call float @llvm.minnum.f32(float %f, float %g)
  %r20 = bitcast float %fm to i32
  %fx = call float @llvm.maxnum.f32(float %f, float %g)
  %r21 = bitcast float %fx to i32
  %fl = call float @llvm.floor.f32(float %f)
  %r22 = bitcast float %fl to i32
  %fc = call float @llvm.ceil.f32(float %f)
  %r23 = bitcast float %fc to i32
  %ft = call float @llvm.trunc.f32(float %f)
  %r24 = bitcast float %ft to i32
  %fr = call float @llvm.rint.f32(float %f)
  %r25 = bitcast float %fr to i32
  %fi = fptosi float %f to i32
  %fu = fptoui float %fa to i32
  %r26 = add i32 %fi, %fu
  %fd = fdiv float %f, %g
  %r27 = bitcast float %fd to i32
  %dq = call double @llvm.sqrt.f64(double %d)
  %dd = fadd double %dq, %d
  %dt = fptrunc double %dd to float
  %r28 = bitcast float %dt to i32
  %cmp = fcmp olt float %f, %g
  %sel = select i1 %cmp, i32 %x, i32 %y
  %ucmp = fcmp uno float %f, %g
  %r29 = select i1 %ucmp, i32 7, i32 %sel
  %h = fptrunc float %f to half
  %h2 = fmul half %h, %h
  %hb = bitcast half %h2 to i16
  %r30 = zext i16 %hb to i32
  %cs = call float @llvm.copysign.f32(float %g, float %f)
  %r31 = bitcast float %cs to i32

  %v0 = insertelement <4 x i32> undef, i32 %r0, i32 0
  %v1 = insertelement <4 x i32> %v0, i32 %r1, i32 1
  %v2 = insertelement <4 x i32> %v1, i32 %r2, i32 2
  %v3 = insertelement <4 x i32> %v2, i32 %r3, i32 3
  store <4 x i32> %v3, ptr addrspace(1) %o, align 16
  %o4 = getelementptr i32, ptr addrspace(1) %o, i32 4
  store i32 %r4, ptr addrspace(1) %o4
  %o5 = getelementptr i32, ptr addrspace(1) %o, i32 5
  store i32 %r5, ptr addrspace(1) %o5
  %o6 = getelementptr i32, ptr addrspace(1) %o, i32 6
  store i32 %r6, ptr addrspace(1) %o6
  %o7 = getelementptr i32, ptr addrspace(1) %o, i32 7
  store i32 %r7, ptr addrspace(1) %o7
  %o8 = getelementptr i32, ptr addrspace(1) %o, i32 8
  store i32 %r8, ptr addrspace(1) %o8
  %o9 = getelementptr i32, ptr addrspace(1) %o, i32 9
  store i32 %r9, ptr addrspace(1) %o9
  %o10 = getelementptr i32, ptr addrspace(1) %o, i32 10
  store i32 %r10, ptr addrspace(1) %o10
  %o11 = getelementptr i32, ptr addrspace(1) %o, i32 11
  store i32 %r11, ptr addrspace(1) %o11
  %o12 = getelementptr i32, ptr addrspace(1) %o, i32 12
  store i32 %r12, ptr addrspace(1) %o12
  %o13 = getelementptr i32, ptr addrspace(1) %o, i32 13
  store i32 %r13, ptr addrspace(1) %o13
  %o14 = getelementptr i32, ptr addrspace(1) %o, i32 14
  store i32 %r14, ptr addrspace(1) %o14
  %o15 = getelementptr i32, ptr addrspace(1) %o, i32 15
  store i32 %r15, ptr addrspace(1) %o15
  %o16 = getelementptr i32, ptr addrspace(1) %o, i32 16
  store i32 %r16, ptr addrspace(1) %o16
  %o17 = getelementptr i32, ptr addrspace(1) %o, i32 17
  store i32 %r17, ptr addrspace(1) %o17
  %o18 = getelementptr i32, ptr addrspace(1) %o, i32 18
  store i32 %r18, ptr addrspace(1) %o18
  %o19 = getelementptr i32, ptr addrspace(1) %o, i32 19
  store i32 %r19, ptr addrspace(1) %o19
  %o20 = getelementptr i32, ptr addrspace(1) %o, i32 20
  store i32 %r20, ptr addrspace(1) %o20
  %o21 = getelementptr i32, ptr addrspace(1) %o, i32 21
  store i32 %r21, ptr addrspace(1) %o21
  %o22 = getelementptr i32, ptr addrspace(1) %o, i32 22
  store i32 %r22, ptr addrspace(1) %o22
  %o23 = getelementptr i32, ptr addrspace(1) %o, i32 23
  store i32 %r23, ptr addrspace(1) %o23
  %o24 = getelementptr i32, ptr addrspace(1) %o, i32 24
  store i32 %r24, ptr addrspace(1) %o24
  %o25 = getelementptr i32, ptr addrspace(1) %o, i32 25
  store i32 %r25, ptr addrspace(1) %o25
  %o26 = getelementptr i32, ptr addrspace(1) %o, i32 26
  store i32 %r26, ptr addrspace(1) %o26
  %o27 = getelementptr i32, ptr addrspace(1) %o, i32 27
  store i32 %r27, ptr addrspace(1) %o27
  %o28 = getelementptr i32, ptr addrspace(1) %o, i32 28
  store i32 %r28, ptr addrspace(1) %o28
  %o29 = getelementptr i32, ptr addrspace(1) %o, i32 29
  store i32 %r29, ptr addrspace(1) %o29
  %o30 = getelementptr i32, ptr addrspace(1) %o, i32 30
  store i32 %r30, ptr addrspace(1) %o30
  %o31 = getelementptr i32, ptr addrspace(1) %o, i32 31
  store i32 %r31, ptr addrspace(1) %o31
  ret void
}
