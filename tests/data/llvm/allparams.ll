; One parameter of every TileIR scalar type, stored to out[] as raw bits, so a
; launcher's argument marshalling can be checked element by element:
; out = {flag, i8, i16, i32, i64, f16 bits, bf16 bits, f32 bits, f64 bits} as u64.
target triple = "nvptx64-nvidia-cuda"

define ptx_kernel void @allparams(ptr addrspace(1) %out, i1 %flag, i8 %v8, i16 %v16, i32 %v32, i64 %v64,
                                  half %h, bfloat %bf, float %f, double %d) {
entry:
  %e0 = zext i1 %flag to i64
  %e1 = sext i8 %v8 to i64
  %e2 = sext i16 %v16 to i64
  %e3 = sext i32 %v32 to i64
  %hb = bitcast half %h to i16
  %e5 = zext i16 %hb to i64
  %bb = bitcast bfloat %bf to i16
  %e6 = zext i16 %bb to i64
  %fb = bitcast float %f to i32
  %e7 = zext i32 %fb to i64
  %e8 = bitcast double %d to i64
  store i64 %e0, ptr addrspace(1) %out, align 8
  %p1 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 1
  store i64 %e1, ptr addrspace(1) %p1, align 8
  %p2 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 2
  store i64 %e2, ptr addrspace(1) %p2, align 8
  %p3 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 3
  store i64 %e3, ptr addrspace(1) %p3, align 8
  %p4 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 4
  store i64 %v64, ptr addrspace(1) %p4, align 8
  %p5 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 5
  store i64 %e5, ptr addrspace(1) %p5, align 8
  %p6 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 6
  store i64 %e6, ptr addrspace(1) %p6, align 8
  %p7 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 7
  store i64 %e7, ptr addrspace(1) %p7, align 8
  %p8 = getelementptr inbounds i64, ptr addrspace(1) %out, i64 8
  store i64 %e8, ptr addrspace(1) %p8, align 8
  ret void
}
