; vadd with full debug info (DWARF): LLVM marks the PTX `.target ..., debug`.
; Tests swap emissionKind to LineTablesOnly to get `.loc` line info without DWARF.
target triple = "nvptx64-nvidia-cuda"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()

define ptx_kernel void @vadd_dbg(ptr addrspace(1) %a, ptr addrspace(1) %b, ptr addrspace(1) %c) !dbg !5 {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x(), !dbg !8
  %idx = zext i32 %tid to i64, !dbg !8
  %pa = getelementptr inbounds float, ptr addrspace(1) %a, i64 %idx, !dbg !9
  %pb = getelementptr inbounds float, ptr addrspace(1) %b, i64 %idx, !dbg !9
  %va = load float, ptr addrspace(1) %pa, align 4, !dbg !9
  %vb = load float, ptr addrspace(1) %pb, align 4, !dbg !9
  %sum = fadd float %va, %vb, !dbg !10
  %pc = getelementptr inbounds float, ptr addrspace(1) %c, i64 %idx, !dbg !11
  store float %sum, ptr addrspace(1) %pc, align 4, !dbg !11
  ret void, !dbg !12
}

!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!3, !4}
!0 = distinct !DICompileUnit(language: DW_LANG_C, file: !1, producer: "tileiras-test", isOptimized: false, runtimeVersion: 0, emissionKind: FullDebug)
!1 = !DIFile(filename: "vadd.tile", directory: "kernels")
!3 = !{i32 2, !"Debug Info Version", i32 3}
!4 = !{i32 2, !"Dwarf Version", i32 2}
!5 = distinct !DISubprogram(name: "vadd_dbg", scope: !1, file: !1, line: 1, type: !6, scopeLine: 1, spFlags: DISPFlagDefinition, unit: !0)
!6 = !DISubroutineType(types: !7)
!7 = !{null}
!8 = !DILocation(line: 2, column: 3, scope: !5)
!9 = !DILocation(line: 3, column: 5, scope: !5)
!10 = !DILocation(line: 4, column: 7, scope: !5)
!11 = !DILocation(line: 5, column: 3, scope: !5)
!12 = !DILocation(line: 6, column: 1, scope: !5)
