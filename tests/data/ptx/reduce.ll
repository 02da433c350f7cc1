; Block sum of in[0..n): a strided loop per thread, a shared-memory tree, then warp shuffles;
; block b writes out[b]. Exercises loops, barriers, shfl.sync and predicated tails.
target triple = "nvptx64-nvidia-cuda"

@partial = internal addrspace(3) global [256 x float] undef, align 4

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
declare void @llvm.nvvm.barrier0()
declare float @llvm.nvvm.shfl.sync.down.f32(i32, float, i32, i32)

define ptx_kernel void @reduce(ptr addrspace(1) %in, ptr addrspace(1) %out, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %nb = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %base = mul i32 %bid, 256
  %first = add i32 %base, %tid
  %stride = mul i32 %nb, 256
  br label %loop

loop:
  %i = phi i32 [ %first, %entry ], [ %inext, %body ]
  %acc = phi float [ 0.0, %entry ], [ %acc2, %body ]
  %more = icmp slt i32 %i, %n
  br i1 %more, label %body, label %done

body:
  %pi = getelementptr float, ptr addrspace(1) %in, i32 %i
  %v = load float, ptr addrspace(1) %pi, align 4
  %acc2 = fadd float %acc, %v
  %inext = add i32 %i, %stride
  br label %loop

done:
  %ps = getelementptr [256 x float], ptr addrspace(3) @partial, i32 0, i32 %tid
  store float %acc, ptr addrspace(3) %ps, align 4
  call void @llvm.nvvm.barrier0()
  br label %tree

tree:
  %s = phi i32 [ 128, %done ], [ %s2, %tree_next ]
  %active = icmp ult i32 %tid, %s
  br i1 %active, label %tree_add, label %tree_next

tree_add:
  %other = add i32 %tid, %s
  %po = getelementptr [256 x float], ptr addrspace(3) @partial, i32 0, i32 %other
  %a = load float, ptr addrspace(3) %ps, align 4
  %b = load float, ptr addrspace(3) %po, align 4
  %sum = fadd float %a, %b
  store float %sum, ptr addrspace(3) %ps, align 4
  br label %tree_next

tree_next:
  call void @llvm.nvvm.barrier0()
  %s2 = lshr i32 %s, 1
  %cont = icmp ugt i32 %s2, 16
  br i1 %cont, label %tree, label %warp

warp:
  %is_w0 = icmp ult i32 %tid, 32
  br i1 %is_w0, label %shuffle, label %exit

shuffle:
  %x0 = load float, ptr addrspace(3) %ps, align 4
  %p16 = getelementptr [256 x float], ptr addrspace(3) @partial, i32 0, i32 16
  %y16 = add i32 %tid, 16
  %py = getelementptr [256 x float], ptr addrspace(3) @partial, i32 0, i32 %y16
  %x1v = load float, ptr addrspace(3) %py, align 4
  %lo = icmp ult i32 %tid, 16
  %x1 = select i1 %lo, float %x1v, float 0.0
  %x = fadd float %x0, %x1
  %d8 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x, i32 8, i32 31)
  %x8 = fadd float %x, %d8
  %d4 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x8, i32 4, i32 31)
  %x4 = fadd float %x8, %d4
  %d2 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x4, i32 2, i32 31)
  %x2 = fadd float %x4, %d2
  %d1 = call float @llvm.nvvm.shfl.sync.down.f32(i32 -1, float %x2, i32 1, i32 31)
  %xf = fadd float %x2, %d1
  %t0 = icmp eq i32 %tid, 0
  br i1 %t0, label %write, label %exit

write:
  %pout = getelementptr float, ptr addrspace(1) %out, i32 %bid
  store float %xf, ptr addrspace(1) %pout, align 4
  br label %exit

exit:
  ret void
}
