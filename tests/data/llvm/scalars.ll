; out[i] = a * (float)i + b + (float)c, with i32/f32/i64 scalar parameters.
; The entry is marked the legacy way, with !nvvm.annotations (kernel + maxntid).
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()

define void @axpb(ptr addrspace(1) %out, i32 %count, float %a, i64 %c, float %b) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %base = mul i32 %ctaid, %ntid
  %i = add i32 %base, %tid
  %inside = icmp slt i32 %i, %count
  br i1 %inside, label %body, label %done

body:
  %fi = sitofp i32 %i to float
  %ax = fmul float %a, %fi
  %axb = fadd float %ax, %b
  %fc = sitofp i64 %c to float
  %r = fadd float %axb, %fc
  %idx = zext i32 %i to i64
  %p = getelementptr inbounds float, ptr addrspace(1) %out, i64 %idx
  store float %r, ptr addrspace(1) %p, align 4
  br label %done

done:
  ret void
}

!nvvm.annotations = !{!0, !1}
!0 = !{ptr @axpb, !"kernel", i32 1}
!1 = !{ptr @axpb, !"maxntidx", i32 256}
